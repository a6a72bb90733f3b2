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

	"helm.sh/helm/v3/pkg/chart/loader"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// Every file that lists the kinds is what make manifests (internal/gen/kindgen) makes of
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

// Adding a kind is adding a chart and a watches.yaml entry, then make manifests: on a copy of
// the repository with a sixth kind (the memcached chart as kind Cache of another group), the
// generators put the kind in every list, a second run changes nothing, and this package's
// tests pass on the copy.
func TestAddingAKind(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy")
	}
	dir := copyRepo(t)

	// The new kind: a chart and a watches.yaml entry.
	// Not the versions Memcached has had, if any: the new kind has one.
	copyTree(t, chartDir("memcached"), filepath.Join(dir, "helm-charts", "cache"), func(path string) bool {
		rel, _ := filepath.Rel(chartDir("memcached"), path)
		return !conversion.IsVersionHistory(filepath.ToSlash(rel))
	})
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
		if _, err := manifestsIn(dir); err != nil {
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

	runOnCopy(t, dir)
}

// copyRepo copies what the chart tests and make manifests read to a temporary directory:
// watches.yaml, PROJECT, the charts, config/, and the Go files whose +kubebuilder:rbac
// markers the manager role and the RBAC tests read.
func copyRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, p := range []string{"watches.yaml", "PROJECT", "helm-charts", "config"} {
		copyTree(t, filepath.Join(root, p), filepath.Join(dir, p), func(string) bool { return true })
	}
	for _, p := range []string{"cmd", "internal", "sidecar"} {
		copyTree(t, filepath.Join(root, p), filepath.Join(dir, p), func(path string) bool {
			return strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go")
		})
	}
	return dir
}

// manifestsIn does in dir what make manifests does (hack/crdgen, then hack/kindgen).
func manifestsIn(dir string) ([]byte, error) {
	crds, err := crdgen.GenerateAll(filepath.Join(dir, "watches.yaml"), filepath.Join(dir, "helm-charts"))
	if err != nil {
		return nil, err
	}
	bases := filepath.Join(dir, "config", "crd", "bases")
	if err := os.MkdirAll(bases, 0o755); err != nil {
		return nil, err
	}
	for _, f := range crds {
		if err := os.WriteFile(filepath.Join(bases, f.Name), f.Data, 0o644); err != nil {
			return nil, err
		}
	}
	files, err := kindgen.Generate(kindgen.DefaultOptions(dir))
	if err != nil {
		return nil, err
	}
	_, err = kindgen.Write(dir, files)
	return nil, err
}

// runOnCopy runs this package's tests on the copy dir.
func runOnCopy(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.count=1")
	cmd.Env = append(os.Environ(), rootEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the chart tests fail on the copy with a new kind: %v\n%s", err, out)
	}
}

// addKindCharts are internal/gen/addkind's test charts, each shaped like a kind of chart found in
// the wild (see internal/gen/addkind/testdata), and the kinds make add-kind makes of them.
var addKindCharts = []struct{ chart, kind, group string }{
	{"webinfo", "WebInfo", "web.example.com"},              // no schema (the spec is inferred), kubeVersion, optional objects, a test hook
	{"keystore", "KeyStore", "data.example.com"},           // a vendored library chart, tpl, $ref and anyOf
	{"ledger", "Ledger", "batch.example.com"},              // hooks with weights and delete policies
	{"dashboards", "Dashboards", "monitoring.example.com"}, // a release record over 2 MiB
	{"sessionstore", "SessionStore", "cache.example.com"},  // a schema that disagrees with values.yaml, a resource preset with ephemeral storage
	{"plotboard", "Plotboard", "monitoring.example.com"},   // a ClusterRole and a ClusterRoleBinding by default, a Role with rbac.namespaced
}

// make add-kind makes each test chart a kind on a copy of the repository: the chart is copied
// with the annotations crdgen needs, watches.yaml names it, its CRD is generated, a second make
// manifests changes nothing, and this package's tests pass on the copy.
func TestAddKind(t *testing.T) {
	if os.Getenv(rootEnv) != "" {
		t.Skip("already running on a copy")
	}
	for _, tc := range addKindCharts {
		t.Run(tc.kind, func(t *testing.T) {
			dir := copyRepo(t)
			r, err := addkind.Add(addkind.Options{
				Root: dir, Chart: filepath.Join("..", "..", "internal", "gen", "addkind", "testdata", tc.chart),
				Kind: tc.kind, Group: tc.group, Version: "v1alpha1", Manifests: manifestsIn,
			})
			if err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			r.Print(&out)
			t.Log(out.String())

			ws, err := watchfile.Load(filepath.Join(dir, "watches.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			last := ws[len(ws)-1]
			chartRel := "helm-charts/" + strings.ToLower(tc.kind)
			if last.GroupVersionKind() != (schema.GroupVersionKind{Group: tc.group, Version: "v1alpha1", Kind: tc.kind}) || last.Chart != chartRel {
				t.Errorf("the last watches.yaml entry is %s, chart %s", last.GroupVersionKind(), last.Chart)
			}
			c, err := loader.LoadDir(filepath.Join(dir, chartRel))
			if err != nil {
				t.Fatal(err)
			}
			plural := addkind.Plural(tc.kind)
			if got := c.Metadata.Annotations[crdgen.AnnotationPlural]; got != plural {
				t.Errorf("%s: %s, want %s", crdgen.AnnotationPlural, got, plural)
			}
			var crd apiextv1.CustomResourceDefinition
			read := filepath.Join("config", "crd", "bases", tc.group+"_"+plural+".yaml")
			data, err := os.ReadFile(filepath.Join(dir, read))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(data, &crd); err != nil {
				t.Fatalf("%s: %v", read, err)
			}
			if crd.Name != plural+"."+tc.group || crd.Spec.Names.Kind != tc.kind {
				t.Errorf("%s: CRD %s of kind %s", read, crd.Name, crd.Spec.Names.Kind)
			}

			before := snapshot(t, dir)
			if _, err := manifestsIn(dir); err != nil {
				t.Fatal(err)
			}
			if after := snapshot(t, dir); !maps.Equal(before, after) {
				t.Error("make manifests after make add-kind changed files")
			}
			runOnCopy(t, dir)
		})
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
