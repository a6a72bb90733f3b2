package addversion

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// Paths in the repository, relative to its root.
const (
	watchesFile = "watches.yaml"
	chartsDir   = "helm-charts"
)

// generatedPaths hold every file make manifests writes.
var generatedPaths = []string{watchesFile, "PROJECT", "config"}

// kindOf is a watched kind, found by name, with its chart directory.
type kindOf struct {
	watch    watchfile.Watch
	chartRel string // slash-separated, relative to the root
	chartDir string
}

// findKind finds kind in root's watches.yaml, or says which kinds there are.
func findKind(root, kind string) (kindOf, error) {
	watches, err := watchfile.Load(filepath.Join(root, watchesFile))
	if err != nil {
		return kindOf{}, err
	}
	var names []string
	for _, w := range watches {
		if w.Kind == kind {
			dir := crdgen.ChartDir(filepath.Join(root, chartsDir), w.Chart)
			return kindOf{watch: w, chartRel: chartsDir + "/" + filepath.Base(dir), chartDir: dir}, nil
		}
		names = append(names, w.Kind)
	}
	return kindOf{}, fmt.Errorf("kind %q is not in watches.yaml (kinds: %s)", kind, strings.Join(names, ", "))
}

// specOf is the spec schema of the newest version of crd, the one it stores.
func specOf(crd *apiextv1.CustomResourceDefinition) *apiextv1.JSONSchemaProps {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			return &spec
		}
	}
	return nil
}

// chartAnnotations are the Chart.yaml annotations of the chart in dir.
func chartAnnotations(dir string) (map[string]string, error) {
	c, err := loader.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	return c.Metadata.Annotations, nil
}

// copyDir copies the files under src into dst, but for those skip says to leave out
// (by slash-separated path relative to src).
func copyDir(src, dst string, skip func(rel string) bool) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if rel != "." && skip != nil && skip(filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
}

// snapshot reads the files under each of paths (files or directories) of root, by their
// slash-separated path relative to root.
func snapshot(root string, paths []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, p := range paths {
		err := filepath.WalkDir(filepath.Join(root, p), func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(path)
			out[filepath.ToSlash(rel)] = data
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// restore puts back the files of before, a snapshot of paths, and removes those created
// since under paths. It runs after a failure: its own errors are added to that one.
func restore(root string, paths []string, before map[string][]byte) error {
	now, err := snapshot(root, paths)
	if err != nil {
		return err
	}
	var errs []error
	for rel := range now {
		if _, ok := before[rel]; !ok {
			errs = append(errs, os.Remove(filepath.Join(root, filepath.FromSlash(rel))))
		}
	}
	for rel, data := range before {
		if old, ok := now[rel]; !ok || string(old) != string(data) {
			path := filepath.Join(root, filepath.FromSlash(rel))
			errs = append(errs, os.MkdirAll(filepath.Dir(path), 0o755), os.WriteFile(path, data, 0o644))
		}
	}
	return errors.Join(errs...)
}

// changedFiles lists the files new, changed or removed from before to after, sorted.
func changedFiles(before, after map[string][]byte) []string {
	var out []string
	for rel, data := range after {
		old, ok := before[rel]
		switch {
		case !ok:
			out = append(out, rel+" (new)")
		case string(old) != string(data):
			out = append(out, rel)
		}
	}
	for rel := range before {
		if _, ok := after[rel]; !ok {
			out = append(out, rel+" (removed)")
		}
	}
	slices.Sort(out)
	return out
}

// makeManifests runs make manifests in root.
func makeManifests(root string) ([]byte, error) {
	cmd := exec.Command("make", "manifests")
	cmd.Dir = root
	return cmd.CombinedOutput()
}
