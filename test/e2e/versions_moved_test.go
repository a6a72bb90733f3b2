package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/gen/addversion"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/hostconversion"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The kind of TestChartWhoseValuesMoved, made by make add-kind from the key-value store chart
// of internal/gen/addversion's test data at v1alpha1, then grown to v1 by make add-version
// with the chart's next major version.
var keyValueGVK = schema.GroupVersionKind{Group: "kv.example.com", Version: "v1alpha1", Kind: "KeyValue"}

// A chart whose values moved is taken without breaking a CR or a manifest kept in Git:
//  1. make add-kind makes the chart's first version (0.1.0) a kind at v1alpha1; the tenant's
//     manifests (testdata/keyvalue/v1alpha1.yaml) apply and are Ready;
//  2. make add-version VERSION=v1 takes the chart's next major version (1.0.0), whose values
//     moved; a reviewer turns the drop it could not place (servicePort, renamed service.port)
//     into a move, as docs/versions.md says; the CRD now serves both versions through the
//     conversion webhook of the sidecar, which runs on the host here and is reached, as in
//     make run, through the webhook's Service (LocalConversion.Register);
//  3. the same CRs, untouched, are upgraded to chart 1.0.0 from their values converted to v1,
//     and the chart renders the same objects as before;
//  4. read at v1alpha1 they are as written, the dropped usePassword included; at v1 their
//     values are where the new chart has them;
//  5. kubectl apply of the same manifests changes nothing, and an edit in them (at v1alpha1)
//     upgrades the release;
//  6. the storage migration rewrites them at v1: the CRD's storedVersions is [v1].
func TestChartWhoseValuesMoved(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("make add-kind and make add-version make kinds for this operator's manager")
	}
	ctx := context.Background()
	charts := filepath.Join(env.Root, "internal", "gen", "addversion", "testdata")
	manifest := filepath.Join("testdata", "keyvalue", "v1alpha1.yaml")
	dir := repoCopy(t)
	plural := addkind.Plural(keyValueGVK.Kind)
	resource := func(version string) string { return plural + "." + version + "." + keyValueGVK.Group }

	// 1. The chart's first version, a kind at v1alpha1.
	if _, err := addkind.Add(addkind.Options{Root: dir, Chart: filepath.Join(charts, "keyvalue"),
		Kind: keyValueGVK.Kind, Group: keyValueGVK.Group, Version: keyValueGVK.Version, Manifests: manifests}); err != nil {
		t.Fatalf("make add-kind: %v", err)
	}
	installGeneratedCRD(t, dir, keyValueGVK.Group, plural)
	if env.Impersonating() {
		grantGeneratedRole(t, dir)
	}
	stop := startKeyValueOperator(t, dir, nil)
	ns := env.Namespace(t)
	var crs []*unstructured.Unstructured
	running := true // whether a manager runs: deleting a CR then uninstalls its release
	t.Cleanup(func() { deleteKeyValues(t, crs, running) })
	if out, err := env.Kubectl("apply", "-n", ns, "-f", manifest); err != nil {
		t.Fatalf("kubectl apply of the v1alpha1 manifests: %v: %s", err, out)
	}
	written := map[string]map[string]any{} // name -> spec, as written
	for _, cr := range readManifests(t, manifest) {
		written[cr.GetName()] = cr.Object["spec"].(map[string]any)
		cr.SetNamespace(ns)
		crs = append(crs, cr)
		waitCondition(t, cr, statuscontract.Ready, "True")
	}
	before := keyValueObjects(t, ns)
	stop()
	running = false

	// 2. The chart's next major version, and the reviewer's move.
	r, err := addversion.Add(addversion.Options{Root: dir, Kind: keyValueGVK.Kind, Version: "v1",
		Chart: filepath.Join(charts, "keyvalue-1.0.0"), Manifests: manifests})
	if err != nil {
		t.Fatalf("make add-version: %v", err)
	}
	var report strings.Builder
	r.Print(&report)
	t.Logf("make add-version KIND=KeyValue VERSION=v1 CHART=keyvalue-1.0.0:\n%s", report.String())
	reviewMove(t, filepath.Join(dir, "helm-charts", "keyvalue", conversion.FileName), "/servicePort", "/service/port")
	if _, err := manifests(dir); err != nil {
		t.Fatal(err)
	}
	local := framework.NewLocalConversion(t)
	crd := readGeneratedCRD(t, dir, keyValueGVK.Group, plural)
	if crd.Spec.Conversion == nil || crd.Spec.Conversion.Strategy != apiextensionsv1.WebhookConverter {
		t.Fatalf("the CRD's conversion is %+v, want the webhook: the versions differ", crd.Spec.Conversion)
	}
	if err := env.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
		t.Fatalf("applying the CRD of two versions: %v", err)
	}
	// As make run does: the CRD keeps crdgen's Service, which reaches the host's sidecar. Where
	// the operator is deployed (make test-deploy runs this suite beside it), that Service is
	// its pods', whose sidecars serve no kind of this test's: the CRD points at the host's
	// sidecar by URL instead.
	injected, err := local.Register(ctx, env.Client, keyValueGVK.GroupKind())
	switch {
	case errors.Is(err, hostconversion.ErrDeployed):
		t.Logf("the operator is deployed: the CRD points at the host's sidecar by URL (%v)", err)
		local.Point(crd)
		crd.ManagedFields = nil
		if err := env.Client.Patch(ctx, crd, client.Apply, client.FieldOwner("warpdrive-e2e"), client.ForceOwnership); err != nil {
			t.Fatalf("pointing the CRD at the host's sidecar: %v", err)
		}
	case err != nil:
		t.Fatalf("serving the conversion webhook from the host: %v", err)
	default:
		t.Cleanup(func() { unregisterHostConversion(t) })
		if !slices.Equal(injected, []string{crd.Name}) {
			t.Fatalf("the CA was injected into the CRDs %v, want [%s]", injected, crd.Name)
		}
	}
	if env.Impersonating() {
		grantGeneratedRole(t, dir) // with the storage migration's rights on the CRD
	}
	startKeyValueOperator(t, dir, local.Flags())
	running = true
	t.Cleanup(func() { deleteKeyValues(t, crs, true); running = false }) // before the processes stop

	// 3. The same CRs, on the new chart, render the same objects.
	framework.Eventually(t, 3*time.Minute, func(ctx context.Context) error {
		for name := range written {
			rel, err := deployedRelease(ctx, ns, name)
			if err != nil {
				return err
			}
			if v := rel.Chart.Metadata.Version; v != "1.0.0" {
				return fmt.Errorf("release %s is of chart %s", name, v)
			}
		}
		return nil
	})
	for name := range written {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(keyValueGVK.GroupVersion().WithKind(keyValueGVK.Kind))
		cr.SetNamespace(ns)
		cr.SetName(name)
		waitCondition(t, cr, statuscontract.Ready, "True")
	}
	if after := keyValueObjects(t, ns); !reflect.DeepEqual(before, after) {
		t.Errorf("chart 1.0.0 renders, from the converted values:\n%v\nchart 0.1.0 rendered:\n%v", after, before)
	}

	// 4. Read back at each version.
	for name, spec := range written {
		old := kubectlGet(t, resource("v1alpha1"), ns, name)
		for field, value := range spec {
			if got := old.Object["spec"].(map[string]any)[field]; !reflect.DeepEqual(got, value) {
				t.Errorf("%s: spec.%s read at v1alpha1 is %v, want %v as written", name, field, got, value)
			}
		}
		moved := kubectlGet(t, resource("v1"), ns, name).Object["spec"].(map[string]any)
		for _, gone := range []string{"replicaCount", "password", "servicePort", "usePassword"} {
			if v, ok := moved[gone]; ok {
				t.Errorf("%s: spec.%s read at v1 is %v: v1 has no such field", name, gone, v)
			}
		}
		for from, to := range map[string][]string{"replicaCount": {"replica", "replicaCount"}, "password": {"auth", "password"},
			"servicePort": {"service", "port"}} {
			want, ok := spec[from]
			if !ok {
				continue
			}
			if got, _, _ := unstructured.NestedFieldNoCopy(moved, to...); !reflect.DeepEqual(got, want) {
				t.Errorf("%s: spec.%s read at v1 is %v, want %v (written as spec.%s at v1alpha1)", name, strings.Join(to, "."), got, want, from)
			}
		}
	}

	// 5. The manifests in Git still apply; an edit in them is an upgrade.
	out, err := env.Kubectl("apply", "-n", ns, "-f", manifest)
	if err != nil || strings.Count(out, "unchanged") != len(written) {
		t.Errorf("kubectl apply of the same v1alpha1 manifests: %v: %s; want each unchanged", err, out)
	}
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "v1alpha1.yaml")
	if err := os.WriteFile(edited, []byte(strings.Replace(string(data), "replicaCount: 2", "replicaCount: 3", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := env.Kubectl("apply", "-n", ns, "-f", edited); err != nil {
		t.Fatalf("kubectl apply of the edited v1alpha1 manifests: %v: %s", err, out)
	}
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kv-auth"}, d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
			return fmt.Errorf("Deployment kv-auth has %v replicas, want the 3 of the edited manifest", d.Spec.Replicas)
		}
		return nil
	})

	// 6. Stored at v1 alone.
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		live := &apiextensionsv1.CustomResourceDefinition{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), live); err != nil {
			return err
		}
		if !slices.Equal(live.Status.StoredVersions, []string{"v1"}) {
			return fmt.Errorf("storedVersions %v, want [v1]", live.Status.StoredVersions)
		}
		return nil
	})
}

// startKeyValueOperator runs a manager and a sidecar over the copy dir's KeyValue alone, the
// sidecar with flags added, until the returned stop or the end of t.
func startKeyValueOperator(t *testing.T, dir string, sidecarFlags []string) (stop func()) {
	t.Helper()
	watches := watchesOf(t, dir, keyValueGVK.Kind)
	mgr, err := env.StartManager(framework.ProcessOptions{Name: "manager-keyvalue", WatchesFile: watches,
		Flags: []string{"--leader-election-id=manager-keyvalue"}})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := env.StartSidecar(framework.ProcessOptions{Name: "sidecar-keyvalue", WatchesFile: watches,
		Flags: append([]string{"--leader-election-id=sidecar-keyvalue"}, sidecarFlags...)})
	if err != nil {
		mgr.Stop()
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		sc.Stop()
		mgr.Stop()
		if env.Impersonating() {
			noDenials(t, mgr, sc)
		}
	}
	t.Cleanup(stop)
	return stop
}

// deleteKeyValues deletes the CRs and waits until they are gone; with no manager running,
// which would uninstall their releases, it removes their finalizers, the test's namespace
// taking their objects with it.
func deleteKeyValues(t *testing.T, crs []*unstructured.Unstructured, running bool) {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, cr := range crs {
		if !running {
			patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
			if err := client.IgnoreNotFound(c.Patch(context.Background(), cr.DeepCopy(), patch)); err != nil {
				t.Errorf("removing the finalizers of %s: %v", cr.GetName(), err)
			}
		}
		deleteCR(t, c, cr)
	}
}

// readManifests reads the objects of a YAML stream.
func readManifests(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
	return objs
}

// readGeneratedCRD reads the CRD make manifests generated in the copy dir.
func readGeneratedCRD(t *testing.T, dir, group, plural string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "config", "crd", "bases", group+"_"+plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return crd
}

// reviewMove does what a person reviewing make add-version's conversions.yaml does with a
// drop whose value lives on under another name: it makes the last step move it there.
func reviewMove(t *testing.T, path, from, to string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var steps []map[string]any
	if err := yaml.Unmarshal(data, &steps); err != nil {
		t.Fatal(err)
	}
	last := steps[len(steps)-1]
	drops, _ := last["drops"].([]any)
	i := slices.Index(drops, any(from))
	if i < 0 {
		t.Fatalf("make add-version did not list %s as a drop to review:\n%s", from, data)
	}
	last["drops"] = slices.Delete(drops, i, i+1)
	moves, _ := last["moves"].([]any)
	last["moves"] = append(moves, map[string]any{"from": from, "to": to})
	out, err := yaml.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// keyValueObjects reads what the key-value store chart renders in ns that a chart version
// could change: each Deployment's spec, each Service's ports and selector, each Secret's
// data (the releases' records aside), by kind and name.
func keyValueObjects(t *testing.T, ns string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	add := func(key string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = string(data)
	}
	var deployments appsv1.DeploymentList
	var services corev1.ServiceList
	var secrets corev1.SecretList
	for _, l := range []client.ObjectList{&deployments, &services, &secrets} {
		if err := env.Client.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "keyvalue"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range deployments.Items {
		add("Deployment/"+d.Name, d.Spec)
	}
	for _, s := range services.Items {
		add("Service/"+s.Name, []any{s.Spec.Ports, s.Spec.Selector})
	}
	for _, s := range secrets.Items {
		add("Secret/"+s.Name, s.Data)
	}
	if len(out) == 0 {
		t.Fatalf("no object of the key-value store chart in %s", ns)
	}
	return out
}

// kubectlGet reads name in ns with kubectl get of resource, <plural>.<version>.<group>.
func kubectlGet(t *testing.T, resource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	out, err := env.Kubectl("get", resource, name, "-n", ns, "-o", "json")
	if err != nil {
		t.Fatalf("kubectl get %s %s: %v: %s", resource, name, err, out)
	}
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(out), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

// unregisterHostConversion deletes the Service and EndpointSlice that LocalConversion.Register
// applied, which would send the API server's conversions to the test's closed port: the
// operator's own Service, made by make deploy later on the same cluster, would find them.
func unregisterHostConversion(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ns, name := crdgen.WebhookServiceNamespace, crdgen.WebhookServiceName
	for _, obj := range []client.Object{
		&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
	} {
		if err := env.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %T %s/%s of the host's conversion webhook: %v", obj, ns, name, err)
		}
	}
}
