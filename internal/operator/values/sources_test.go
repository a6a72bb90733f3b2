package values

import (
	"context"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
	"transwarp.io/tos/warpdrive-operator/internal/operator/informers"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// capturedIndex is a FieldIndexer that keeps the index function it is given.
type capturedIndex struct{ fn client.IndexerFunc }

func (c *capturedIndex) IndexField(_ context.Context, _ client.Object, _ string, fn client.IndexerFunc) error {
	c.fn = fn
	return nil
}

// A tenant who rewrites a source in a loop wakes the CRs that name it at most once every
// informers.ForcedInterval each, and the last wake comes after the last version: the first
// change is queued at once, the others are one, at the end of the interval.
func TestSourceChangesRateLimitedPerCR(t *testing.T) {
	defer func(d time.Duration) { informers.ForcedInterval = d }(informers.ForcedInterval)
	informers.ForcedInterval = 200 * time.Millisecond
	gvk := actiontest.Memcached(nil).GroupVersionKind()
	v := &Sources{GVK: gvk, Wakes: &informers.PerCRInterval{}}
	index := &capturedIndex{}
	if err := v.Setup(context.Background(), index); err != nil {
		t.Fatal(err)
	}
	var crs []client.Object
	for _, name := range []string{"a", "b"} {
		cr := actiontest.Memcached(nil)
		cr.SetName(name)
		cr.Object["spec"] = map[string]any{valuesfrom.Field: []any{map[string]any{"kind": "ConfigMap", "name": "conf"}}}
		crs = append(crs, cr)
	}
	list := &unstructured.Unstructured{}
	list.SetGroupVersionKind(gvk)
	v.CRs = fake.NewClientBuilder().WithObjects(crs...).WithIndex(list, sourcesIndex, index.fn).Build()

	h := v.wake(valuesfrom.KindConfigMap)
	q := fairqueue.New("sources", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	version := func(n int) *metav1.PartialObjectMetadata {
		cm := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "conf",
			ResourceVersion: strconv.Itoa(n)}}
		cm.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		return cm
	}
	var current atomic.Int64 // the source's version a reconcile would read
	change := func(n int) {
		current.Store(int64(n))
		h.Update(context.Background(), event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{
			ObjectOld: version(n - 1), ObjectNew: version(n)}, q)
	}

	start := time.Now()
	change(1)
	if q.Len() != 2 {
		t.Fatalf("%d CRs queued at the first change, want both at once", q.Len())
	}
	var mu sync.Mutex
	seen := map[string][]int64{} // the version each wake of a CR read
	go func() {
		for {
			req, shutdown := q.Get()
			if shutdown {
				return
			}
			mu.Lock()
			seen[req.Name] = append(seen[req.Name], current.Load())
			mu.Unlock()
			q.Done(req)
		}
	}()
	const versions = 40
	for n := 2; n <= versions; n++ {
		time.Sleep(10 * time.Millisecond)
		change(n)
	}
	elapsed := time.Since(start)
	time.Sleep(3 * informers.ForcedInterval)

	mu.Lock()
	defer mu.Unlock()
	most := int(elapsed/informers.ForcedInterval) + 2 // one at the start, one per interval, one after the last
	for _, name := range []string{"a", "b"} {
		wakes := seen[name]
		t.Logf("CR %s: %d versions in %v woke it %d times, reading versions %v", name, versions, elapsed, len(wakes), wakes)
		if len(wakes) == 0 || len(wakes) > most {
			t.Errorf("CR %s woken %d times by %d versions in %v, want 1 to %d: %v", name, len(wakes), versions, elapsed, most, wakes)
			continue
		}
		if last := wakes[len(wakes)-1]; last != versions {
			t.Errorf("CR %s's last wake read version %d, want the last, %d: %v", name, last, versions, wakes)
		}
	}
}

// The sources' cache, on every replica, holds of each Secret and ConfigMap only what the
// operator reads of it: its name and version. A namespace editor's ConfigMaps, with 256 KiB of
// annotations each, would otherwise sit in the memory of both replicas whether a CR names them
// or not.
func TestSourcesCacheKeepsOnlyTheVersion(t *testing.T) {
	padded := strings.Repeat("p", 256<<10)
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "values", UID: "u", ResourceVersion: "7",
		Labels:          map[string]string{valuesfrom.ReadableLabel: "true", "padding": strings.Repeat("l", 63)},
		Annotations:     map[string]string{"padding": padded, corev1.LastAppliedConfigAnnotation: padded},
		OwnerReferences: []metav1.OwnerReference{{Name: "x"}}, Finalizers: []string{"f"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	want := metav1.ObjectMeta{Namespace: "ns", Name: "values", UID: "u", ResourceVersion: "7"}
	for _, obj := range []client.Object{
		&metav1.PartialObjectMetadata{ObjectMeta: *meta.DeepCopy()},
		&corev1.ConfigMap{ObjectMeta: *meta.DeepCopy(), Data: map[string]string{"values.yaml": padded}},
		&corev1.Secret{ObjectMeta: *meta.DeepCopy(), Data: map[string][]byte{"values.yaml": []byte(padded)}},
	} {
		got, err := keepSourceVersion(obj)
		if err != nil {
			t.Fatal(err)
		}
		m := got.(client.Object)
		kept := metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID(),
			ResourceVersion: m.GetResourceVersion(), Labels: m.GetLabels(), Annotations: m.GetAnnotations(),
			OwnerReferences: m.GetOwnerReferences(), Finalizers: m.GetFinalizers(), ManagedFields: m.GetManagedFields()}
		if !reflect.DeepEqual(kept, want) {
			t.Errorf("%T: kept %d labels, %d annotations, %d owners, %d finalizers; want the name and version only",
				obj, len(kept.Labels), len(kept.Annotations), len(kept.OwnerReferences), len(kept.Finalizers))
		}
		switch o := got.(type) {
		case *corev1.ConfigMap:
			if o.Data != nil {
				t.Error("a ConfigMap's data was kept")
			}
		case *corev1.Secret:
			if o.Data != nil {
				t.Error("a Secret's data was kept")
			}
		}
	}
}
