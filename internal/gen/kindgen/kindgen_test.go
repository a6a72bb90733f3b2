package kindgen

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const schemaJSON = `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
	"properties": {"replicas": {"type": "integer", "default": 1, "minimum": 0, "maximum": 10}}}`

// repo writes a small repository: two kinds, Widget (namespaced objects only) and Pool (whose
// chart declares a cluster-scoped StorageClass), a marker that adds get on pools/status, and
// the hand-written files with their generated regions.
func repo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "watches.yaml"), `- group: example.transwarp.io
  version: v1
  kind: Widget
  chart: helm-charts/widget
- group: pools.transwarp.io
  version: v1alpha1
  kind: Pool
  chart: helm-charts/pool
`)
	for name, extra := range map[string]string{
		"widget": "",
		"pool":   "  warpdrive.transwarp.io/cluster-scoped-kinds: StorageClass.storage.k8s.io\n",
	} {
		dir := filepath.Join(root, "helm-charts", name)
		write(t, filepath.Join(dir, "Chart.yaml"), "apiVersion: v2\nname: "+name+"\nversion: 0.1.0\nannotations:\n"+
			"  crd.warpdrive.transwarp.io/plural: "+name+"s\n"+extra)
		write(t, filepath.Join(dir, "values.yaml"), "replicas: 1\n")
		write(t, filepath.Join(dir, "values.schema.json"), schemaJSON)
	}
	write(t, filepath.Join(root, "internal", "books", "books.go"),
		"package books\n\n// +kubebuilder:rbac:groups=pools.transwarp.io,resources=pools/status,verbs=get;patch\n")
	write(t, filepath.Join(root, "internal", "books", "books_test.go"),
		"package books\n\n// +kubebuilder:rbac:groups=pools.transwarp.io,resources=pools,verbs=delete\n")
	write(t, filepath.Join(root, RBACKustomization), "resources:\n- role.yaml\n"+Begin+"\n"+End+"\n")
	write(t, filepath.Join(root, ManagerRole), "kind: ClusterRole\nmetadata:\n  name: manager-role\nrules:\n"+Begin+"\n"+End+"\n"+
		"- apiGroups:\n  - \"\"\n  resources:\n  - events\n  verbs:\n  - create\n")
	write(t, filepath.Join(root, Project), "domain: transwarp.io\nprojectName: test\nversion: \"3\"\n")
	write(t, filepath.Join(root, CSVBasesDir, "test.clusterserviceversion.yaml"),
		"kind: ClusterServiceVersion\nspec:\n  displayName: Test\n  "+Begin+"\n  "+End+"\n  version: 0.0.0\n")
	write(t, filepath.Join(root, ArgoCDHealthScript), "hs = {}\n\nreturn hs\n")
	return root
}

func generate(t *testing.T, root string) map[string]string {
	t.Helper()
	files, err := Generate(DefaultOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	return out
}

func TestGenerate(t *testing.T) {
	root := repo(t)
	files := generate(t, root)

	var roles = map[string]rbacv1.ClusterRole{}
	for _, name := range []string{"widget_editor_role.yaml", "widget_viewer_role.yaml", "pool_editor_role.yaml", "pool_viewer_role.yaml"} {
		data, ok := files[RBACDir+"/"+name]
		if !ok {
			t.Fatalf("no %s", name)
		}
		if !strings.HasPrefix(data, Header) {
			t.Errorf("%s does not start with the header", name)
		}
		var r rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict([]byte(data), &r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		roles[name] = r
	}
	aggregation := map[string]string{
		"widget_editor_role.yaml": "rbac.authorization.k8s.io/aggregate-to-edit",
		"widget_viewer_role.yaml": "rbac.authorization.k8s.io/aggregate-to-view",
		"pool_viewer_role.yaml":   "rbac.authorization.k8s.io/aggregate-to-view",
	}
	for name, r := range roles {
		var got []string
		for l := range r.Labels {
			if strings.HasPrefix(l, "rbac.authorization.k8s.io/") {
				got = append(got, l)
			}
		}
		want := aggregation[name]
		if strings.Join(got, ",") != want {
			t.Errorf("%s aggregates by %v, want %q", name, got, want)
		}
	}
	if !strings.Contains(files[RBACDir+"/pool_editor_role.yaml"], "a cluster-scoped StorageClass") {
		t.Error("the pool editor role does not say why it is not aggregated")
	}
	if r := roles["widget_editor_role.yaml"]; r.Name != "widget-editor-role" || r.Rules[0].Resources[0] != "widgets" {
		t.Errorf("widget editor role: %+v", r)
	}

	// The manager role: the helm-operator's verbs, plus the marker's get on pools/status
	// (not the marker of the test file).
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(files[ManagerRole]), &role); err != nil {
		t.Fatal(err)
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"example.transwarp.io"}, Resources: []string{"widgets"}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{"example.transwarp.io"}, Resources: []string{"widgets/status"}, Verbs: []string{"patch", "update"}},
		{APIGroups: []string{"example.transwarp.io"}, Resources: []string{"widgets/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{"pools.transwarp.io"}, Resources: []string{"pools"}, Verbs: []string{"get", "list", "watch", "update"}},
		{APIGroups: []string{"pools.transwarp.io"}, Resources: []string{"pools/status"}, Verbs: []string{"get", "patch", "update"}},
		{APIGroups: []string{"pools.transwarp.io"}, Resources: []string{"pools/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("manager role rules:\n%+v\nwant\n%+v", role.Rules, want)
	}
	if !strings.Contains(files[ManagerRole], "# The +kubebuilder:rbac markers in internal/books also ask for get on pools/status.\n") {
		t.Errorf("the manager role does not say where get on pools/status comes from:\n%s", files[ManagerRole])
	}

	var rbacKustomization struct{ Resources []string }
	if err := yaml.Unmarshal([]byte(files[RBACKustomization]), &rbacKustomization); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rbacKustomization.Resources, " "); got !=
		"role.yaml widget_editor_role.yaml widget_viewer_role.yaml pool_editor_role.yaml pool_viewer_role.yaml" {
		t.Errorf("config/rbac/kustomization.yaml lists %s", got)
	}
	if !strings.Contains(files[RBACKustomization], "except the Pool\n# editor, which must be bound explicitly (see pool_editor_role.yaml).") {
		t.Errorf("config/rbac/kustomization.yaml does not name the editor that is not aggregated:\n%s", files[RBACKustomization])
	}

	for path, want := range map[string]string{
		CRDKustomization:     "- bases/example.transwarp.io_widgets.yaml\n- bases/pools.transwarp.io_pools.yaml\n",
		SamplesKustomization: "- example.transwarp.io_v1_widget.yaml\n- pools.transwarp.io_v1alpha1_pool.yaml\n",
		Project: "resources:\n- api:\n    crdVersion: v1\n    namespaced: true\n  domain: transwarp.io\n  group: example\n  kind: Widget\n  version: v1\n" +
			"- api:\n    crdVersion: v1\n    namespaced: true\n  domain: transwarp.io\n  group: pools\n  kind: Pool\n  version: v1alpha1\nversion: \"3\"\n",
		CSVBasesDir + "/test.clusterserviceversion.yaml": "  customresourcedefinitions:\n    owned:\n",
		ArgoCDConfigMap: "  resource.customizations.health.example.transwarp.io_Widget: |\n    hs = {}\n\n    return hs\n" +
			"  resource.customizations.health.pools.transwarp.io_Pool: |\n",
	} {
		if !strings.Contains(files[path], want) {
			t.Errorf("%s lacks\n%s\nin\n%s", path, want, files[path])
		}
	}
	var csv struct {
		Kind string
		Spec struct {
			DisplayName               string
			Version                   string
			CustomResourceDefinitions struct{ Owned []ownedCRD }
		}
	}
	if err := yaml.UnmarshalStrict([]byte(files[CSVBasesDir+"/test.clusterserviceversion.yaml"]), &csv); err != nil {
		t.Fatal(err)
	}
	if owned := csv.Spec.CustomResourceDefinitions.Owned; len(owned) != 2 || owned[0].Name != "pools.pools.transwarp.io" ||
		owned[1].Name != "widgets.example.transwarp.io" || owned[1].Kind != "Widget" || owned[1].Version != "v1" {
		t.Errorf("owned CRDs: %+v", owned)
	}
	if csv.Spec.DisplayName != "Test" || csv.Spec.Version != "0.0.0" {
		t.Errorf("the CSV's hand-written fields changed: %+v", csv.Spec)
	}
}

// Writing the files and generating again gives the same files: make manifests is idempotent.
// A starter sample is written once and then left to its author.
func TestWriteIsIdempotentAndKeepsSamples(t *testing.T) {
	root := repo(t)
	files, err := Generate(DefaultOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(root, files); err != nil {
		t.Fatal(err)
	}
	sample := filepath.Join(root, SamplesDir, "example.transwarp.io_v1_widget.yaml")
	data, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	if obj["kind"] != "Widget" || !reflect.DeepEqual(obj["spec"], map[string]any{"replicas": float64(1)}) {
		t.Errorf("starter sample %v, want a Widget with the chart's values as spec", obj)
	}
	write(t, sample, "edited by hand\n")

	again, err := Generate(DefaultOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range again {
		onDisk, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if string(onDisk) != string(f.Data) {
			t.Errorf("%s changed on the second run", f.Path)
		}
		if strings.HasPrefix(f.Path, SamplesDir+"/") && f.Path != SamplesKustomization {
			t.Errorf("the second run rewrites the sample %s", f.Path)
		}
	}
}

// The roles of a kind no longer watched go; a role written by hand stays.
func TestWriteRemovesStaleRoles(t *testing.T) {
	root := repo(t)
	write(t, filepath.Join(root, RBACDir, "gone_editor_role.yaml"), Header+"kind: ClusterRole\n")
	write(t, filepath.Join(root, RBACDir, "own_viewer_role.yaml"), "# written by hand\nkind: ClusterRole\n")
	files, err := Generate(DefaultOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	removed, err := Write(root, files)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(removed, []string{RBACDir + "/gone_editor_role.yaml"}) {
		t.Errorf("removed %v", removed)
	}
	if _, err := os.Stat(filepath.Join(root, RBACDir, "own_viewer_role.yaml")); err != nil {
		t.Error(err)
	}
}

func TestSplice(t *testing.T) {
	content := "a\n  " + Begin + "\n  old\n  " + End + "\nb\n"
	got, err := Splice(content, "  ", "  new\n  lines\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "a\n  " + Begin + "\n  new\n  lines\n  " + End + "\nb\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := Splice("a\n", "", "x\n"); err == nil {
		t.Error("no error without a BEGIN line")
	}
	if _, err := Splice(Begin+"\n", "", "x\n"); err == nil {
		t.Error("no error without an END line")
	}
	if _, err := Splice(content, "", "x\n"); err == nil {
		t.Error("no error for markers of another indentation")
	}
}

func TestSortVerbs(t *testing.T) {
	verbs := []string{"update", "deletecollection", "patch", "watch", "get", "delete", "list", "create"}
	sortVerbs(verbs)
	if got := strings.Join(verbs, " "); got != "get list watch create patch update delete deletecollection" {
		t.Errorf("sorted %s", got)
	}
}

func TestParseMarker(t *testing.T) {
	got := parseMarker(`groups="",resources=pods;services,verbs=get;list`)
	want := []Marker{
		{Group: "", Resource: "pods", Verb: "get"}, {Group: "", Resource: "pods", Verb: "list"},
		{Group: "", Resource: "services", Verb: "get"}, {Group: "", Resource: "services", Verb: "list"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestPluralKind(t *testing.T) {
	for _, tc := range []struct{ kind, plural, want string }{
		{"Memcached", "memcacheds", "Memcacheds"},
		{"Policy", "policies", "Policy objects"},
		{"Box", "boxes", "Boxes"},
	} {
		k := Kind{Plural: tc.plural}
		k.GVK.Kind = tc.kind
		if got := k.pluralKind(); got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.kind, tc.plural, got, tc.want)
		}
	}
}
