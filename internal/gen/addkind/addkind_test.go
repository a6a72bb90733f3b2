package addkind

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"

	"transwarp.io/tos/warpdrive-operator/internal/gen/repofiles"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// The end-to-end test, each test chart added to a copy of the repository and the chart tests
// run on it, is test/charts' TestAddKind. These tests use a small repository.

// smallRepo makes a repository of one kind, Memcached, whose chart is the repository's.
func smallRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "..", "helm-charts", "memcached"), filepath.Join(root, "helm-charts", "memcached"))
	write(t, filepath.Join(root, "watches.yaml"), "# The kinds.\n- group: cache.example.com\n  version: v1alpha1\n  kind: Memcached\n  chart: helm-charts/memcached\n")
	write(t, filepath.Join(root, "PROJECT"), "layout: helm.sdk.operatorframework.io/v1\n")
	write(t, filepath.Join(root, "config", "crd", "kustomization.yaml"), "resources: []\n")
	return root
}

func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		write(t, filepath.Join(dst, rel), string(data))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func tree(t *testing.T, root string) map[string][]byte {
	t.Helper()
	s, err := repofiles.Snapshot(root, []string{"."})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeManifests stands for make manifests: it writes one file.
func fakeManifests(root string) ([]byte, error) {
	path := filepath.Join(root, "config", "crd", "bases", "generated.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return []byte("wrote config/crd/bases/generated.yaml\nwarning: a word for the reviewer\n"), os.WriteFile(path, []byte("x"), 0o644)
}

func TestAddCopiesTheChartAsItIs(t *testing.T) {
	root := smallRepo(t)
	src := filepath.Join("testdata", "ledger")
	r, err := Add(Options{Root: root, Chart: src, Kind: "Ledger", Group: "batch.example.com", Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatal(err)
	}
	copied := tree(t, filepath.Join(root, "helm-charts", "ledger"))
	original := tree(t, src)
	if !maps.EqualFunc(copied, original, func(a, b []byte) bool { return true }) {
		t.Errorf("copied %v, want the files of %s", keys(copied), src)
	}
	for name, data := range original {
		if name != "Chart.yaml" && string(copied[name]) != string(data) {
			t.Errorf("%s changed", name)
		}
	}
	chartYAML := string(copied["Chart.yaml"])
	if !strings.HasPrefix(chartYAML, string(original["Chart.yaml"])) ||
		!strings.HasSuffix(chartYAML, "  example.com/owner: team-ledger\n  crd.warpdrive.transwarp.io/plural: ledgers\n  crd.warpdrive.transwarp.io/categories: warpdrive\n") {
		t.Errorf("Chart.yaml:\n%s", chartYAML)
	}
	watches, _ := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if !strings.HasSuffix(string(watches), "- group: batch.example.com\n  version: v1\n  kind: Ledger\n  chart: helm-charts/ledger\n") {
		t.Errorf("watches.yaml:\n%s", watches)
	}
	if strings.Join(r.Written, " ") != "config/crd/bases/generated.yaml (new) watches.yaml" {
		t.Errorf("written %v", r.Written)
	}
	var out strings.Builder
	r.Print(&out)
	for _, want := range []string{
		"ledger/templates/hooks.yaml: pre-install, weight -5, delete policy before-hook-creation",
		"ledger/templates/hooks.yaml: post-upgrade, weight 0, delete policy before-hook-creation,hook-succeeded",
		"ledger/templates/hooks.yaml: post-rollback, weight 0, delete policy before-hook-creation,hook-succeeded",
		"ledger/templates/hooks.yaml: pre-delete, weight 5, delete policy before-hook-creation,hook-succeeded",
		"warning: a word for the reviewer",
		"translated from the chart's values.schema.json",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

// A template that renders a new value at each render is named in the report: the operator
// would upgrade its release at every reconcile, unless the chart keeps the first value.
func TestAddReportsVolatileValues(t *testing.T) {
	root := smallRepo(t)
	r, err := Add(Options{Root: root, Chart: filepath.Join("testdata", "keystore"), Kind: "KeyStore", Group: "data.example.com",
		Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r.Print(&out)
	for _, want := range []string{"Values new at each render", "randAlphaNum: keystore/charts/common/templates/_secrets.tpl"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
	// The library's random password is looked up: lookup is declared with tpl.
	if got := r.Annotations; !strings.Contains(strings.Join(got, "\n"), "lookup,tpl") {
		t.Errorf("Chart.yaml annotations set %v, want template functions lookup,tpl", got)
	}

	// The ledger chart renders the same at each render.
	root = smallRepo(t)
	r, err = Add(Options{Root: root, Chart: filepath.Join("testdata", "ledger"), Kind: "Ledger", Group: "batch.example.com",
		Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	r.Print(&out)
	if strings.Contains(out.String(), "Values new at each render") {
		t.Errorf("the report of ledger names values new at each render:\n%s", out.String())
	}
}

// A chart whose defaults render cluster-scoped objects it does not declare gets a safe default:
// watches.yaml turns off what needs the administrator's decision, and the report says so and
// how to offer it instead. A chart that renders none gets no override.
func TestAddGivesASafeDefault(t *testing.T) {
	root := smallRepo(t)
	r, err := Add(Options{Root: root, Chart: filepath.Join("testdata", "plotboard"), Kind: "Plotboard", Group: "monitoring.example.com",
		Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatal(err)
	}
	watches, _ := os.ReadFile(filepath.Join(root, "watches.yaml"))
	// rbac.namespaced would render a Role and a RoleBinding the chart does not declare either.
	if !strings.HasSuffix(string(watches), "  chart: helm-charts/plotboard\n  overrideValues:\n    rbac.create: \"false\"\n") {
		t.Errorf("watches.yaml:\n%s", watches)
	}
	var out strings.Builder
	r.Print(&out)
	for _, want := range []string{
		"renders ClusterRole/release-plotboard-clusterrole, ClusterRoleBinding/release-plotboard-clusterrolebinding, which it does not declare",
		"safe default: watches.yaml sets overrideValues rbac.create=false",
		"declare their kinds in helm-charts/plotboard/Chart.yaml's warpdrive.transwarp.io/cluster-scoped-kinds and remove the override",
		"Role.rbac.authorization.k8s.io by templates/role.yaml when if and .Values.rbac.create .Values.rbac.namespaced",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}

	root = smallRepo(t)
	r, err = Add(Options{Root: root, Chart: filepath.Join("testdata", "sessionstore"), Kind: "SessionStore", Group: "cache.example.com",
		Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatal(err)
	}
	watches, _ = os.ReadFile(filepath.Join(root, "watches.yaml"))
	out.Reset()
	r.Print(&out)
	if strings.Contains(string(watches), "overrideValues") || strings.Contains(out.String(), "Cluster-scoped and RBAC objects") ||
		strings.Contains(out.String(), "Roles and RoleBindings the chart does not declare") {
		t.Errorf("a chart that renders no cluster-scoped object got a safe default:\n%s\n%s", watches, out.String())
	}
}

// A Role or RoleBinding a chart renders grants what the operator holds in the namespace to
// the subject the values name. Undeclared, a boolean that turns it off is a safe default, and
// a chart that renders one whatever its booleans is refused; declared, it is the
// administrator's decision, and the kind's editor role leaves edit.
func TestAddRefusesUndeclaredRBAC(t *testing.T) {
	granting := filepath.Join(t.TempDir(), "plotboard")
	copyDir(t, filepath.Join("testdata", "plotboard"), granting)
	role, err := os.ReadFile(filepath.Join(granting, "templates", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The Role and RoleBinding whatever the values.
	unguarded := strings.Replace(strings.Replace(string(role), "{{- if and .Values.rbac.create .Values.rbac.namespaced }}\n", "", 1), "{{- end }}\n", "", 1)
	write(t, filepath.Join(granting, "templates", "role.yaml"), unguarded)

	root := smallRepo(t)
	before := tree(t, root)
	_, err = Add(Options{Root: root, Chart: granting, Kind: "Plotboard", Group: "monitoring.example.com", Version: "v1", Manifests: fakeManifests})
	if err == nil {
		t.Fatal("a chart that renders a RoleBinding whatever its values was added undeclared")
	}
	for _, want := range []string{"Role/release-plotboard, RoleBinding/release-plotboard",
		"warpdrive.transwarp.io/rbac-kinds: Role.rbac.authorization.k8s.io,RoleBinding.rbac.authorization.k8s.io",
		filepath.Join(granting, "Chart.yaml")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	if after := tree(t, root); !maps.EqualFunc(before, after, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Errorf("the refusal changed the repository: %v", keys(after))
	}

	chartYAML, err := os.ReadFile(filepath.Join(granting, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(granting, "Chart.yaml"), string(chartYAML)+
		"annotations:\n  warpdrive.transwarp.io/rbac-kinds: Role.rbac.authorization.k8s.io,RoleBinding.rbac.authorization.k8s.io\n")
	r, err := Add(Options{Root: root, Chart: granting, Kind: "Plotboard", Group: "monitoring.example.com", Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatalf("declared: %v", err)
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "the chart declares the RBAC kinds [Role.rbac.authorization.k8s.io RoleBinding.rbac.authorization.k8s.io]") ||
		!strings.Contains(out.String(), "its editor role is not aggregated to edit") ||
		!strings.Contains(out.String(), "with its defaults it renders Role/release-plotboard, RoleBinding/release-plotboard") {
		t.Errorf("the report does not say the chart declares RBAC:\n%s", out.String())
	}
}

// A boolean a spec could turn to render a Role the chart does not declare is pinned to its
// default by overrideValues.
func TestAddPinsWhatWouldRenderUndeclaredRBAC(t *testing.T) {
	optIn := filepath.Join(t.TempDir(), "plotboard")
	copyDir(t, filepath.Join("testdata", "plotboard"), optIn)
	role, err := os.ReadFile(filepath.Join(optIn, "templates", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(optIn, "templates", "role.yaml"),
		strings.Replace(string(role), "if and .Values.rbac.create .Values.rbac.namespaced", "if .Values.rbac.namespaced", 1))
	root := smallRepo(t)
	r, err := Add(Options{Root: root, Chart: optIn, Kind: "Plotboard", Group: "monitoring.example.com", Version: "v1", Manifests: fakeManifests})
	if err != nil {
		t.Fatal(err)
	}
	watches, _ := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if !strings.HasSuffix(string(watches), "  overrideValues:\n    rbac.create: \"false\"\n    rbac.namespaced: \"false\"\n") {
		t.Errorf("watches.yaml:\n%s", watches)
	}
	var out strings.Builder
	r.Print(&out)
	if !strings.Contains(out.String(), "watches.yaml pins rbac.namespaced to the defaults") {
		t.Errorf("the report does not name the pinned value:\n%s", out.String())
	}
}

// Grafana's chart let a tenant who may edit its CRs read every Secret of the namespace: a
// ServiceAccount of their own in serviceAccount.name, and rbac.extraRoleRules that read
// Secrets. Added by add-kind, the plotboard chart, shaped like it, renders no RBAC object for
// those values under its overrides.
func TestAddGivesGrafanaShapedValuesNoRBAC(t *testing.T) {
	root := smallRepo(t)
	if _, err := Add(Options{Root: root, Chart: filepath.Join("testdata", "plotboard"), Kind: "Plotboard", Group: "monitoring.example.com",
		Version: "v1", Manifests: fakeManifests}); err != nil {
		t.Fatal(err)
	}
	c, err := loader.LoadDir(filepath.Join(root, "helm-charts", "plotboard"))
	if err != nil {
		t.Fatal(err)
	}
	watches, err := watchfile.Load(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	overrides := watches[len(watches)-1].OverrideValues
	secretRule := map[string]any{"apiGroups": []any{""}, "resources": []any{"secrets"}, "verbs": []any{"get", "list"}}
	for name, spec := range map[string]map[string]any{
		"extraRoleRules": {"serviceAccount": map[string]any{"create": false, "name": "tenant"},
			"rbac": map[string]any{"extraRoleRules": []any{secretRule}}},
		"namespaced": {"serviceAccount": map[string]any{"create": false, "name": "tenant"},
			"rbac": map[string]any{"create": true, "namespaced": true, "extraRoleRules": []any{secretRule}}},
	} {
		objs, err := renderObjects(c, spec, overrides)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, o := range objs {
			if o.gk.Group == "rbac.authorization.k8s.io" {
				t.Errorf("%s: overrides %v render %s", name, overrides, o.key)
			}
		}
	}
}

// A .helmignore'd file is left out, as Helm's loader leaves it out; a packaged chart and a
// dependency vendored as a .tgz are taken as they are.
func TestAddFromPackages(t *testing.T) {
	work := t.TempDir()
	// webinfo's ci/ is in its .helmignore.
	root := smallRepo(t)
	_, err := Add(Options{Root: root, Chart: filepath.Join("testdata", "webinfo"), Kind: "WebInfo", Group: "web.example.com", Version: "v1alpha1", Manifests: fakeManifests})
	if err == nil {
		if _, err := os.Stat(filepath.Join(root, "helm-charts", "webinfo", "ci")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the .helmignore'd ci/ was copied: %v", err)
		}
		if _, err := os.Stat(filepath.Join(root, "helm-charts", "webinfo", ".helmignore")); err != nil {
			t.Error(err)
		}
	} else if !strings.Contains(err.Error(), "CRD") {
		t.Fatal(err)
	} else {
		t.Logf("webinfo, a chart without a schema: %v", err)
	}

	// keystore with its library chart packaged in charts/, then keystore packaged.
	withTgz := filepath.Join(work, "keystore")
	copyDir(t, filepath.Join("testdata", "keystore"), withTgz)
	common, err := loader.LoadDir(filepath.Join(withTgz, "charts", "common"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(withTgz, "charts", "common")); err != nil {
		t.Fatal(err)
	}
	tgz, err := chartutil.Save(common, filepath.Join(withTgz, "charts"))
	if err != nil {
		t.Fatal(err)
	}
	keystore, err := loader.LoadDir(withTgz)
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := chartutil.Save(keystore, work)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{withTgz, pkg} {
		root := smallRepo(t)
		_, err := Add(Options{Root: root, Chart: src, Kind: "KeyStore", Group: "data.example.com", Version: "v1alpha1", Manifests: fakeManifests})
		if err != nil && strings.Contains(err.Error(), "CRD") {
			t.Logf("%s: %v", src, err) // crdgen's translation of the schema decides
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if src == pkg { // helm package writes subcharts as directories
			if _, err := os.Stat(filepath.Join(root, "helm-charts", "keystore", "charts", "common", "Chart.yaml")); err != nil {
				t.Errorf("%s: the vendored common was not copied: %v", src, err)
			}
			continue
		}
		want, _ := os.ReadFile(tgz)
		got, err := os.ReadFile(filepath.Join(root, "helm-charts", "keystore", "charts", filepath.Base(tgz)))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: the vendored %s was not copied as it is: %v", src, filepath.Base(tgz), err)
		}
	}
}

// Every refusal leaves the repository as it was.
func TestAddRefuses(t *testing.T) {
	work := t.TempDir()
	noDeps := filepath.Join(work, "nodeps")
	copyDir(t, filepath.Join("testdata", "keystore"), noDeps)
	if err := os.RemoveAll(filepath.Join(noDeps, "charts")); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(work, "broken")
	copyDir(t, filepath.Join("testdata", "ledger"), broken)
	write(t, filepath.Join(broken, "Chart.yaml"), "apiVersion: v2\nname: broken\n") // no version

	failing := func(root string) ([]byte, error) {
		if _, err := fakeManifests(root); err != nil {
			return nil, err
		}
		write(t, filepath.Join(root, "PROJECT"), "changed\n")
		return []byte("crdgen: no"), errors.New("exit status 1")
	}
	ledger := filepath.Join("testdata", "ledger")
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"a kind already watched", Options{Chart: ledger, Kind: "Memcached", Group: "other.example.com", Version: "v1"}, "already in watches.yaml"},
		{"the same kind in other letters", Options{Chart: ledger, Kind: "MemCached", Group: "other.example.com", Version: "v1"}, "already in watches.yaml"},
		{"an existing chart directory", Options{Chart: ledger, Kind: "Memcached2", Group: "a.example.com", Version: "v1"}, "helm-charts/memcached2 exists"},
		{"an invalid kind", Options{Chart: ledger, Kind: "ledger", Group: "a.example.com", Version: "v1"}, "KIND"},
		{"an invalid group", Options{Chart: ledger, Kind: "Ledger", Group: "example", Version: "v1"}, "GROUP"},
		{"an invalid version", Options{Chart: ledger, Kind: "Ledger", Group: "a.example.com", Version: "1.0"}, "VERSION"},
		{"a chart that does not load", Options{Chart: broken, Kind: "Ledger", Group: "a.example.com", Version: "v1"}, "does not load"},
		{"no chart", Options{Chart: filepath.Join(work, "none"), Kind: "Ledger", Group: "a.example.com", Version: "v1"}, "no such file"},
		{"a dependency to download", Options{Chart: noDeps, Kind: "KeyStore", Group: "a.example.com", Version: "v1"}, "helm dependency build"},
		{"make manifests fails", Options{Chart: ledger, Kind: "Ledger", Group: "a.example.com", Version: "v1", Manifests: failing}, "crdgen: no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := smallRepo(t)
			write(t, filepath.Join(root, "helm-charts", "memcached2", "Chart.yaml"), "apiVersion: v2\nname: x\nversion: 1.0.0\n")
			before := tree(t, root)
			tt.o.Root = root
			if tt.o.Manifests == nil {
				tt.o.Manifests = fakeManifests
			}
			_, err := Add(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one saying %q", err, tt.wantErr)
			}
			if after := tree(t, root); !maps.EqualFunc(before, after, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Errorf("the repository changed: %v, was %v", keys(after), keys(before))
			}
		})
	}
	// The missing dependency is named, with where it would come from.
	root := smallRepo(t)
	_, err := Add(Options{Root: root, Chart: noDeps, Kind: "KeyStore", Group: "a.example.com", Version: "v1", Manifests: fakeManifests})
	if err == nil || !strings.Contains(err.Error(), "keystore → common 2.x.x (oci://registry.example.com/charts)") {
		t.Errorf("error %v, want it to name common", err)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
