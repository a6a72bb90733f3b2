package poolstatus

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/queuetest"
)

// A pool's events keep its class in the books (the new version's on update, none once
// deleted) and enqueue the pool once per event, after the coalescing delay.
func TestPoolEventsIndexTheClassAndEnqueueAfterTheDelay(t *testing.T) {
	r := &PoolReconciler{Books: NewBooks(), CoalesceDelay: 150 * time.Millisecond}
	h := r.poolEvents()
	pool := func(class string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"storageClassName": class}}}
		u.SetNamespace("ns")
		u.SetName("p")
		return u
	}
	key := types.NamespacedName{Namespace: "ns", Name: "p"}
	q := &queuetest.Queue{}
	ctx := context.Background()
	classes := func() string { return strings.Join(r.Books.classes[key], ",") }

	h.Create(ctx, event.CreateEvent{Object: pool("a")}, q)
	if classes() != "a" {
		t.Fatalf("after create: class %q", classes())
	}
	h.Update(ctx, event.UpdateEvent{ObjectOld: pool("a"), ObjectNew: pool("b")}, q)
	if classes() != "b" || len(r.Books.poolsOf("a")) != 0 {
		t.Fatalf("after update: class %q, pools of a %v", classes(), r.Books.poolsOf("a"))
	}
	h.Delete(ctx, event.DeleteEvent{Object: pool("b")}, q)
	if _, ok := r.Books.classes[key]; ok {
		t.Fatal("a deleted pool is still in the books")
	}
	// The pool once per event, after the coalescing delay.
	enqueued := queuetest.Action{Request: reconcile.Request{NamespacedName: key}, After: 150 * time.Millisecond}
	if diff := q.Diff(enqueued, enqueued, enqueued); diff != "" {
		t.Fatal(diff)
	}
}
