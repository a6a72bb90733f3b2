package addversion

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/gen/repofiles"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

const shopWatches = "# The kinds.\n- group: shop.example.com\n  version: v1alpha1\n  kind: Shop\n  chart: helm-charts/shop\n"

// shopRepo makes a repository of one kind, Shop at v1alpha1, whose chart is testdata/shop,
// with its CRD generated.
func shopRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := copyDir("testdata/shop", filepath.Join(root, "helm-charts", "shop"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "watches.yaml"), []byte(shopWatches), 0o644); err != nil {
		t.Fatal(err)
	}
	sample := "apiVersion: shop.example.com/v1alpha1\nkind: Shop\nmetadata:\n  name: shop-sample\n" +
		"spec:\n  replicaCount: 2\n  image: shop:1.0\n  password: s3cret\n  legacyPort: 9090\n"
	if err := os.MkdirAll(filepath.Join(root, "config", "samples"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "config", "samples", "shop.example.com_v1alpha1_shop.yaml"), []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// generate does what make manifests does to the CRDs, as hack/crdgen does it.
func generate(root string) ([]byte, error) {
	files, err := crdgen.GenerateAll(filepath.Join(root, "watches.yaml"), filepath.Join(root, "helm-charts"))
	if err != nil {
		return nil, err
	}
	out := filepath.Join(root, "config", "crd", "bases")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(out, f.Name), f.Data, 0o644); err != nil {
			return nil, err
		}
	}
	return []byte("wrote the CRDs\n"), nil
}

// failingManifests stands for a make manifests that fails after writing a file.
func failingManifests(root string) ([]byte, error) {
	if _, err := generate(root); err != nil {
		return nil, err
	}
	return []byte("kindgen: no"), errors.New("exit status 2")
}

func readCRD(t *testing.T, root string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "shop.example.com_shops.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkIdempotent fails unless generating again changes no file of root.
func checkIdempotent(t *testing.T, root string) {
	t.Helper()
	before := tree(t, root)
	if _, err := generate(root); err != nil {
		t.Fatal(err)
	}
	if changed := repofiles.Changed(before, tree(t, root)); len(changed) > 0 {
		t.Errorf("make manifests after add-version changed %v", changed)
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

const wantShopConversions = `# The API versions of this chart's kind, oldest first, and where each step moves the values
# of spec (internal/conversion). make add-version appends a step: review its moves and drops.

# make add-version v1beta1: review the moves; a drop whose value lives on in v1beta1 under
# another name or place is a move.
- from: v1alpha1
  to: v1beta1
  moves:
  - {from: /password, to: /auth/password}
  drops:
  # /legacyPort (integer): gone, and no new field is named "legacyPort" with that type
  - /legacyPort
  # /replicaCount (integer): gone, and no new field is named "replicaCount" with that type
  - /replicaCount
`

func TestAddMovedValues(t *testing.T) {
	root := shopRepo(t)
	r, err := Add(Options{Root: root, Kind: "Shop", Version: "v1beta1", Chart: "testdata/shop-v1beta1", Manifests: generate})
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(root, "helm-charts", "shop")
	if got := readFile(t, filepath.Join(chart, "conversions.yaml")); got != wantShopConversions {
		t.Errorf("conversions.yaml:\n%s\nwant:\n%s", got, wantShopConversions)
	}
	if len(r.Moves) != 1 || len(r.Drops) != 2 {
		t.Errorf("report moves %v, drops %v; want 1 and 2", r.Moves, r.Drops)
	}
	if r.Sample != "config/samples/shop.example.com_v1beta1_shop.yaml" {
		t.Errorf("report sample %q", r.Sample)
	}

	watches, err := watchfile.Load(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(watches) != 1 || watches[0].Version != "v1beta1" {
		t.Errorf("watches.yaml: %+v, want Shop at v1beta1", watches)
	}
	if got := readFile(t, filepath.Join(root, "watches.yaml")); got != strings.Replace(shopWatches, "v1alpha1", "v1beta1", 1) {
		t.Errorf("watches.yaml changed beyond the version:\n%s", got)
	}
	// The new chart replaced the old one; the old one's schema is kept.
	if values := readFile(t, filepath.Join(chart, "values.yaml")); !strings.Contains(values, "auth:") {
		t.Errorf("values.yaml is not the new chart's:\n%s", values)
	}
	old := readFile(t, filepath.Join(chart, "versions", "v1alpha1.schema.json"))
	if !strings.Contains(old, `"replicaCount"`) || strings.Contains(old, `"auth"`) {
		t.Errorf("versions/v1alpha1.schema.json is not v1alpha1's spec schema:\n%s", old)
	}
	annotations, err := chartAnnotations(chart)
	if err != nil {
		t.Fatal(err)
	}
	if annotations[crdgen.AnnotationPlural] != "shops" || annotations[crdgen.AnnotationReplicasPath] != ".spec.replicas" {
		t.Errorf("Chart.yaml annotations %v: want the old chart's plural and the new chart's replicasPath", annotations)
	}

	// The sample moved to v1beta1 with its values; what v1beta1 has no place for is left out.
	if _, err := os.Stat(filepath.Join(root, "config", "samples", "shop.example.com_v1alpha1_shop.yaml")); !os.IsNotExist(err) {
		t.Errorf("the v1alpha1 sample is still there: %v", err)
	}
	wantSample := "# The v1alpha1 sample converted to v1beta1 by make add-version (the conversions of conversions.yaml): edit it\n" +
		"# freely, make manifests does not overwrite it.\n" +
		"apiVersion: shop.example.com/v1beta1\nkind: Shop\nmetadata:\n  name: shop-sample\n" +
		"spec:\n  auth:\n    password: s3cret\n  image: shop:1.0\n"
	if got := readFile(t, filepath.Join(root, "config", "samples", "shop.example.com_v1beta1_shop.yaml")); got != wantSample {
		t.Errorf("v1beta1 sample:\n%s\nwant:\n%s", got, wantSample)
	}

	crd := readCRD(t, root)
	vs := crd.Spec.Versions
	if len(vs) != 2 || vs[0].Name != "v1alpha1" || vs[1].Name != "v1beta1" {
		t.Fatalf("CRD versions %v, want v1alpha1 and v1beta1", vs)
	}
	if !vs[0].Served || vs[0].Storage || !vs[1].Served || !vs[1].Storage {
		t.Errorf("want both versions served and v1beta1 stored: %+v", vs)
	}
	if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextv1.WebhookConverter {
		t.Errorf("conversion %+v, want Webhook", c)
	}
	if _, ok := vs[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["legacyPort"]; !ok {
		t.Errorf("v1alpha1 lost legacyPort")
	}
	checkIdempotent(t, root)

	// And a third version with the same chart has v1beta1's schema: nothing moves.
	if _, err := Add(Options{Root: root, Kind: "Shop", Version: "v1", Manifests: generate}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(chart, "conversions.yaml")); !strings.HasPrefix(got, wantShopConversions) ||
		!strings.HasSuffix(got, "- from: v1beta1\n  to: v1\n") {
		t.Errorf("conversions.yaml after v1:\n%s", got)
	}
	if vs := readCRD(t, root).Spec.Versions; len(vs) != 3 || !vs[2].Storage || vs[1].Storage {
		t.Errorf("versions %+v, want three, v1 stored", vs)
	}
	checkIdempotent(t, root)
}

func TestAddSameSchema(t *testing.T) {
	root := shopRepo(t)
	r, err := Add(Options{Root: root, Kind: "Shop", Version: "v1alpha2", Manifests: generate})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Moves) != 0 || len(r.Drops) != 0 || r.Chart != "" {
		t.Errorf("report %+v, want nothing moved and the chart kept", r)
	}
	crd := readCRD(t, root)
	if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextv1.NoneConverter {
		t.Errorf("conversion %+v, want None", c)
	}
	if len(crd.Spec.Versions) != 2 || !crd.Spec.Versions[1].Storage || crd.Spec.Versions[1].Name != "v1alpha2" {
		t.Errorf("versions %+v", crd.Spec.Versions)
	}
	checkIdempotent(t, root)
}

func TestAddRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"unknown kind", Options{Kind: "Store", Version: "v1"}, `kind "Store" is not in watches.yaml (kinds: Shop)`},
		{"bad name", Options{Kind: "Shop", Version: "version2"}, "not a Kubernetes version name"},
		{"present", Options{Kind: "Shop", Version: "v1alpha1"}, "already a version"},
		{"lower", Options{Kind: "Shop", Version: "v1alpha0"}, "not a Kubernetes version name"},
		{"chart missing", Options{Kind: "Shop", Version: "v1", Chart: "testdata/nothing"}, "reading chart testdata/nothing"},
		{"chart crdgen refuses", Options{Kind: "Shop", Version: "v1", Chart: "badChart"}, ".spec.image must be an integer"},
		{"make manifests fails", Options{Kind: "Shop", Version: "v1", Manifests: failingManifests}, "every file is put back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := shopRepo(t)
			before := tree(t, root)
			tc.o.Root = root
			if tc.o.Manifests == nil {
				tc.o.Manifests = generate
			}
			if tc.o.Chart == "badChart" {
				// The new chart's scale subresource would be on a string.
				tc.o.Chart = filepath.Join(t.TempDir(), "shop")
				if err := copyDir("testdata/shop-v1beta1", tc.o.Chart, nil); err != nil {
					t.Fatal(err)
				}
				chartYAML := filepath.Join(tc.o.Chart, "Chart.yaml")
				data := strings.Replace(readFile(t, chartYAML), ".spec.replicas", ".spec.image", 1)
				if err := os.WriteFile(chartYAML, []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Add(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
			if changed := repofiles.Changed(before, tree(t, root)); len(changed) > 0 {
				t.Errorf("a refused add-version changed %v", changed)
			}
		})
	}

	t.Run("lower than the newest", func(t *testing.T) {
		root := shopRepo(t)
		if _, err := Add(Options{Root: root, Kind: "Shop", Version: "v1", Manifests: generate}); err != nil {
			t.Fatal(err)
		}
		_, err := Add(Options{Root: root, Kind: "Shop", Version: "v1beta1", Manifests: generate})
		if err == nil || !strings.Contains(err.Error(), "comes before v1") {
			t.Errorf("error %v, want one saying v1beta1 comes before v1", err)
		}
	})
}

// A new chart whose safe default differs from the kind's overrideValues is reported, and
// watches.yaml keeps them: only the version changes.
func TestAddReportsOtherOverrides(t *testing.T) {
	root := shopRepo(t)
	watches := shopWatches + "  overrideValues:\n    rbac.create: \"false\"\n"
	if err := os.WriteFile(filepath.Join(root, "watches.yaml"), []byte(watches), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Add(Options{Root: root, Kind: "Shop", Version: "v1beta1", Chart: "testdata/shop-v1beta1", Manifests: generate})
	if err != nil {
		t.Fatal(err)
	}
	if !r.OverridesDiffer || len(r.Overrides) != 0 {
		t.Errorf("report overrides %v (differ %v), want the new chart's none, reported", r.Overrides, r.OverridesDiffer)
	}
	if got := readFile(t, filepath.Join(root, "watches.yaml")); got != strings.Replace(watches, "v1alpha1", "v1beta1", 1) {
		t.Errorf("watches.yaml:\n%s", got)
	}
}

// A new chart copied from a kind with versions brings none of them: the kind's own are kept.
func TestAddLeavesTheNewChartsVersionsBehind(t *testing.T) {
	root := shopRepo(t)
	chart := filepath.Join(t.TempDir(), "shop")
	if err := copyDir("testdata/shop-v1beta1", chart, nil); err != nil {
		t.Fatal(err)
	}
	for rel, data := range map[string]string{
		"conversions.yaml":         "- {from: v1, to: v2}\n",
		"versions/v1.schema.json":  "{}",
		"versions/deprecated.yaml": "v1: old\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(chart, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(chart, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Add(Options{Root: root, Kind: "Shop", Version: "v1beta1", Chart: chart, Manifests: generate}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "helm-charts", "shop")
	if got := readFile(t, filepath.Join(dir, "conversions.yaml")); got != wantShopConversions {
		t.Errorf("conversions.yaml:\n%s", got)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "versions"))
	if err != nil || len(entries) != 1 || entries[0].Name() != "v1alpha1.schema.json" {
		t.Errorf("versions/ holds %v (%v), want v1alpha1.schema.json alone", entries, err)
	}
}
