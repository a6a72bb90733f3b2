package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addversion"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// A tenant's oversized or malformed KeyValue, written at v1alpha1 while the kind is served
// at v1alpha1 and v1 through the conversion webhook (as TestChartWhoseValuesMoved sets it
// up), fails nobody else's reads:
//   - a moved field of another type than the chart's (password an object) is admitted by
//     v1alpha1's untyped schema and converted as it is; replicaCount a string is refused at
//     admission, saying which field and why;
//   - the conversion's own annotation, written by hand and malformed, is ignored by the
//     converter (internal/conversion: only it writes the annotation);
//   - a spec near the bounds: about 1 MiB of values in a moved field, and a dropped value
//     near what the annotation may hold (conversion.MaxAnnotationBytes);
//
// and kubectl get of the kind at either version lists every object, each reads back at
// v1alpha1 as written, and the well-formed neighbour in the same namespace is Ready.
func TestTenantsMalformedOrOversizedObjects(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("make add-kind and make add-version make kinds for this operator's manager")
	}
	ctx := t.Context()
	charts := filepath.Join(env.Root, "internal", "gen", "addversion", "testdata")
	dir := repoCopy(t)
	plural := addkind.Plural(keyValueGVK.Kind)
	resource := func(version string) string { return plural + "." + version + "." + keyValueGVK.Group }

	// The kind at v1alpha1, then v1 with the chart whose values moved, and the reviewer's move.
	if _, err := addkind.Add(addkind.Options{Root: dir, Chart: filepath.Join(charts, "keyvalue"),
		Kind: keyValueGVK.Kind, Group: keyValueGVK.Group, Version: keyValueGVK.Version, Manifests: manifests}); err != nil {
		t.Fatalf("make add-kind: %v", err)
	}
	if _, err := addversion.Add(addversion.Options{Root: dir, Kind: keyValueGVK.Kind, Version: "v1",
		Chart: filepath.Join(charts, "keyvalue-1.0.0"), Manifests: manifests}); err != nil {
		t.Fatalf("make add-version: %v", err)
	}
	reviewMove(t, filepath.Join(dir, "helm-charts", "keyvalue", conversion.FileName), "/servicePort", "/service/port")
	if _, err := manifests(dir); err != nil {
		t.Fatal(err)
	}
	installGeneratedCRD(t, dir, keyValueGVK.Group, plural)
	local := framework.NewLocalConversion(t)
	crd := readGeneratedCRD(t, dir, keyValueGVK.Group, plural)
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Fatalf("the CRD's conversion is %+v, want the webhook: the versions differ", crd.Spec.Conversion)
	}
	local.Point(crd)
	if err := env.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("applying the CRD of two versions: %v", err)
	}
	if env.Impersonating() {
		grantGeneratedRole(t, dir)
	}
	startKeyValueOperator(t, dir, local.Flags())
	ns := env.Namespace(t)
	var crs []*unstructured.Unstructured
	t.Cleanup(func() { deleteKeyValues(t, crs, true) }) // before the processes stop

	// About 1 MiB in 12,000 values, below the operator's DefaultMaxSpecValues (20,000), moved
	// to auth.password at v1; and 200 KiB dropped at v1, kept in the annotation.
	big := map[string]any{}
	for i := range 12000 {
		big[fmt.Sprintf("key-%05d", i)] = fmt.Sprintf("value-%05d-%s", i, strings.Repeat("x", 64))
	}
	objects := []map[string]any{
		keyValue("kv-good", nil, map[string]any{"replicaCount": 1, "usePassword": true, "password": "s3cret", "servicePort": 7000}),
		keyValue("kv-password-object", nil, map[string]any{"replicaCount": 1, "password": map[string]any{"value": "s3cret", "nested": []any{1, "two"}}}),
		keyValue("kv-bad-annotation", map[string]any{conversion.Annotation: `{"v1alpha1": {"/usePassword": tru`, "tenant.example.com/note": "kept"},
			map[string]any{"usePassword": false, "servicePort": 7001}),
		keyValue("kv-many-values", nil, map[string]any{"replicaCount": 1, "password": big}),
		keyValue("kv-large-drop", nil, map[string]any{"replicaCount": 1, "usePassword": strings.Repeat("y", 200<<10)}),
	}
	written := map[string]*unstructured.Unstructured{}
	for _, obj := range objects {
		u := createKeyValue(t, ns, obj)
		written[u.GetName()] = u
		crs = append(crs, u)
	}

	// replicaCount is the chart's replicas field, typed integer at v1alpha1 too: refused at
	// admission, naming the field.
	wrong := keyValue("kv-replicas-string", nil, map[string]any{"replicaCount": "three"})
	path := filepath.Join(t.TempDir(), "wrong.json")
	if err := os.WriteFile(path, mustMarshal(t, wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := env.Kubectl("create", "-n", ns, "-f", path)
	if err == nil {
		crs = append(crs, &unstructured.Unstructured{Object: wrong})
		t.Errorf("replicaCount a string was admitted: %s", out)
	} else if !strings.Contains(out, "spec.replicaCount") || !strings.Contains(out, "integer") {
		t.Errorf("replicaCount a string was refused, but not saying that spec.replicaCount must be an integer: %s", out)
	} else {
		t.Logf("replicaCount a string refused at admission: %s", strings.TrimSpace(out))
	}

	// The well-formed neighbour is Ready.
	good := written["kv-good"].DeepCopy()
	good.SetNamespace(ns)
	waitCondition(t, good, statuscontract.Ready, "True")

	// Lists at each version hold every object.
	for _, version := range []string{"v1alpha1", "v1"} {
		out, err := env.Kubectl("get", resource(version), "-n", ns, "-o", "json")
		if err != nil {
			t.Errorf("kubectl get %s: %v", resource(version), err)
			continue
		}
		var list struct {
			Items []*unstructured.Unstructured `json:"items"`
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("kubectl get %s: %v", resource(version), err)
		}
		var names []string
		for _, item := range list.Items {
			names = append(names, item.GetName())
			if item.GetAPIVersion() != keyValueGVK.Group+"/"+version {
				t.Errorf("listed at %s, %s is of %s", version, item.GetName(), item.GetAPIVersion())
			}
		}
		if len(names) != len(written) {
			t.Errorf("kubectl get %s listed %v, want the %d objects created", resource(version), names, len(written))
		}
	}

	// Each reads back at v1alpha1 as written: its spec, labels and annotations; but for the
	// conversion's own annotation, which the converter ignores when it does not decode, and
	// which therefore does not come back.
	for name, w := range written {
		got := kubectlGet(t, resource("v1alpha1"), ns, name)
		if !reflect.DeepEqual(got.Object["spec"], w.Object["spec"]) {
			t.Errorf("%s: spec read at v1alpha1 is not as written", name)
		}
		if !reflect.DeepEqual(got.GetLabels(), w.GetLabels()) {
			t.Errorf("%s: labels read at v1alpha1 are %v, want %v as written", name, got.GetLabels(), w.GetLabels())
		}
		wantAnnotations := map[string]string{}
		for k, v := range w.GetAnnotations() {
			if k != conversion.Annotation {
				wantAnnotations[k] = v
			}
		}
		gotAnnotations := map[string]string{}
		for k, v := range got.GetAnnotations() {
			switch {
			case k == conversion.Annotation:
				t.Logf("%s: read at v1alpha1, %s is %.100q (written %.100q)", name, k, v, w.GetAnnotations()[k])
				if v != w.GetAnnotations()[k] {
					t.Errorf("%s: read at v1alpha1, %s is %.100q, neither as written nor removed", name, k, v)
				}
			case strings.HasPrefix(k, "warpdrive.transwarp.io/"):
				// The operator's own.
			default:
				gotAnnotations[k] = v
			}
		}
		if !reflect.DeepEqual(gotAnnotations, wantAnnotations) {
			t.Errorf("%s: annotations read at v1alpha1 are %v, want %v as written", name, gotAnnotations, wantAnnotations)
		}
	}

	// At v1, the moved values are where the new chart has them, whatever their type.
	moved := kubectlGet(t, resource("v1"), ns, "kv-many-values").Object["spec"].(map[string]any)
	if got, _, _ := unstructured.NestedFieldNoCopy(moved, "auth", "password"); !reflect.DeepEqual(got, written["kv-many-values"].Object["spec"].(map[string]any)["password"]) {
		t.Error("kv-many-values: spec.auth.password read at v1 is not the password written at v1alpha1")
	}
	waitCondition(t, good, statuscontract.Ready, "True")
}

// keyValue is a KeyValue of v1alpha1 named name with annotations (nil: none) and spec.
func keyValue(name string, annotations, spec map[string]any) map[string]any {
	meta := map[string]any{"name": name, "labels": map[string]any{"tenant.example.com/app": name}}
	if annotations != nil {
		meta["annotations"] = annotations
	}
	return map[string]any{"apiVersion": keyValueGVK.GroupVersion().String(), "kind": keyValueGVK.Kind, "metadata": meta, "spec": spec}
}

// createKeyValue creates obj in ns with kubectl create (apply would copy it into an
// annotation, too large for the largest) and returns it as JSON decodes it, the way a read
// returns it.
func createKeyValue(t *testing.T, ns string, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	data := mustMarshal(t, obj)
	path := filepath.Join(t.TempDir(), "cr.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl("create", "-n", ns, "-f", path); err != nil {
		t.Fatalf("kubectl create of %d bytes: %v: %.2000s", len(data), err, out)
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns)
	return u
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
