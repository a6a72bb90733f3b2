package fairqueue

import (
	"fmt"
	"strings"
	"sync"
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

// queueFor is ForWorkers' queue for a controller of that many workers.
func queueFor(t *testing.T, workers int) *Queue {
	t.Helper()
	q := ForWorkers(workers)("", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*Queue)
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

// A queue for three workers keeps one for the other namespaces: a namespace with two
// requests handed out waits, its queued requests still counted in Len, and the next worker
// takes another namespace's request, even at low priority; given one back, the namespace goes
// on where it was.
func TestKeepsAWorkerForOtherNamespaces(t *testing.T) {
	q := queueFor(t, 3)
	for i := range 4 {
		q.Add(req("a", fmt.Sprintf("a%d", i)))
	}
	a0, _ := q.Get()
	a1, _ := q.Get()
	if a0.String() != "a/a0" || a1.String() != "a/a1" {
		t.Fatalf("handed out %v and %v", a0, a1)
	}
	if q.Len() != 2 {
		t.Errorf("Len %d with two requests queued", q.Len())
	}
	// The third worker waits, for a request of another namespace.
	third := make(chan string)
	go func() {
		r, _, _ := q.GetWithPriority()
		third <- r.String()
	}()
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req("b", "b0"))
	if got := <-third; got != "b/b0" {
		t.Errorf("the kept worker took %s", got)
	}
	q.Done(a0)
	if got := next(t, q); got != "a/a2" {
		t.Errorf("after a request given back, handed out %s", got)
	}
}

// With one worker there is no worker to keep: the namespace has it.
func TestOneWorkerIsNotKept(t *testing.T) {
	q := queueFor(t, 1)
	q.Add(req("a", "a0"))
	q.Add(req("a", "a1"))
	q.Get()
	if r, _ := q.Get(); r.String() != "a/a1" {
		t.Errorf("handed out %v", r)
	}
}

// Workers that take, work and give back requests as a controller's do, while requests of
// three namespaces come in: no namespace has more than workers-1 handed out at once, and
// every request is served, so no worker sleeps while a request it may take waits.
func TestWorkersServeAllWithinTheLimit(t *testing.T) {
	const workers, perNamespace = 4, 300
	q := queueFor(t, workers)
	var mu sync.Mutex
	out, most := map[string]int{}, 0
	served := make(chan string, 3*perNamespace)
	for range workers {
		go func() {
			for {
				r, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				mu.Lock()
				out[r.Namespace]++
				most = max(most, out[r.Namespace])
				mu.Unlock()
				time.Sleep(100 * time.Microsecond) // the reconcile
				mu.Lock()
				out[r.Namespace]--
				mu.Unlock()
				q.Done(r)
				served <- r.String()
			}
		}()
	}
	for i := range perNamespace {
		for _, ns := range []string{"a", "b", "c"} {
			if ns == "a" || i%10 == 0 { // b and c come now and then, a all the time
				q.Add(req(ns, fmt.Sprint(i)))
			}
		}
	}
	want := perNamespace + 2*perNamespace/10
	seen := map[string]bool{}
	for len(seen) < want {
		select {
		case r := <-served:
			seen[r] = true
		case <-time.After(30 * time.Second): // not a figure: only a wedged queue takes this long
			t.Fatalf("%d of %d requests served; %d queued", len(seen), want, q.Len())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most > workers-1 {
		t.Errorf("a namespace had %d requests handed out at once", most)
	}
}
