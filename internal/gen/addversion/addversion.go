package addversion

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/repofiles"
)

// Options say which version to add to which kind, in which repository.
type Options struct {
	// Root is the repository root: watches.yaml, helm-charts/, config/ and PROJECT are in it.
	Root string
	// Kind is a kind of watches.yaml, such as WarpdrivePool.
	Kind string
	// Version is the version to add, such as v1beta1.
	Version string
	// Chart is the new version's chart, a directory or a packaged chart (.tgz); "" keeps the
	// kind's chart, for a version with the same schema.
	Chart string
	// Manifests regenerates what make manifests generates in root and returns what it
	// printed; nil runs make manifests there.
	Manifests func(root string) ([]byte, error)
}

// Report is what Add did, and what a person should review.
type Report struct {
	Kind     schema.GroupVersionKind
	Previous string // the version that was the newest
	ChartDir string // relative to the root
	// Chart names the new chart, "" when the kind kept its chart.
	Chart       string
	Annotations []string // changes to the new chart's Chart.yaml
	Moves       []conversion.Move
	Drops       []string // Infer's reasons, one a drop
	// Overrides is the new chart's safe default (see addkind), when it differs from the
	// overrideValues of the kind's watches.yaml entry, which add-version leaves to a person.
	Overrides       map[string]string
	OverridesDiffer bool
	Sample          string   // the sample converted to the new version, "" if none
	Written         []string // files changed under generatedPaths and the chart directory
	Output          string   // what make manifests printed
}

// Add adds o.Version to o.Kind: see the package documentation.
func Add(o Options) (*Report, error) {
	k, err := findKind(o.Root, o.Kind)
	if err != nil {
		return nil, err
	}
	prev := k.watch.Version
	versions := []string{prev}
	chain, err := conversion.Load(k.chartDir)
	switch {
	case err == nil:
		versions = chain.Versions()
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if err := checkNewVersion(o.Version, prev, versions); err != nil {
		return nil, fmt.Errorf("kind %s: %w", o.Kind, err)
	}
	oldCRD, err := crdgen.Generate(k.chartDir, k.watch.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	oldSpec := specOf(oldCRD)
	gvk := k.watch.GroupVersionKind()
	gvk.Version = o.Version

	// The chart directory as it will be, staged: the new chart (or the current one), and what
	// the older versions were.
	staging, err := os.MkdirTemp("", "addversion-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	stage := filepath.Join(staging, filepath.Base(k.chartDir))
	kept := conversion.IsVersionHistory
	r := &Report{Kind: gvk, Previous: prev, ChartDir: k.chartRel}
	if o.Chart != "" {
		annotations, err := chartAnnotations(k.chartDir)
		if err != nil {
			return nil, err
		}
		prepared, err := addkind.PrepareChart(o.Chart, o.Kind, annotations)
		if err != nil {
			return nil, err
		}
		overrides, err := prepared.CheckRBAC(o.Kind)
		if err != nil {
			return nil, err
		}
		if !maps.Equal(overrides, k.watch.OverrideValues) {
			r.Overrides = overrides
			r.OverridesDiffer = true
		}
		if err := prepared.Write(stage); err != nil {
			return nil, err
		}
		r.Chart = fmt.Sprintf("%s %s (appVersion %s)", prepared.Chart.Name(), prepared.Chart.Metadata.Version, prepared.Chart.Metadata.AppVersion)
		r.Annotations = prepared.Annotations
	} else if err := copyDir(k.chartDir, stage, kept); err != nil {
		return nil, err
	}
	newCRD, err := crdgen.Generate(stage, gvk)
	if err != nil {
		return nil, fmt.Errorf("the chart of %s: %w", o.Version, err)
	}
	oldMap, err := crdgen.SpecSchemaMap(oldSpec)
	if err != nil {
		return nil, err
	}
	newMap, err := crdgen.SpecSchemaMap(specOf(newCRD))
	if err != nil {
		return nil, err
	}
	step := propose(prev, o.Version, oldMap, newMap)
	existing, err := os.ReadFile(filepath.Join(k.chartDir, conversion.FileName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	conversions, chain, err := appendStep(existing, step)
	if err != nil {
		return nil, err
	}
	schemaData, err := crdgen.MarshalSpecSchema(oldSpec)
	if err != nil {
		return nil, err
	}
	if err := copyDir(k.chartDir, stage, func(rel string) bool { return !kept(rel) }); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(stage, conversion.VersionsDir), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(stage, conversion.VersionsDir, crdgen.SchemaFile(prev)), schemaData, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(stage, conversion.FileName), conversions, 0o644); err != nil {
		return nil, err
	}
	// crdgen's verdict on the kind as it will be, before anything is written.
	if _, err := crdgen.Generate(stage, gvk); err != nil {
		return nil, fmt.Errorf("make manifests could not generate the CRD of %s: %w", gvk, err)
	}
	watchesData, err := os.ReadFile(filepath.Join(o.Root, watchesFile))
	if err != nil {
		return nil, err
	}
	newWatches, err := setWatchVersion(watchesData, o.Kind, o.Version)
	if err != nil {
		return nil, err
	}

	oldSample, newSample, sample, err := convertSample(o.Root, gvk, prev, chain)
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
	if err := os.RemoveAll(k.chartDir); err != nil {
		return nil, undo(err)
	}
	if err := copyDir(stage, k.chartDir, nil); err != nil {
		return nil, undo(err)
	}
	if err := os.WriteFile(filepath.Join(o.Root, watchesFile), newWatches, 0o644); err != nil {
		return nil, undo(err)
	}
	if oldSample != "" {
		if err := os.WriteFile(filepath.Join(o.Root, filepath.FromSlash(newSample)), sample, 0o644); err != nil {
			return nil, undo(err)
		}
		if err := os.Remove(filepath.Join(o.Root, filepath.FromSlash(oldSample))); err != nil {
			return nil, undo(err)
		}
	}
	manifests := o.Manifests
	if manifests == nil {
		manifests = makeManifests
	}
	out, err := manifests(o.Root)
	if err != nil {
		return nil, undo(fmt.Errorf("make manifests failed, and every file is put back as it was:\n%s\n%w", out, err))
	}
	after, err := repofiles.Snapshot(o.Root, paths)
	if err != nil {
		return nil, err
	}
	r.Moves = step.moves
	for _, d := range step.drops {
		r.Drops = append(r.Drops, d.reason)
	}
	r.Sample = newSample
	r.Written = repofiles.Changed(before, after)
	r.Output = string(out)
	return r, nil
}
