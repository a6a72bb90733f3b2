package fairqueue

import (
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue is a controller's work queue that serves namespaces in turn (see the package doc).
// It is a controller-runtime priority queue, so that handlers can add at a priority and the
// controller requeues a request at the priority it was handed out with.
type Queue struct {
	// client-go's queue over order: it merges repeated requests, keeps a request out while
	// it is processed, delays, and keeps the metrics.
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	order   *order
	limiter workqueue.TypedRateLimiter[reconcile.Request]
}

var _ priorityqueue.PriorityQueue[reconcile.Request] = (*Queue)(nil)

// New is a Queue for the controller name, whose back-off is limiter's: the signature of a
// controller's NewQueue option.
func New(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return newWithLimit(name, limiter, 0)
}

// ForWorkers is New for a controller of that many workers, which keeps one of them for the
// other namespaces: a namespace has at most workers-1 requests handed out at once.
//
// Why: taking turns orders the queued requests, but a worker busy with a request is not free
// until it is done. When a tenant edits a thousand CRs at once, every worker takes one of
// them, and another tenant's edit, first in line, waits for the first of those to finish:
// seconds on a loaded machine, where each reconcile takes longer the more run beside it
// (docs/bench/memory.md, "An edit wave with four helm workers instead of eight
// (nineteenth)"). With one worker kept, it starts at once, and the busy tenant loses one
// worker of its share. With one worker there is nothing to keep.
func ForWorkers(workers int) func(string, workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	limit := max(workers-1, 0) // 0: no limit
	return func(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return newWithLimit(name, limiter, limit)
	}
}

func newWithLimit(name string, limiter workqueue.TypedRateLimiter[reconcile.Request], limit int) *Queue {
	o := newOrder(limit)
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name, Queue: o})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{
		Name: name, Queue: base})
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
		Name: name, DelayingQueue: delaying})
	return &Queue{TypedRateLimitingInterface: q, order: o, limiter: limiter}
}

// AddWithOpts adds items at o.Priority (0 if unset), after o.After, or after the back-off if
// o.RateLimited (the sooner of the two if both are set), as controller-runtime's priority
// queue does. The priority is recorded when the request is added and taken by its next
// queueing: a delayed add raises an add that queues the request sooner, and if that one
// takes it, the delayed add queues the request at 0 when its delay ends (controller-runtime's
// queue keeps one entry with the higher priority; here a low delayed add may come back
// normal, never a normal one low).
func (q *Queue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	p := 0
	if o.Priority != nil {
		p = *o.Priority
	}
	for _, r := range items {
		after := o.After
		if o.RateLimited {
			if backoff := q.limiter.When(r); after == 0 || backoff < after {
				after = backoff
			}
		}
		q.order.want(r, p)
		if after > 0 {
			q.TypedRateLimitingInterface.AddAfter(r, after)
		} else {
			q.TypedRateLimitingInterface.Add(r)
		}
	}
}

// Add adds r at priority 0, which raises it if it is queued lower.
func (q *Queue) Add(r reconcile.Request) { q.AddWithOpts(priorityqueue.AddOpts{}, r) }

// AddAfter adds r at priority 0 after d.
func (q *Queue) AddAfter(r reconcile.Request, d time.Duration) {
	q.AddWithOpts(priorityqueue.AddOpts{After: d}, r)
}

// AddRateLimited adds r at priority 0 after its back-off.
func (q *Queue) AddRateLimited(r reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{RateLimited: true}, r)
}

// Done gives back r, handed out: its namespace may have another request handed out.
func (q *Queue) Done(r reconcile.Request) {
	q.order.done(r)
	q.TypedRateLimitingInterface.Done(r)
}

// Len is the number of queued requests, with those of the namespaces at their limit.
func (q *Queue) Len() int { return q.order.queuedLen() }

// GetWithPriority hands out the next request and the priority it was queued at.
func (q *Queue) GetWithPriority() (reconcile.Request, int, bool) {
	r, shutdown := q.Get()
	return r, q.order.takePopped(r), shutdown
}
