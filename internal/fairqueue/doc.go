// Package fairqueue is a controller's work queue that serves namespaces in turn.
//
// One operator serves every tenant, and each kind has one queue. In a first-in first-out
// queue a tenant who asks for a thousand reconciles (a forced reconcile of each of their CRs,
// an edit of them all at once) puts another tenant's one edit behind all of them: at a few
// reconciles a second, minutes. Here each namespace has its own line and the namespaces with
// requests take turns, one request each, as the API server's priority and fairness serves
// its flows: the other tenant's edit waits for at most one request of each busy namespace.
// Within a namespace a CR is queued once (client-go's queue merges repeated requests), and
// the requests go first in, first out.
//
// Taking turns orders what is queued, not what the workers already have: a queue made with
// ForWorkers keeps one of the controller's workers for the other namespaces, so that a
// tenant who queues a thousand requests at once has all workers but one, and another
// tenant's request starts as soon as it is queued.
//
// Requests carry controller-runtime's priorities: the events of a cache's initial list after
// a restart, and the requests a chart rollout sends, come at handler.LowPriority and wait
// while requests of a higher priority are queued, so that after a restart over thousands of
// CRs people's edits are served first. A request raised (added again at a higher priority)
// moves up.
//
// The queue is client-go's rate-limiting queue over that order, so that the controller's
// metrics (workqueue_depth and the rest, by controller name) and its back-off are those of
// any controller-runtime controller.
package fairqueue
