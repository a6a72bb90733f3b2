package values

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// emptyObjects is a spec whose list holds n empty objects: n+2 values, the shape that costs a
// Go heap most per byte of JSON.
func emptyObjects(n int) map[string]any {
	list := make([]any, n)
	for i := range list {
		list[i] = map[string]any{}
	}
	return map[string]any{"note": list}
}

func TestCountValues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		v     any
		limit int
		want  int
	}{
		{"a scalar", "x", 10, 1},
		{"nested", map[string]any{"a": []any{int64(1), map[string]any{"b": true}}, "c": nil}, 10, 6},
		{"one long string is one value", map[string]any{"s": strings.Repeat("x", 1<<20)}, 10, 2},
		{"stops past the limit", emptyObjects(100000), 10, 11},
	} {
		if got := countValues(tc.v, tc.limit); got != tc.want {
			t.Errorf("%s: %d values, want %d", tc.name, got, tc.want)
		}
	}
}

// The cache keeps a CR over the bound without its spec, marked; any other object as it is.
func TestBoundSpecDropsTheSpecOverTheBound(t *testing.T) {
	over := actiontest.Memcached(nil)
	over.Object["spec"] = emptyObjects(100)
	BoundSpec(over, 100)
	if spec, _ := over.Object["spec"].(map[string]any); len(spec) != 0 {
		t.Errorf("the spec over the bound is kept: %d keys", len(spec))
	}
	if over.GetAnnotations()[specOverBoundAnnotation] != "100" {
		t.Errorf("annotations %v, want %s: 100", over.GetAnnotations(), specOverBoundAnnotation)
	}

	at := actiontest.Memcached(nil)
	at.Object["spec"] = emptyObjects(98) // 100 values: the spec, the list and 98 objects
	BoundSpec(at, 100)
	if n := len(at.Object["spec"].(map[string]any)["note"].([]any)); n != 98 || at.GetAnnotations()[specOverBoundAnnotation] != "" {
		t.Errorf("a spec at the bound is changed: %d objects left, annotations %v", n, at.GetAnnotations())
	}

	// The mark is the manager's: written by the CR's author, it is dropped, and the CR is
	// not refused for it.
	forged := actiontest.Memcached(nil)
	forged.SetAnnotations(map[string]string{specOverBoundAnnotation: "100", "team": "a"})
	BoundSpec(forged, 100)
	if a := forged.GetAnnotations(); a[specOverBoundAnnotation] != "" || a["team"] != "a" {
		t.Errorf("annotations %v of a CR under the bound, want the forged mark dropped and the rest kept", a)
	}

	unbounded := actiontest.Memcached(nil)
	unbounded.Object["spec"] = emptyObjects(100)
	BoundSpec(unbounded, 0)
	if _, ok := unbounded.Object["spec"].(map[string]any)["note"]; !ok {
		t.Error("a bound of 0 dropped a spec")
	}
}

// The reconciler's first read of a CR over the bound fails, is counted as a failure and told
// in an Event, whether the cache or the API server shows it over the bound; the cache's mark
// costs no request. Other reads, and a CR being deleted, are as before.
func TestSpecBoundClientRefusesTheCROverTheBound(t *testing.T) {
	const limit = 100
	cr := func(name string, objects int) *unstructured.Unstructured {
		u := actiontest.Memcached(nil)
		u.SetName(name)
		u.SetUID(types.UID(name))
		u.SetGeneration(2)
		u.Object["spec"] = emptyObjects(objects)
		return u
	}
	deleting := cr("deleting", 500)
	deleting.SetFinalizers([]string{"uninstall-helm-release"}) // the reconciler's, which keeps it while it uninstalls
	deleting.SetDeletionTimestamp(&metav1.Time{Time: metav1.Now().Time})
	live := []client.Object{cr("small", 10), cr("large", 500), cr("grown", 500), deleting}

	// The cache as the transform leaves it: "grown" is still the small version it saw last.
	var inCache []client.Object
	for _, o := range live {
		c := o.DeepCopyObject().(*unstructured.Unstructured)
		if c.GetName() == "grown" {
			c.Object["spec"] = emptyObjects(1)
		}
		BoundSpec(c, limit)
		inCache = append(inCache, c)
	}
	liveGets := map[string]int{}
	apiServer := fake.NewClientBuilder().WithObjects(live...).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			liveGets[key.Name]++
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	cache := fake.NewClientBuilder().WithObjects(inCache...).Build()
	o := outcomes.New()
	rec := record.NewFakeRecorder(10)
	c := BoundClient{Client: apiServer, Cached: cache, Limit: limit, Outcomes: o, Recorder: rec}

	read := func(name string) (*unstructured.Unstructured, error) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(live[0].GetObjectKind().GroupVersionKind())
		return u, c.Get(context.Background(), client.ObjectKey{Namespace: live[0].GetNamespace(), Name: name}, u)
	}
	for _, tc := range []struct {
		name      string
		refused   bool
		liveGets  int
		wantNotes int // list length the reconciler gets
	}{
		{"small", false, 1, 10},
		{"large", true, 0, 0},
		{"grown", true, 1, 0},
		{"deleting", false, 1, 500},
	} {
		u, err := read(tc.name)
		if refused := err != nil; refused != tc.refused {
			t.Errorf("%s: refused %v (%v), want %v", tc.name, refused, err, tc.refused)
		}
		if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
			t.Errorf("%s: refused with %v, want a terminal error (not retried: only an edit mends it)", tc.name, err)
		}
		if liveGets[tc.name] != tc.liveGets {
			t.Errorf("%s: %d GETs from the API server, want %d", tc.name, liveGets[tc.name], tc.liveGets)
		}
		notes, _, _ := unstructured.NestedSlice(u.Object, "spec", "note")
		if len(notes) != tc.wantNotes {
			t.Errorf("%s: the reconciler got %d objects of the spec, want %d", tc.name, len(notes), tc.wantNotes)
		}
		e, _ := o.Get(client.ObjectKey{Namespace: live[0].GetNamespace(), Name: tc.name}, types.UID(tc.name))
		if failed := e.Failure.Reason == statuscontract.ReasonSpecTooLarge && e.Failure.Terminal && e.FailedGeneration == 2; failed != tc.refused {
			t.Errorf("%s: outcome %+v, want a failure %v", tc.name, e.Failure, tc.refused)
		}
	}
	if len(rec.Events) != 2 {
		t.Fatalf("%d Events, want 2 (large, grown)", len(rec.Events))
	}
	if ev := <-rec.Events; !strings.Contains(ev, "Warning SpecTooLarge") || !strings.Contains(ev, "--max-spec-values") {
		t.Errorf("Event %q, want a Warning SpecTooLarge that names the flag", ev)
	}

	// The reconciler's later reads into the CR it holds (its wait for the deletion) are as before.
	u, _ := read("small")
	u.Object["spec"] = emptyObjects(500)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Errorf("a read into a CR already held failed: %v", err)
	}
}

// The sources of spec.valuesFrom are bounded in bytes, not in values: the values merged from
// them and the spec are held to the same bound, and a CR over it fails its visit, reported.
func TestValuesFromOverTheBoundIsRefused(t *testing.T) {
	const limit = 100
	junk := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "junk"},
		Data: map[string]string{"values.yaml": "note: [" + strings.Repeat("{}, ", limit) + "{}]"}}
	small := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "small"},
		Data: map[string]string{"values.yaml": "note: [{}, {}]"}}
	reader := fake.NewClientBuilder().WithObjects(junk, small).Build()
	o := outcomes.New()
	rec := record.NewFakeRecorder(10)
	v := &Sources{Resolver: valuesfrom.Resolver{Reader: reader}, Outcomes: o, MaxValues: limit, Recorder: rec}
	for _, tc := range []struct {
		source  string
		refused bool
	}{{"small", false}, {"junk", true}} {
		cr := actiontest.Memcached(nil)
		cr.SetNamespace("ns")
		cr.SetUID(types.UID(tc.source))
		cr.Object["spec"] = map[string]any{valuesfrom.Field: []any{map[string]any{"kind": "ConfigMap", "name": tc.source}}}
		_, err := v.Translate(context.Background(), cr)
		if refused := err != nil; refused != tc.refused {
			t.Errorf("values from %s: refused %v (%v), want %v", tc.source, refused, err, tc.refused)
		}
		if err != nil && !errors.Is(err, reconcile.TerminalError(nil)) {
			t.Errorf("values from %s: refused with %v, want a terminal error", tc.source, err)
		}
		e, _ := o.Get(client.ObjectKeyFromObject(cr), cr.GetUID())
		if failed := e.Failure.Reason == statuscontract.ReasonSpecTooLarge && e.Failure.Terminal; failed != tc.refused {
			t.Errorf("values from %s: outcome %+v, want a failure %v", tc.source, e.Failure, tc.refused)
		}
	}
	if len(rec.Events) != 1 {
		t.Errorf("%d Events, want 1", len(rec.Events))
	}
}
