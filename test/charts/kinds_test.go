package charts

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/kindgen"
)

// Every file that lists the kinds is what make manifests (internal/kindgen) makes of
// watches.yaml and the charts now.
func TestKindListsUpToDate(t *testing.T) {
	files, err := kindgen.Generate(kindgen.DefaultOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		onDisk, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Errorf("%v: run make manifests", err)
			continue
		}
		if !bytes.Equal(onDisk, f.Data) {
			t.Errorf("%s differs from what make manifests generates from watches.yaml: run make manifests", f.Path)
		}
	}
}

// kindExpectations are the tests of this package that compare each kind with expectations
// written for it (sampleObjects, the schema cases): a new kind needs its own there. All the
// others hold for any kind.
const kindExpectations = "^(TestSamplesRender|TestCRDAgreesWithChartSchema)$"

// Adding a kind is adding a chart and a watches.yaml entry, then make manifests: on a copy of
// the repository with a sixth kind (the memcached chart as kind Cache of another group), the
// generators put the kind in every list, a second run changes nothing, and this package's
// tests pass on the copy, but those of kindExpectations.
func TestAddingAKind(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy")
	}
	dir := t.TempDir()
	for _, p := range []string{"watches.yaml", "PROJECT", "helm-charts", "config"} {
		copyTree(t, filepath.Join(root, p), filepath.Join(dir, p), func(string) bool { return true })
	}
	// The code's +kubebuilder:rbac markers, which the manager role and the RBAC tests read.
	for _, p := range []string{"cmd", "internal", "sidecar"} {
		copyTree(t, filepath.Join(root, p), filepath.Join(dir, p), func(path string) bool {
			return strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go")
		})
	}

	// The new kind: a chart and a watches.yaml entry.
	copyTree(t, chartDir("memcached"), filepath.Join(dir, "helm-charts", "cache"), func(string) bool { return true })
	chartYAML := filepath.Join(dir, "helm-charts", "cache", "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.NewReplacer("name: memcached", "name: cache",
		"plural: memcacheds", "plural: caches", "shortNames: mc", "shortNames: ca").Replace(string(data))
	writeFile(t, chartYAML, edited)
	w, err := os.ReadFile(filepath.Join(dir, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "watches.yaml"), string(w)+
		"- group: cache.warpdrive.example.com\n  version: v1beta1\n  kind: Cache\n  chart: helm-charts/cache\n")

	manifests := func() {
		t.Helper()
		crds, err := crdgen.GenerateAll(filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "helm-charts"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range crds {
			writeFile(t, filepath.Join(dir, "config", "crd", "bases", f.Name), string(f.Data))
		}
		files, err := kindgen.Generate(kindgen.DefaultOptions(dir))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kindgen.Write(dir, files); err != nil {
			t.Fatal(err)
		}
	}
	manifests()
	before := snapshot(t, dir)
	manifests()
	if after := snapshot(t, dir); !maps.Equal(before, after) {
		t.Error("a second make manifests changed files")
	}

	read := func(rel string, into any) {
		t.Helper()
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, into); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
	}
	var kustomization struct{ Resources []string }
	read("config/crd/kustomization.yaml", &kustomization)
	if !slices.Contains(kustomization.Resources, "bases/cache.warpdrive.example.com_caches.yaml") {
		t.Errorf("config/crd/kustomization.yaml lists %v, without the new CRD", kustomization.Resources)
	}
	read("config/samples/kustomization.yaml", &kustomization)
	if !slices.Contains(kustomization.Resources, "cache.warpdrive.example.com_v1beta1_cache.yaml") {
		t.Errorf("config/samples/kustomization.yaml lists %v, without the new sample", kustomization.Resources)
	}
	read("config/rbac/kustomization.yaml", &kustomization)
	for _, f := range []string{"cache_editor_role.yaml", "cache_viewer_role.yaml"} {
		if !slices.Contains(kustomization.Resources, f) {
			t.Errorf("config/rbac/kustomization.yaml lists %v, without %s", kustomization.Resources, f)
		}
	}
	var editor rbacv1.ClusterRole
	read("config/rbac/cache_editor_role.yaml", &editor)
	if editor.Name != "cache-editor-role" || editor.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" {
		t.Errorf("the new editor role is %s with labels %v, want cache-editor-role aggregated to edit", editor.Name, editor.Labels)
	}
	var role rbacv1.ClusterRole
	read("config/rbac/role.yaml", &role)
	have := permissions(role.Rules)
	for _, p := range crNeeds("cache.warpdrive.example.com", "caches") {
		if !have[p] {
			t.Errorf("the manager role does not grant %s", p)
		}
	}
	var project struct {
		Resources []struct{ Group, Domain, Kind, Version string }
	}
	read("PROJECT", &project)
	if !slices.ContainsFunc(project.Resources, func(r struct{ Group, Domain, Kind, Version string }) bool {
		return r.Kind == "Cache" && r.Group == "cache" && r.Domain == "warpdrive.example.com" && r.Version == "v1beta1"
	}) {
		t.Errorf("PROJECT has resources %+v, without the new kind", project.Resources)
	}
	var csv struct {
		Spec struct {
			CustomResourceDefinitions struct {
				Owned []struct{ Name, Version, Kind string }
			}
		}
	}
	read("config/manifests/bases/warpdrive-operator.clusterserviceversion.yaml", &csv)
	if !slices.ContainsFunc(csv.Spec.CustomResourceDefinitions.Owned, func(o struct{ Name, Version, Kind string }) bool {
		return o.Name == "caches.cache.warpdrive.example.com" && o.Version == "v1beta1" && o.Kind == "Cache"
	}) {
		t.Errorf("the CSV owns %+v, without the new CRD", csv.Spec.CustomResourceDefinitions.Owned)
	}
	var cm struct{ Data map[string]string }
	read("config/argocd/argocd-cm.yaml", &cm)
	if _, ok := cm.Data[kindgen.ArgoHealthKeyPrefix+"cache.warpdrive.example.com_Cache"]; !ok {
		t.Error("config/argocd/argocd-cm.yaml has no health check for the new kind")
	}
	if t.Failed() {
		return
	}

	// This package's tests, on the copy.
	cmd := exec.Command(os.Args[0], "-test.skip", kindExpectations, "-test.count=1")
	cmd.Env = append(os.Environ(), rootEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the chart tests fail on the copy with a sixth kind: %v\n%s", err, out)
	}
}

// copyTree copies the files under src that keep accepts to dst.
func copyTree(t *testing.T, src, dst string, keep func(path string) bool) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !keep(path) {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot is the content of every file under dir, by path.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		out[path] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
