package operator

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// queueActions records what a handler asks of the controller's queue.
type queueActions struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []reconcile.Request
	after []time.Duration
}

func (q *queueActions) Add(r reconcile.Request) { q.added = append(q.added, r) }
func (q *queueActions) AddAfter(r reconcile.Request, d time.Duration) {
	q.added = append(q.added, r)
	q.after = append(q.after, d)
}

// Every event of a CR asks for the kind's one plan, rolloutBatch later (never at once), so
// that a wave of events shares one plan instead of planning over every CR per event.
func TestRolloutEventsAskForOnePlanABatchLater(t *testing.T) {
	k := &kindRollout{gvk: memcachedGVK}
	h := k.planSoon()
	q := &queueActions{}
	cr := &unstructured.Unstructured{}
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: cr}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cr, ObjectNew: cr}, q)
	h.Delete(ctx, event.DeleteEvent{Object: cr}, q)
	h.Generic(ctx, event.GenericEvent{Object: cr}, q)

	want := reconcile.Request{NamespacedName: types.NamespacedName{Name: memcachedGVK.Kind}}
	if len(q.added) != 4 || len(q.after) != 4 {
		t.Fatalf("4 events asked the queue %d times (%d delayed), want 4 delayed", len(q.added), len(q.after))
	}
	for i := range q.added {
		if q.added[i] != want || q.after[i] != rolloutBatch {
			t.Errorf("event %d asked for %v after %v, want %v after %v", i, q.added[i], q.after[i], want, rolloutBatch)
		}
	}
}
