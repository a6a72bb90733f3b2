package workloadstatus

import (
	"encoding/json"
	"os"
	"runtime/debug"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/heaptest"
)

// fleetMember is the i-th of a fleet made from a testdata file (heaptest.FleetMember).
func fleetMember(t testing.TB, file string, i int) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return heaptest.FleetMember(b, i)
}

func sampleAppService(t testing.TB, i int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(fleetMember(t, "appservice.json", i)); err != nil {
		t.Fatal(err)
	}
	return u
}

func sampleDeployment(t testing.TB, i int) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	if err := json.Unmarshal(fleetMember(t, "deployment.json", i), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// What the sidecar's cache holds per CR, measured on 2000 distinct AppServices and their
// Deployments: the CR trimmed to less than a third of itself, its Deployment to less than
// half. A trim that kept what it drops, stopped sharing the conditions or stopped interning
// fails here.
func TestCachedSizes(t *testing.T) {
	heapPer := func(mk func(i int) any) int64 { return heaptest.PerObject(2000, mk) }
	trim := func(o any, tr func(any) (any, error)) any { o, _ = tr(o); return o }
	crWhole := heapPer(func(i int) any { return sampleAppService(t, i) })
	crTrimmed := heapPer(func(i int) any { return trim(sampleAppService(t, i), TrimCustomResource) })
	dWhole := heapPer(func(i int) any { return sampleDeployment(t, i) })
	dTrimmed := heapPer(func(i int) any { return trim(sampleDeployment(t, i), TrimWorkload) })
	t.Logf("AppService %d -> %d bytes, Deployment %d -> %d bytes", crWhole, crTrimmed, dWhole, dTrimmed)
	if crTrimmed*3 > crWhole {
		t.Errorf("a trimmed AppService holds %d bytes, more than a third of its %d", crTrimmed, crWhole)
	}
	if dTrimmed*2 > dWhole {
		t.Errorf("a trimmed Deployment holds %d bytes, more than half of its %d", dTrimmed, dWhole)
	}
}

// Two trimmed objects' equal keys and values share their bytes; each object's own name
// stays its own. The collector is held off: strings interned on either side of a collection
// need not share (internal/sharedstrings), and one between the two trims made this test fail about
// once in a hundred runs.
func TestTrimmedObjectsShareStrings(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	crs := [2]*unstructured.Unstructured{}
	for i := range crs {
		o, _ := TrimCustomResource(sampleAppService(t, i))
		crs[i] = o.(*unstructured.Unstructured)
	}
	a, b := crs[0].Object["metadata"].(map[string]any), crs[1].Object["metadata"].(map[string]any)
	if !same(mapKey(t, a, "resourceVersion"), mapKey(t, b, "resourceVersion")) {
		t.Error("the key resourceVersion of two cached CRs is not shared")
	}
	if !same(crs[0].GetNamespace(), crs[1].GetNamespace()) {
		t.Error("the namespace of two cached CRs is not shared")
	}
	if crs[0].GetName() == crs[1].GetName() {
		t.Error("each CR's name must stay its own")
	}

	d0, _ := TrimWorkload(sampleDeployment(t, 0))
	d1, _ := TrimWorkload(sampleDeployment(t, 1))
	x, y := d0.(*appsv1.Deployment), d1.(*appsv1.Deployment)
	const chartLabel = "helm.sh/chart"
	if !same(x.Labels[chartLabel], y.Labels[chartLabel]) || !same(mapKey(t, x.Labels, chartLabel), mapKey(t, y.Labels, chartLabel)) {
		t.Error("the chart label of two cached Deployments is not shared")
	}
	if !same(x.OwnerReferences[0].Kind, y.OwnerReferences[0].Kind) || !same(x.Namespace, y.Namespace) {
		t.Error("the owner's kind or the namespace of two cached Deployments is not shared")
	}
	sel := "app.kubernetes.io/name"
	if !same(x.Spec.Selector.MatchLabels[sel], y.Spec.Selector.MatchLabels[sel]) {
		t.Error("the selector of two cached Deployments is not shared")
	}
}

// mapKey is m's key equal to name, as the map holds it.
func mapKey[V any](t *testing.T, m map[string]V, name string) string {
	t.Helper()
	for k := range m {
		if k == name {
			return k
		}
	}
	t.Fatalf("no key %q in %v", name, m)
	return ""
}
