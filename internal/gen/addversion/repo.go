package addversion

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
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

// makeManifests runs make manifests in root.
func makeManifests(root string) ([]byte, error) {
	cmd := exec.Command("make", "manifests")
	cmd.Dir = root
	return cmd.CombinedOutput()
}
