package enqueue

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []string
}

func (q *recordingQueue) Add(r reconcile.Request) { q.added = append(q.added, "now "+r.Name) }
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.added = append(q.added, d.String()+" "+r.Name)
}

// Every event's requests are added after the delay, the old object's before the new one's.
func TestAfter(t *testing.T) {
	var ops []Op
	h := After(time.Second, func(obj client.Object, op Op) []reconcile.Request {
		ops = append(ops, op)
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	})
	obj := func(name string) client.Object { return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	q := &recordingQueue{}
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: obj("a")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: obj("b"), ObjectNew: obj("c")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: obj("d")}, q)
	h.Generic(ctx, event.GenericEvent{Object: obj("e")}, q)

	want := []string{"1s a", "1s b", "1s c", "1s d", "1s e"}
	if len(q.added) != len(want) {
		t.Fatalf("added %v, want %v", q.added, want)
	}
	for i := range want {
		if q.added[i] != want[i] {
			t.Fatalf("added %v, want %v", q.added, want)
		}
	}
	wantOps := []Op{Create, UpdateOld, UpdateNew, Delete, Generic}
	for i := range wantOps {
		if ops[i] != wantOps[i] {
			t.Fatalf("ops %v, want %v", ops, wantOps)
		}
	}
}
