package enqueue

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/queuetest"
)

// Every event's requests are added after the delay, the old object's before the new one's.
func TestAfter(t *testing.T) {
	var ops []Op
	h := After(time.Second, func(obj client.Object, op Op) []reconcile.Request {
		ops = append(ops, op)
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
	})
	obj := func(name string) client.Object { return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	q := &queuetest.Queue{}
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: obj("a")}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: obj("b"), ObjectNew: obj("c")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: obj("d")}, q)
	h.Generic(ctx, event.GenericEvent{Object: obj("e")}, q)

	var want []queuetest.Action
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		want = append(want, queuetest.Action{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, After: time.Second})
	}
	if diff := q.Diff(want...); diff != "" {
		t.Fatal(diff)
	}
	wantOps := []Op{Create, UpdateOld, UpdateNew, Delete, Generic}
	for i := range wantOps {
		if ops[i] != wantOps[i] {
			t.Fatalf("ops %v, want %v", ops, wantOps)
		}
	}
}
