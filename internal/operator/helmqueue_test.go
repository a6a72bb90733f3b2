package operator

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	libhandler "github.com/operator-framework/operator-lib/handler"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
)

// The controller controller.New makes, which helm-operator-plugins hands to its setup funcs,
// takes the fair queue: it builds its queue with the fair queue's constructor when it starts,
// and the queue keeps one of its workers (here two) for the other namespaces.
func TestHelmControllerUsesTheFairQueue(t *testing.T) {
	c, err := controller.NewUnmanaged("fairqueue-check", controller.Options{
		Reconciler: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })})
	if err != nil {
		t.Fatal(err)
	}
	if err := useFairQueue(c, 2); err != nil {
		t.Fatal(err)
	}
	q := newQueueOf(t, c)
	defer q.ShutDown()
	if _, ok := q.(*fairqueue.Queue); !ok {
		t.Errorf("the controller's queue is a %T", q)
	}
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "a0"}})
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "a", Name: "a1"}})
	q.Get()
	q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "b", Name: "b0"}})
	if r, _ := q.Get(); r.Namespace != "b" {
		t.Errorf("the second worker took %s, not the other namespace's request", r)
	}
	if err := useFairQueue(&notAController{}, 2); err == nil {
		t.Error("no error for a controller without NewQueue")
	}
}

// notAController has the setup funcs' interface and no NewQueue.
type notAController struct{ NewQueues int }

func (*notAController) Watch(source.Source) error { return nil }

// newQueueOf builds the queue the controller c would build when it starts.
func newQueueOf(t *testing.T, c controller.Controller) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	t.Helper()
	newQueue, ok := reflect.ValueOf(c).Elem().FieldByName("NewQueue").Interface().(func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request])
	if !ok || newQueue == nil {
		t.Fatalf("the controller's NewQueue is not set")
	}
	return newQueue("fairqueue-check", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
}

// Requests the rollout sends are queued at low priority.
func TestRolloutWakesAtLowPriority(t *testing.T) {
	q := fairqueue.New("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*fairqueue.Queue)
	defer q.ShutDown()
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("ns")
	cr.SetName("m1")
	enqueueLow(context.Background(), event.GenericEvent{Object: cr}, q)
	r, p, _ := q.GetWithPriority()
	if r.String() != "ns/m1" || p != handler.LowPriority {
		t.Errorf("queued %s at %d, want ns/m1 at %d", r, p, handler.LowPriority)
	}
}

// The reconciler's watch of its CRs (operator-lib's instrumented handler, as
// helm-operator-plugins sets it up) queues the CRs of the cache's initial list at low
// priority in the fair queue: after a restart over many CRs, an edit made meanwhile is
// served first.
func TestInitialListYieldsToEdits(t *testing.T) {
	q := fairqueue.New("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*fairqueue.Queue)
	defer q.ShutDown()
	h := libhandler.InstrumentedEnqueueRequestForObject[client.Object]{}
	cr := func(ns, name string, rv string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("cache.example.com/v1alpha1")
		u.SetKind("Memcached")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetResourceVersion(rv)
		return u
	}
	ctx := context.Background()
	for i := range 50 {
		h.Create(ctx, event.CreateEvent{Object: cr("big", fmt.Sprintf("m%02d", i), "1"), IsInInitialList: true}, q)
	}
	h.Create(ctx, event.CreateEvent{Object: cr("small", "s0", "1"), IsInInitialList: true}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: cr("small", "s0", "1"), ObjectNew: cr("small", "s0", "2")}, q) // an edit
	h.Create(ctx, event.CreateEvent{Object: cr("big", "new", "3")}, q)                                        // a CR created meanwhile
	var got []string
	for range 4 {
		r, _, _ := q.GetWithPriority()
		q.Done(r)
		got = append(got, r.String())
	}
	if want := "small/s0 big/new big/m00 big/m01"; strings.Join(got, " ") != want {
		t.Errorf("served %v first, want %s", got, want)
	}
}
