package addkind

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/repofiles"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// Options say which chart becomes which kind, in which repository.
type Options struct {
	// Root is the repository root: watches.yaml, helm-charts/, config/ and PROJECT are in it.
	Root string
	// Chart is the chart to add: a directory or a packaged chart (.tgz).
	Chart string
	// Kind, Group and Version name the kind, such as WebApp, apps.example.com and v1alpha1.
	Kind, Group, Version string
	// Manifests regenerates what make manifests generates in root and returns what it
	// printed; nil runs make manifests there.
	Manifests func(root string) ([]byte, error)
	// KubeScore is the kube-score binary the report lints the chart with; "" is
	// bin/kube-score under Root (make add-kind builds it).
	KubeScore string
}

// Paths in the repository, relative to its root.
const (
	watchesFile = "watches.yaml"
	chartsDir   = "helm-charts"
)

// generatedPaths hold every file make manifests writes: add-kind lists what changed in them,
// and puts them back if make manifests fails.
var generatedPaths = []string{watchesFile, "PROJECT", "config"}

// Category is the CRD category add-kind gives a kind, as the repository's other kinds have:
// kubectl get warpdrive lists the custom resources of every kind.
const Category = "warpdrive"

// Add makes the chart o.Chart the kind o.Kind: see the package documentation. It refuses,
// before writing anything, a kind, group or version the apiserver would refuse, a kind
// already watched (in any group, since files are named after the lower-case kind), an
// existing chart directory, a chart that does not load, a dependency not vendored, and a
// chart crdgen cannot make a CRD of.
func Add(o Options) (*Report, error) {
	if err := checkGVK(o.Kind, o.Group, o.Version); err != nil {
		return nil, err
	}
	gvk := schema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind}
	lower := strings.ToLower(o.Kind)
	watches, err := watchfile.Load(filepath.Join(o.Root, watchesFile))
	if err != nil {
		return nil, err
	}
	for _, w := range watches {
		if strings.EqualFold(w.Kind, o.Kind) {
			return nil, fmt.Errorf("kind %s is already in watches.yaml (%s, chart %s)", o.Kind, w.GroupVersionKind(), w.Chart)
		}
	}
	chartRel := chartsDir + "/" + lower
	dest := filepath.Join(o.Root, filepath.FromSlash(chartRel))
	if _, err := os.Lstat(dest); err == nil {
		return nil, fmt.Errorf("%s exists: another kind's chart, or one left from an earlier attempt", chartRel)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}

	prepared, err := PrepareChart(o.Chart, o.Kind, nil)
	if err != nil {
		return nil, err
	}
	c, changes := prepared.Chart, prepared.Annotations

	// crdgen's verdict on the chart as it will be, before anything is written.
	staging, err := os.MkdirTemp("", "addkind-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	if err := prepared.Write(filepath.Join(staging, lower)); err != nil {
		return nil, err
	}
	crd, err := crdgen.Generate(filepath.Join(staging, lower), gvk)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", CRDRefusal, err)
	}
	watchesData, err := os.ReadFile(filepath.Join(o.Root, watchesFile))
	if err != nil {
		return nil, err
	}
	safe := findSafeDefault(c)
	if err := refuseUndeclaredRBAC(safe, o.Chart, o.Kind); err != nil {
		return nil, err
	}
	newWatches, err := appendWatch(watchesData, watchEntry{group: o.Group, version: o.Version, kind: o.Kind, chart: chartRel, overrides: safe.Overrides})
	if err != nil {
		return nil, err
	}

	before, err := repofiles.Snapshot(o.Root, generatedPaths)
	if err != nil {
		return nil, err
	}
	// undo puts the repository back as it was after err, and returns err with any failure to.
	undo := func(err error) error {
		if undoErr := errors.Join(os.RemoveAll(dest), repofiles.Restore(o.Root, generatedPaths, before)); undoErr != nil {
			return fmt.Errorf("%w; putting the repository back failed too: %w", err, undoErr)
		}
		return err
	}
	if err := prepared.Write(dest); err != nil {
		return nil, undo(err)
	}
	if err := os.WriteFile(filepath.Join(o.Root, watchesFile), newWatches, 0o644); err != nil {
		return nil, undo(err)
	}
	manifests := o.Manifests
	if manifests == nil {
		manifests = makeManifests
	}
	out, err := manifests(o.Root)
	if err != nil {
		return nil, undo(fmt.Errorf("make manifests failed, and every file is put back as it was:\n%s\n%w", out, err))
	}
	after, err := repofiles.Snapshot(o.Root, generatedPaths)
	if err != nil {
		return nil, err
	}

	r := &Report{
		Kind: gvk, ChartDir: chartRel, Chart: chartSummary(c), Annotations: changes, ManifestsOutput: string(out),
		Written: repofiles.Changed(before, after),
	}
	r.review(c, crd, safe, before, after)
	r.reviewLint(c, safe.Overrides, kubeScoreBinary(o))
	return r, nil
}

// CRDRefusal starts the error of Add when crdgen cannot make a CRD of the chart.
const CRDRefusal = "make manifests could not generate the CRD of the chart"

// makeManifests runs make manifests in root.
func makeManifests(root string) ([]byte, error) {
	cmd := exec.Command("make", "manifests")
	cmd.Dir = root
	return cmd.CombinedOutput()
}

// chartSummary is what the report says of the copied chart.
func chartSummary(c *chart.Chart) string {
	return fmt.Sprintf("%s %s (appVersion %s)", c.Name(), c.Metadata.Version, c.Metadata.AppVersion)
}
