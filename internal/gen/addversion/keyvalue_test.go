package addversion

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
)

const keyValueWatches = "- group: kv.example.com\n  version: v1alpha1\n  kind: KeyValue\n  chart: helm-charts/keyvalue\n"

// keyValueRepo makes a repository of one kind, KeyValue at v1alpha1, whose chart is
// testdata/keyvalue (0.1.0, the kind's first version), with its CRD generated.
func keyValueRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if err := copyDir("testdata/keyvalue", filepath.Join(root, "helm-charts", "keyvalue"), nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "watches.yaml"), []byte(keyValueWatches), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(root); err != nil {
		t.Fatal(err)
	}
	return root
}

// The step make add-version proposes from keyvalue 0.1.0 to 1.0.0: replicaCount and
// password moved under an object of the same name and type, so Infer places them;
// servicePort was renamed (service.port) and usePassword is gone, so they are drops for a
// person to review. The charts have no values.schema.json: crdgen types only the scale
// subresource's replicas path (replicaCount, replica.replicaCount, integers) and leaves every
// other field untyped, so Infer matches the others by name alone.
const wantKeyValueStep = `
# make add-version v1: review the moves; a drop whose value lives on in v1 under
# another name or place is a move.
- from: v1alpha1
  to: v1
  moves:
  - {from: /password, to: /auth/password}
  - {from: /replicaCount, to: /replica/replicaCount}
  drops:
  # /servicePort (untyped): gone, and no new field is named "servicePort" with that type
  - /servicePort
  # /usePassword (untyped): gone, and no new field is named "usePassword" with that type
  - /usePassword
`

// A chart whose next major version moved its values as Bitnami's did (issue 75, item 6):
// make add-version takes it, a reviewer places the renamed field, and CRs written at the old
// version render the objects they rendered before, where the chart's output is the same.
func TestAddChartWhoseValuesMoved(t *testing.T) {
	root := keyValueRepo(t)
	r, err := Add(Options{Root: root, Kind: "KeyValue", Version: "v1", Chart: "testdata/keyvalue-1.0.0", Manifests: generate})
	if err != nil {
		t.Fatal(err)
	}
	chartDir := filepath.Join(root, "helm-charts", "keyvalue")
	conversionsPath := filepath.Join(chartDir, conversion.FileName)
	proposed := readFile(t, conversionsPath)
	if want := conversionsHeader + wantKeyValueStep; proposed != want {
		t.Fatalf("conversions.yaml:\n%s\nwant:\n%s", proposed, want)
	}
	if len(r.Moves) != 2 || len(r.Drops) != 2 {
		t.Errorf("report moves %v, drops %v; want 2 and 2", r.Moves, r.Drops)
	}
	if !strings.HasPrefix(r.Chart, "keyvalue 1.0.0") {
		t.Errorf("report chart %q, want keyvalue 1.0.0", r.Chart)
	}
	crd := readKeyValueCRD(t, root)
	if vs := crd.Spec.Versions; len(vs) != 2 || vs[0].Name != "v1alpha1" || !vs[0].Served || vs[0].Storage ||
		vs[1].Name != "v1" || !vs[1].Served || !vs[1].Storage {
		t.Errorf("CRD versions %+v, want v1alpha1 served and v1 served and stored", vs)
	}
	if c := crd.Spec.Conversion; c == nil || c.Strategy != apiextv1.WebhookConverter {
		t.Errorf("conversion %+v, want Webhook: the versions' schemas differ", c)
	}
	checkIdempotent(t, root)
	proposedChain, err := conversion.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}

	// The reviewer: servicePort lives on as service.port, a rename Infer cannot know.
	drop := "  # /servicePort (untyped): gone, and no new field is named \"servicePort\" with that type\n  - /servicePort\n"
	reviewed := strings.Replace(proposed, drop, "", 1)
	reviewed = strings.Replace(reviewed, "  - {from: /replicaCount, to: /replica/replicaCount}\n",
		"  - {from: /replicaCount, to: /replica/replicaCount}\n  - {from: /servicePort, to: /service/port}\n", 1)
	if reviewed == proposed {
		t.Fatal("the review changed nothing")
	}
	if err := os.WriteFile(conversionsPath, []byte(reviewed), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generate(root); err != nil {
		t.Fatal(err)
	}
	checkIdempotent(t, root)
	chain, err := conversion.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := chain.Versions(); !reflect.DeepEqual(got, []string{"v1alpha1", "v1"}) {
		t.Fatalf("versions %v, want v1alpha1 and v1", got)
	}

	oldChart, newChart := "testdata/keyvalue", chartDir
	for _, tc := range []struct {
		name string
		spec string // a v1alpha1 spec, as YAML
		// secret says whether keyvalue 0.1.0 renders the password's Secret.
		secret bool
		// differ is what the two renderings legitimately differ in, "" when nothing does.
		differ string
	}{
		{name: "empty", spec: "{}"},
		{name: "the defaults", spec: readFile(t, filepath.Join(oldChart, "values.yaml"))},
		{name: "password set", spec: "{replicaCount: 3, password: s3cret, usePassword: true, servicePort: 7000}", secret: true},
		{name: "password empty", spec: "{replicaCount: 2, password: '', usePassword: true}"},
		{name: "image moved on", spec: "{image: {tag: '7.4'}, password: s3cret}", secret: true},
		// usePassword is gone in 1.0.0, where a password set is authentication on: the
		// Secret and the container's env come with the password.
		{name: "password set but unused", spec: "{password: s3cret, usePassword: false}", differ: "secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := jsonSpec(t, tc.spec)
			obj := map[string]any{
				"apiVersion": "kv.example.com/v1alpha1",
				"kind":       "KeyValue",
				"metadata":   map[string]any{"name": "kv", "namespace": "ns"},
				"spec":       spec,
			}
			v1, err := chain.ConvertMap(obj, "v1")
			if err != nil {
				t.Fatal(err)
			}
			back, err := chain.ConvertMap(v1, "v1alpha1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, obj) {
				t.Errorf("v1alpha1 -> v1 -> v1alpha1 changed the object:\n%v\nwant\n%v", back, obj)
			}
			_, usePassword := spec["usePassword"]
			kept := unconvertedOf(t, v1)
			if _, ok := kept["/usePassword"]; ok != usePassword || (ok && kept["/usePassword"] != spec["usePassword"]) {
				t.Errorf("annotation keeps %v, want usePassword kept exactly when the spec has it (%v)", kept, spec["usePassword"])
			}
			if _, ok := kept["/servicePort"]; ok {
				t.Errorf("annotation keeps servicePort, which moved to service.port: %v", kept)
			}

			before := render(t, oldChart, spec)
			after := render(t, newChart, v1["spec"].(map[string]any))
			if _, ok := before["Secret/kv-auth"]; ok != tc.secret {
				t.Errorf("keyvalue 0.1.0 renders the Secret: %v, want %v", ok, tc.secret)
			}
			switch tc.differ {
			case "":
				if !reflect.DeepEqual(before, after) {
					t.Errorf("keyvalue 1.0.0 with the spec converted to v1 renders\n%s\nkeyvalue 0.1.0 with the v1alpha1 spec\n%s",
						toYAML(t, after), toYAML(t, before))
				}
			case "secret":
				if _, ok := before["Secret/kv-auth"]; ok {
					t.Errorf("keyvalue 0.1.0 renders the Secret with usePassword false")
				}
				if _, ok := after["Secret/kv-auth"]; !ok {
					t.Errorf("keyvalue 1.0.0 renders no Secret for a password")
				}
				if !reflect.DeepEqual(before["Service/kv"], after["Service/kv"]) {
					t.Errorf("the Services differ:\n%s\n%s", toYAML(t, before["Service/kv"]), toYAML(t, after["Service/kv"]))
				}
				if !hasPasswordEnv(after["Deployment/kv"]) || hasPasswordEnv(before["Deployment/kv"]) {
					t.Errorf("want the password in the container's env in 1.0.0 alone")
				}
			}
			if len(before) < 2 || len(after) < 2 {
				t.Errorf("rendered %v and %v, want a Deployment and a Service at least", keys(before), keys(after))
			}
		})
	}

	// Before the review servicePort was a drop: kept for the way back, but 1.0.0 rendered the
	// Service on its default port. Placing the drop is what keeps the Service as it was.
	spec := jsonSpec(t, "{servicePort: 7000}")
	obj := map[string]any{"apiVersion": "kv.example.com/v1alpha1", "kind": "KeyValue", "metadata": map[string]any{"name": "kv"}, "spec": spec}
	v1, err := proposedChain.ConvertMap(obj, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if kept := unconvertedOf(t, v1); kept["/servicePort"] != int64(7000) {
		t.Errorf("the proposed step keeps %v, want servicePort 7000", kept)
	}
	if port := servicePort(render(t, newChart, v1["spec"].(map[string]any))["Service/kv"]); port != float64(6379) { // sigs.k8s.io/yaml decodes numbers as float64
		t.Errorf("before the review keyvalue 1.0.0 renders port %v, want the default 6379", port)
	}
}

func readKeyValueCRD(t *testing.T, root string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	var crd apiextv1.CustomResourceDefinition
	data := readFile(t, filepath.Join(root, "config", "crd", "bases", "kv.example.com_keyvalues.yaml"))
	if err := yaml.UnmarshalStrict([]byte(data), &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
}

// jsonSpec decodes a spec written in YAML as the API server decodes one: whole numbers are
// int64, as the conversion's annotation gives them back.
func jsonSpec(t *testing.T, y string) map[string]any {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	var spec map[string]any
	if err := utiljson.Unmarshal(js, &spec); err != nil {
		t.Fatal(err)
	}
	if spec == nil {
		spec = map[string]any{}
	}
	return spec
}

// unconvertedOf is what obj's conversion annotation keeps for v1alpha1.
func unconvertedOf(t *testing.T, obj map[string]any) map[string]any {
	t.Helper()
	meta, _ := obj["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	value, _ := annotations[conversion.Annotation].(string)
	if value == "" {
		return nil
	}
	var u map[string]map[string]any
	if err := utiljson.Unmarshal([]byte(value), &u); err != nil {
		t.Fatal(err)
	}
	return u["v1alpha1"]
}

// render renders the chart in dir with values as the operator does for a CR whose spec they
// are (release kv in namespace ns), and returns the objects by kind and name, without the
// helm.sh/chart label, which names the chart's version.
func render(t *testing.T, dir string, values map[string]any) map[string]map[string]any {
	t.Helper()
	c, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := chartutil.ToRenderValues(c, copyValues(t, values),
		chartutil.ReleaseOptions{Name: "kv", Namespace: "ns", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	objects := map[string]map[string]any{}
	for name, content := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(content) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(obj) == 0 {
				continue
			}
			meta, _ := obj["metadata"].(map[string]any)
			if labels, ok := meta["labels"].(map[string]any); ok {
				delete(labels, "helm.sh/chart")
			}
			objects[fmt.Sprintf("%s/%s", obj["kind"], meta["name"])] = obj
		}
	}
	return objects
}

// copyValues copies values through JSON: Helm's coalescing writes into the map it is given.
func copyValues(t *testing.T, values map[string]any) map[string]any {
	t.Helper()
	js, err := utiljson.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(js, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func hasPasswordEnv(deployment map[string]any) bool {
	return strings.Contains(fmt.Sprint(deployment), "KEYVALUE_PASSWORD")
}

func servicePort(service map[string]any) any {
	spec, _ := service["spec"].(map[string]any)
	ports, _ := spec["ports"].([]any)
	if len(ports) != 1 {
		return nil
	}
	port, _ := ports[0].(map[string]any)
	return port["port"]
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func toYAML(t *testing.T, v any) string {
	t.Helper()
	out, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
