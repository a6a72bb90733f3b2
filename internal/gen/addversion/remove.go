package addversion

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	sigsyaml "sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/repofiles"
)

// CheckNotStored refuses to remove version while storedVersions, the CRD's
// status.storedVersions on the cluster, lists it: objects may still be stored in it, and the
// API server could not read them once the CRD no longer has it. They leave it when every
// object is rewritten in the storage version (a storage version migration, or reading and
// writing back each object) and the version is then taken out of status.storedVersions.
func CheckNotStored(version string, storedVersions []string) error {
	if slices.Contains(storedVersions, version) {
		return fmt.Errorf("the CRD's status.storedVersions (%s) lists %s: objects may still be stored in it. "+
			"Rewrite every object in the storage version, remove %s from status.storedVersions, then remove the version",
			strings.Join(storedVersions, ", "), version, version)
	}
	return nil
}

// RemoveOptions say which version to remove from which kind.
type RemoveOptions struct {
	Root, Kind, Version string
	// StoredVersions is the CRD's status.storedVersions on the cluster.
	StoredVersions []string
	// Manifests is as Options.Manifests.
	Manifests func(root string) ([]byte, error)
}

// CRDName is the name of kind's CRD, whose status.storedVersions Remove must be given.
func CRDName(root, kind string) (string, error) {
	k, err := findKind(root, kind)
	if err != nil {
		return "", err
	}
	crd, err := crdgen.Generate(k.chartDir, k.watch.GroupVersionKind())
	if err != nil {
		return "", err
	}
	return crd.Name, nil
}

// Remove removes o.Version, the oldest version of o.Kind, and runs make manifests: its step
// leaves conversions.yaml (the file goes with the last step), its schema and deprecation
// leave versions/. It returns the files it changed. Only the oldest version can go: the
// steps of the others must still form one chain, and joining the steps around a middle
// version is for a person to write.
func Remove(o RemoveOptions) ([]string, error) {
	k, err := findKind(o.Root, o.Kind)
	if err != nil {
		return nil, err
	}
	chain, err := conversion.Load(k.chartDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("kind %s has one version, %s", o.Kind, k.watch.Version)
	}
	if err != nil {
		return nil, err
	}
	versions := chain.Versions()
	switch {
	case !slices.Contains(versions, o.Version):
		return nil, fmt.Errorf("%s is not a version of %s (%s)", o.Version, o.Kind, strings.Join(versions, ", "))
	case o.Version == versions[len(versions)-1]:
		return nil, fmt.Errorf("%s is the newest version of %s, the one stored and rendered: add a newer one first", o.Version, o.Kind)
	case o.Version != versions[0]:
		return nil, fmt.Errorf("%s is not the oldest version of %s (%s): remove the older ones first", o.Version, o.Kind, versions[0])
	}
	if err := CheckNotStored(o.Version, o.StoredVersions); err != nil {
		return nil, err
	}

	convPath := filepath.Join(k.chartDir, conversion.FileName)
	data, err := os.ReadFile(convPath)
	if err != nil {
		return nil, err
	}
	rest, err := removeStep(data, o.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", convPath, err)
	}
	if len(versions) > 2 {
		c, err := conversion.Parse(rest)
		if err != nil || !slices.Equal(c.Versions(), versions[1:]) {
			return nil, fmt.Errorf("%s without the step from %s does not read as the chain %v (%v): remove it by hand", convPath, o.Version, versions[1:], err)
		}
	}
	versionsDir := filepath.Join(k.chartDir, conversion.VersionsDir)
	deprecated, err := withoutDeprecated(filepath.Join(versionsDir, crdgen.DeprecatedFile), o.Version)
	if err != nil {
		return nil, err
	}

	paths := append([]string{k.chartRel}, generatedPaths...)
	before, err := repofiles.Snapshot(o.Root, paths)
	if err != nil {
		return nil, err
	}
	undo := func(err error) error {
		if undoErr := repofiles.Restore(o.Root, paths, before); undoErr != nil {
			return fmt.Errorf("%w; putting the repository back failed too: %w", err, undoErr)
		}
		return err
	}
	var errs []error
	if len(versions) > 2 {
		errs = append(errs, os.WriteFile(convPath, rest, 0o644))
	} else {
		errs = append(errs, os.Remove(convPath))
	}
	errs = append(errs, os.Remove(filepath.Join(versionsDir, crdgen.SchemaFile(o.Version))))
	switch {
	case deprecated == nil:
	case len(deprecated) == 0:
		errs = append(errs, os.Remove(filepath.Join(versionsDir, crdgen.DeprecatedFile)))
	default:
		data, err := sigsyaml.Marshal(deprecated)
		errs = append(errs, err, os.WriteFile(filepath.Join(versionsDir, crdgen.DeprecatedFile), data, 0o644))
	}
	if entries, err := os.ReadDir(versionsDir); err == nil && len(entries) == 0 {
		errs = append(errs, os.Remove(versionsDir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, undo(err)
	}
	manifests := o.Manifests
	if manifests == nil {
		manifests = makeManifests
	}
	if out, err := manifests(o.Root); err != nil {
		return nil, undo(fmt.Errorf("make manifests failed, and every file is put back as it was:\n%s\n%w", out, err))
	}
	after, err := repofiles.Snapshot(o.Root, paths)
	if err != nil {
		return nil, err
	}
	return repofiles.Changed(before, after), nil
}

// removeStep returns the text of conversions.yaml without the step from version, and the
// comment lines just above it, which make add-version writes for it; the rest is kept byte
// for byte.
func removeStep(data []byte, version string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.SequenceNode || doc.Content[0].Style&yaml.FlowStyle != 0 {
		return nil, errors.New("not a block list of steps: remove the step by hand")
	}
	lines := strings.SplitAfter(string(data), "\n")
	// headStart is the first line (0-based) of the comments right above the line (1-based).
	isComment := func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), "#") }
	headStart := func(line int) int {
		i := line - 1
		for i > 0 && isComment(lines[i-1]) {
			i--
		}
		return i
	}
	items := doc.Content[0].Content
	for i, item := range items {
		var from string
		for j := 0; j+1 < len(item.Content); j += 2 {
			if item.Content[j].Value == "from" {
				from = item.Content[j+1].Value
			}
		}
		if from != version {
			continue
		}
		start, end := headStart(item.Line), len(lines)
		if i+1 < len(items) {
			end = headStart(items[i+1].Line)
		}
		if end == len(lines) && start > 0 && strings.TrimSpace(lines[start-1]) == "" {
			start-- // the blank line that set the last step apart; others take the one after them
		}
		return []byte(strings.Join(slices.Concat(lines[:start], lines[end:]), "")), nil
	}
	return nil, fmt.Errorf("no step from %s", version)
}

// withoutDeprecated is the content of the DeprecatedFile at path without version, or nil
// when the file does not list it.
func withoutDeprecated(path, version string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := sigsyaml.UnmarshalStrict(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, ok := m[version]; !ok {
		return nil, nil
	}
	delete(m, version)
	return m, nil
}
