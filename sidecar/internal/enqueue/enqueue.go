// Package enqueue holds the event handler both status controllers of the sidecar
// (sidecar/internal/workloadstatus and sidecar/internal/poolstatus) put between their watches and their
// queue: it adds the requests of each event after a delay rather than at once.
//
// client-go's delaying queue keeps one waiting entry per request, at the earliest time
// asked, so every event for one request that arrives within the delay joins the same
// reconcile: a burst of events (a rollout's pod changes, a wave of claims) becomes one
// status write instead of one per event.
package enqueue

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Op says which event, and which of its objects, a MapFunc is given.
type Op int

const (
	Create Op = iota
	// UpdateOld is the object before an update, UpdateNew the object after it: an object
	// that moved (a workload to another CR) wakes what it left and what it joined.
	UpdateOld
	UpdateNew
	Delete
	Generic
)

// MapFunc gives the requests that obj wakes.
type MapFunc func(obj client.Object, op Op) []reconcile.Request

// After returns an event handler that adds the requests mapFn gives for each event's
// object to the queue after delay; on update mapFn is called with the old object, then
// with the new one.
func After(delay time.Duration, mapFn MapFunc) handler.EventHandler {
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object, op Op) {
		if obj == nil {
			return
		}
		for _, req := range mapFn(obj, op) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object, Create)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.ObjectOld, UpdateOld)
			add(q, e.ObjectNew, UpdateNew)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object, Delete)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q, e.Object, Generic)
		},
	}
}
