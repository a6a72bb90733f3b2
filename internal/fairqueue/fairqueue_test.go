package fairqueue

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func req(ns, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func newQueue(t *testing.T, name string) *Queue {
	t.Helper()
	q := New(name, workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*Queue)
	t.Cleanup(q.ShutDown)
	return q
}

// next hands out the next request and marks it done, as a worker that finishes at once.
func next(t *testing.T, q *Queue) string {
	t.Helper()
	r, _, shutdown := q.GetWithPriority()
	if shutdown {
		t.Fatal("queue shut down")
	}
	q.Done(r)
	return r.String()
}

func drain(t *testing.T, q *Queue) []string {
	t.Helper()
	var got []string
	for q.Len() > 0 {
		got = append(got, next(t, q))
	}
	return got
}

// A tenant's hundred requests do not keep another's one waiting: the namespaces take turns,
// and within a namespace the requests go first in, first out.
func TestServesNamespacesInTurn(t *testing.T) {
	q := newQueue(t, "")
	for i := range 100 {
		q.Add(req("a", fmt.Sprintf("a%d", i)))
	}
	q.Add(req("b", "b0"))
	q.Add(req("b", "b1"))
	q.Add(req("c", "c0"))
	got := drain(t, q)
	want := []string{"a/a0", "b/b0", "c/c0", "a/a1", "b/b1", "a/a2", "a/a3"}
	if strings.Join(got[:len(want)], " ") != strings.Join(want, " ") {
		t.Errorf("served %v, want %v first", got[:len(want)], want)
	}
	if len(got) != 103 {
		t.Errorf("served %d requests, want 103", len(got))
	}
	for i, r := range got[7:] {
		if r != fmt.Sprintf("a/a%d", i+4) {
			t.Fatalf("request %d: %s, want a/a%d (a namespace's requests first in, first out)", i+7, r, i+4)
		}
	}
}

// A namespace that comes back after its line ran out takes its turn after those waiting.
func TestReturningNamespaceWaitsItsTurn(t *testing.T) {
	q := newQueue(t, "")
	q.Add(req("a", "a0"))
	q.Add(req("b", "b0"))
	q.Add(req("b", "b1"))
	if got := next(t, q); got != "a/a0" {
		t.Fatalf("first %s", got)
	}
	q.Add(req("a", "a1"))
	if got := strings.Join(drain(t, q), " "); got != "b/b0 a/a1 b/b1" {
		t.Errorf("served %s, want b/b0 a/a1 b/b1", got)
	}
}

// Requests of the initial list (low priority) wait while people's edits are queued; an edit
// of a CR queued low raises it; the priority a request was queued at is handed out with it.
func TestLowPriorityYields(t *testing.T) {
	q := newQueue(t, "")
	low := priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}
	for i := range 5 {
		q.AddWithOpts(low, req("a", fmt.Sprintf("a%d", i)))
	}
	q.Add(req("b", "edit"))
	q.Add(req("a", "a3")) // an edit of a CR of the initial list
	var got []string
	var prios []int
	for q.Len() > 0 {
		r, p, _ := q.GetWithPriority()
		q.Done(r)
		got, prios = append(got, r.String()), append(prios, p)
	}
	if s := strings.Join(got, " "); s != "b/edit a/a3 a/a0 a/a1 a/a2 a/a4" {
		t.Errorf("served %s, want the two edits first, then a0 a1 a2 a4", s)
	}
	if fmt.Sprint(prios) != fmt.Sprint([]int{0, 0, handler.LowPriority, handler.LowPriority, handler.LowPriority, handler.LowPriority}) {
		t.Errorf("priorities %v", prios)
	}
	// A low add of a request queued higher does not lower it.
	q.Add(req("c", "c0"))
	q.AddWithOpts(low, req("c", "c0"))
	q.AddWithOpts(low, req("d", "d0"))
	if _, p, _ := q.GetWithPriority(); p != 0 {
		t.Errorf("c0 lowered to %d", p)
	}
}

// A request is queued once however often it is added, and is not handed out again while it
// is being processed: added meanwhile, it comes back once it is done.
func TestOneRequestOnceAtATime(t *testing.T) {
	q := newQueue(t, "")
	r := req("a", "x")
	q.Add(r)
	q.Add(r)
	if q.Len() != 1 {
		t.Fatalf("Len %d after adding one request twice", q.Len())
	}
	got, _ := q.Get()
	q.Add(r)
	if q.Len() != 0 {
		t.Errorf("a request being processed is queued again (Len %d)", q.Len())
	}
	q.Done(got)
	if q.Len() != 1 {
		t.Errorf("a request added while processed is not queued after Done (Len %d)", q.Len())
	}
}

// Delayed and rate-limited adds wait, then are queued at the priority they were added with.
func TestDelayedAdds(t *testing.T) {
	q := newQueue(t, "")
	q.AddWithOpts(priorityqueue.AddOpts{After: 50 * time.Millisecond, Priority: ptr.To(handler.LowPriority)}, req("a", "late"))
	q.AddRateLimited(req("b", "retry"))
	if q.NumRequeues(req("b", "retry")) != 1 {
		t.Errorf("a rate-limited add is not counted by the back-off")
	}
	start := time.Now()
	var got []string
	var prios []int
	for range 2 {
		r, p, _ := q.GetWithPriority()
		q.Done(r)
		got, prios = append(got, r.String()), append(prios, p)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Errorf("a request added after 50ms was handed out after %v", time.Since(start))
	}
	if fmt.Sprint(got) != "[b/retry a/late]" || fmt.Sprint(prios) != fmt.Sprint([]int{0, handler.LowPriority}) {
		t.Errorf("served %v at %v", got, prios)
	}
	q.Forget(req("b", "retry"))
	if q.NumRequeues(req("b", "retry")) != 0 {
		t.Errorf("Forget does not reset the back-off")
	}
}

// The queue keeps controller-runtime's metrics under the controller's name.
func TestMetrics(t *testing.T) {
	q := newQueue(t, "fairqueue-test")
	q.Add(req("a", "x"))
	q.Add(req("b", "y"))
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == "fairqueue-test" && m.GetGauge().GetValue() == 2 {
					return
				}
			}
		}
	}
	t.Error("no workqueue_depth 2 for fairqueue-test")
}
