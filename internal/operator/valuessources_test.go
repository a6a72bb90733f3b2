package operator

import (
	"context"
	"strconv"
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
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// capturedIndex is a FieldIndexer that keeps the index function it is given.
type capturedIndex struct{ fn client.IndexerFunc }

func (c *capturedIndex) IndexField(_ context.Context, _ client.Object, _ string, fn client.IndexerFunc) error {
	c.fn = fn
	return nil
}

// A tenant who rewrites a source in a loop wakes the CRs that name it at most once every
// forcedInterval each, and the last wake comes after the last version: the first change is
// queued at once, the others are one, at the end of the interval.
func TestSourceChangesRateLimitedPerCR(t *testing.T) {
	defer func(d time.Duration) { forcedInterval = d }(forcedInterval)
	forcedInterval = 200 * time.Millisecond
	gvk := memcached(nil).GroupVersionKind()
	v := &valuesSources{gvk: gvk, wakes: &perCRInterval{}}
	index := &capturedIndex{}
	if err := v.setup(context.Background(), index); err != nil {
		t.Fatal(err)
	}
	var crs []client.Object
	for _, name := range []string{"a", "b"} {
		cr := memcached(nil)
		cr.SetName(name)
		cr.Object["spec"] = map[string]any{valuesfrom.Field: []any{map[string]any{"kind": "ConfigMap", "name": "conf"}}}
		crs = append(crs, cr)
	}
	list := &unstructured.Unstructured{}
	list.SetGroupVersionKind(gvk)
	v.crs = fake.NewClientBuilder().WithObjects(crs...).WithIndex(list, sourcesIndex, index.fn).Build()

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
	time.Sleep(3 * forcedInterval)

	mu.Lock()
	defer mu.Unlock()
	most := int(elapsed/forcedInterval) + 2 // one at the start, one per interval, one after the last
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
