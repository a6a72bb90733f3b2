package workloadstatus

import (
	"encoding/json"
	"os"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/heaptest"
)

// heapPer is the live heap that each of 2000 objects made by mk holds, in bytes.
func heapPer(mk func() any) int64 {
	return heaptest.PerObject(2000, func(int) any { return mk() })
}

// What the sidecar's cache holds per CR, measured on the objects of one of the benchmark's
// AppServices (testdata/, read back from the local cluster at 10,000 CRs): the CR trimmed
// to less than a third of itself, its Deployment to less than half. A trim that kept what
// it drops, or stopped sharing the conditions, fails here.
func TestCachedSizes(t *testing.T) {
	crJSON, err := os.ReadFile("testdata/appservice.json")
	if err != nil {
		t.Fatal(err)
	}
	deployJSON, err := os.ReadFile("testdata/deployment.json")
	if err != nil {
		t.Fatal(err)
	}
	cr := func() any {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(crJSON); err != nil {
			t.Fatal(err)
		}
		return u
	}
	deploy := func() any {
		d := &appsv1.Deployment{}
		if err := json.Unmarshal(deployJSON, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	trim := func(mk func() any, tr func(any) (any, error)) func() any {
		return func() any { o, _ := tr(mk()); return o }
	}
	crWhole, crTrimmed := heapPer(cr), heapPer(trim(cr, TrimCustomResource))
	dWhole, dTrimmed := heapPer(deploy), heapPer(trim(deploy, TrimWorkload))
	t.Logf("AppService %d -> %d bytes, Deployment %d -> %d bytes", crWhole, crTrimmed, dWhole, dTrimmed)
	if crTrimmed*3 > crWhole {
		t.Errorf("a trimmed AppService holds %d bytes, more than a third of its %d", crTrimmed, crWhole)
	}
	if dTrimmed*2 > dWhole {
		t.Errorf("a trimmed Deployment holds %d bytes, more than half of its %d", dTrimmed, dWhole)
	}
}
