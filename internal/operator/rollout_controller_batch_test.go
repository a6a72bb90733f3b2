package operator

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/queuetest"
)

// Every event of a CR asks for the kind's one plan, rolloutBatch later (never at once), so
// that a wave of events shares one plan instead of planning over every CR per event.
func TestRolloutEventsAskForOnePlanABatchLater(t *testing.T) {
	k := &kindRollout{gvk: actiontest.MemcachedGVK}
	h := k.planSoon()
	q := &queuetest.Queue{}
	cr := &unstructured.Unstructured{}
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: cr}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cr, ObjectNew: cr}, q)
	h.Delete(ctx, event.DeleteEvent{Object: cr}, q)
	h.Generic(ctx, event.GenericEvent{Object: cr}, q)

	plan := queuetest.Action{Request: reconcile.Request{NamespacedName: types.NamespacedName{Name: actiontest.MemcachedGVK.Kind}}, After: rolloutBatch}
	if diff := q.Diff(plan, plan, plan, plan); diff != "" {
		t.Fatal(diff)
	}
}
