// Package queuetest records what an event handler asks of a controller's work queue, so that
// a handler's test can state the exact queue actions it expects (each request, and whether
// it was added at once or after a delay), without a controller or a clock.
package queuetest

import (
	"fmt"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Action is one request handed to the queue; After is its delay, 0 for Add.
type Action struct {
	Request reconcile.Request
	After   time.Duration
}

func (a Action) String() string {
	if a.After == 0 {
		return "now " + a.Request.String()
	}
	return a.After.String() + " " + a.Request.String()
}

// Queue records Add and AddAfter in order. The handlers under test call nothing else; any
// other method panics on the nil interface it embeds.
type Queue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	Actions []Action
}

func (q *Queue) Add(r reconcile.Request) { q.Actions = append(q.Actions, Action{Request: r}) }

func (q *Queue) AddAfter(r reconcile.Request, d time.Duration) {
	q.Actions = append(q.Actions, Action{Request: r, After: d})
}

// Diff says how the recorded actions differ from want, "" if they do not.
func (q *Queue) Diff(want ...Action) string {
	if fmt.Sprint(q.Actions) == fmt.Sprint(want) {
		return ""
	}
	return fmt.Sprintf("queue actions %v, want %v", q.Actions, want)
}
