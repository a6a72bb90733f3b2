package workloadstatus

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/heaptest"
)

// fleetMember is the i-th of a fleet made from a testdata file (one of the benchmark's
// objects, read back from the local cluster at 10,000 CRs): its own name, UIDs, resource
// version and times, as a cache would hold them. A fleet of copies of one object would
// share every interned name and overstate what interning saves.
func fleetMember(t testing.TB, file string, i int) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.NewReplacer(
		"0000", fmt.Sprintf("%04d", i),
		"1ba6bfb8", fmt.Sprintf("%08x", i),
		"ffc3c75b", fmt.Sprintf("%08x", 1<<20+i),
		`"808"`, fmt.Sprintf(`"%d"`, 1000+i),
		`"675"`, fmt.Sprintf(`"%d"`, 100000+i),
		"03:00:30Z", fmt.Sprintf("03:%02d:%02dZ", i/60%60, i%60),
		"03:00:31Z", fmt.Sprintf("04:%02d:%02dZ", i/60%60, i%60),
	).Replace(string(b)))
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
// stays its own.
func TestTrimmedObjectsShareStrings(t *testing.T) {
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	key := func(m map[string]any, name string) string {
		for k := range m {
			if k == name {
				return k
			}
		}
		t.Fatalf("no key %q in %v", name, m)
		return ""
	}
	crs := [2]*unstructured.Unstructured{}
	for i := range crs {
		o, _ := TrimCustomResource(sampleAppService(t, i))
		crs[i] = o.(*unstructured.Unstructured)
	}
	a, b := crs[0].Object["metadata"].(map[string]any), crs[1].Object["metadata"].(map[string]any)
	if !same(key(a, "resourceVersion"), key(b, "resourceVersion")) {
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
	if !same(x.Labels[chartLabel], y.Labels[chartLabel]) || !same(key(anyMap(x.Labels), chartLabel), key(anyMap(y.Labels), chartLabel)) {
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

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
