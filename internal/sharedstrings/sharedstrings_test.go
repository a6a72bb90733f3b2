package sharedstrings

import (
	"os"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/heaptest"
)

// appService decodes the i-th of a fleet of the benchmark's AppServices (one read back from
// the local cluster at 10,000 CRs), each with its own name, UID, resource version and times,
// as a cache would hold them (heaptest.FleetMember).
func appService(t testing.TB, i int) *unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile("../../sidecar/internal/workloadstatus/testdata/appservice.json")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(heaptest.FleetMember(b, i)); err != nil {
		t.Fatal(err)
	}
	return u
}

// Interning changes no value: the object reads the same as one decoded the usual way.
func TestValueKeepsTheObject(t *testing.T) {
	got, want := appService(t, 7), appService(t, 7)
	got.Object = Value(got.Object).(map[string]any)
	if !reflect.DeepEqual(got.Object, want.Object) {
		t.Errorf("interned object differs:\n%v\nwant\n%v", got.Object, want.Object)
	}
}

// Two objects' equal keys and values share their bytes after interning, and what is each
// object's own stays its own.
func TestValueSharesEqualStrings(t *testing.T) {
	a, b := appService(t, 1), appService(t, 2)
	a.Object = Value(a.Object).(map[string]any)
	b.Object = Value(b.Object).(map[string]any)
	cond := func(u *unstructured.Unstructured) map[string]any {
		c, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return c[0].(map[string]any)
	}
	key := func(m map[string]any, name string) string {
		for k := range m {
			if k == name {
				return k
			}
		}
		t.Fatalf("no key %q", name)
		return ""
	}
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	if !same(key(cond(a), "lastTransitionTime"), key(cond(b), "lastTransitionTime")) {
		t.Error("the key lastTransitionTime is not shared")
	}
	if !same(cond(a)["reason"].(string), cond(b)["reason"].(string)) {
		t.Error("the reason InstallSuccessful is not shared")
	}
	if a.GetName() == b.GetName() || a.GetUID() == b.GetUID() {
		t.Error("each object's own name and UID must stay its own")
	}

	la := &metav1.ObjectMeta{Labels: map[string]string{"owner": "helm", "name": "app-1"}}
	lb := &metav1.ObjectMeta{Labels: map[string]string{"owner": "helm", "name": "app-2"}}
	Meta(la)
	Meta(lb)
	if !same(la.Labels["owner"], lb.Labels["owner"]) || la.Labels["name"] == lb.Labels["name"] {
		t.Errorf("labels after interning: %v, %v", la.Labels, lb.Labels)
	}
}

// What a cached AppService holds, measured on 2000 distinct ones: interning takes an eighth
// or more off it (9360 -> 7643 bytes when written). Interning that stopped reaching the keys
// or the values fails here.
func TestValueShrinksAFleet(t *testing.T) {
	heapPer := func(mk func(i int) any) int64 { return heaptest.PerObject(2000, mk) }
	whole := heapPer(func(i int) any { return appService(t, i) })
	interned := heapPer(func(i int) any {
		u := appService(t, i)
		u.Object = Value(u.Object).(map[string]any)
		return u
	})
	t.Logf("a cached AppService: %d bytes, %d interned", whole, interned)
	if interned*8 > whole*7 {
		t.Errorf("interned, an AppService holds %d bytes, more than seven eighths of its %d", interned, whole)
	}
}

// What interning costs a cache per event, against decoding the same CR (which the informer
// does for every event anyway).
func BenchmarkValue(b *testing.B) {
	u := appService(b, 1)
	raw, err := u.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			v := &unstructured.Unstructured{}
			if err := v.UnmarshalJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("intern", func(b *testing.B) {
		// As in a cache, the interned strings stay in use: a string no object holds any
		// more leaves the table at the next collection and costs its insertion again.
		held := Value(u.Object)
		for b.Loop() {
			Value(u.Object)
		}
		runtime.KeepAlive(held)
	})
}
