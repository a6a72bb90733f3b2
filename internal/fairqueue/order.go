package fairqueue

import (
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// order keeps the queued requests in the order Queue hands them out: the highest priority
// first; at one priority, the namespaces in turn; within a namespace, first in, first out.
// It is the storage of client-go's queue (workqueue.Queue), which calls Push, Touch, Pop and
// Len under its own lock, and only for requests that are queued and not being processed.
//
// With a limit, a namespace that has limit requests handed out waits: its queued requests are
// not counted in Len and Pop skips them, until Queue.Done gives one back (done). client-go's
// queue hands out a request only when Len is not 0, so the workers beyond the limit wait for
// other namespaces. No worker sleeps while a waiting namespace comes free: the worker that
// gave its request back asks for the next one, and gets it.
type order struct {
	mu sync.Mutex
	// limit is the most requests of one namespace handed out at once; 0 for no limit.
	limit int
	// out counts each namespace's requests handed out and not given back.
	out map[string]int
	// wanted is the highest priority each request was added with since it was last
	// queued: read when client-go's queue pushes or touches it. A request added without a
	// priority wants 0.
	wanted map[reconcile.Request]int
	// at is the priority each queued request is queued at, levels the queued requests by
	// priority.
	at     map[reconcile.Request]int
	levels map[int]*level
	// popped is the priority each request handed out was queued at, until Queue reads it.
	popped map[reconcile.Request]int
}

func newOrder(limit int) *order {
	return &order{limit: limit, out: map[string]int{},
		wanted: map[reconcile.Request]int{}, at: map[reconcile.Request]int{},
		levels: map[int]*level{}, popped: map[reconcile.Request]int{}}
}

// want records that r was added at priority p.
func (o *order) want(r reconcile.Request, p int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if old, ok := o.wanted[r]; !ok || p > old {
		o.wanted[r] = p
	}
}

// takeWanted is the priority r was added with, and forgets it; 0 if none was recorded.
func (o *order) takeWanted(r reconcile.Request) (int, bool) {
	p, ok := o.wanted[r]
	delete(o.wanted, r)
	return p, ok
}

// Push queues r at the priority it was added with.
func (o *order) Push(r reconcile.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, _ := o.takeWanted(r)
	o.push(r, p)
}

func (o *order) push(r reconcile.Request, p int) {
	l := o.levels[p]
	if l == nil {
		l = &level{lines: map[string][]reconcile.Request{}}
		o.levels[p] = l
	}
	l.push(r)
	o.at[r] = p
}

// Touch is called for a queued request added again: it moves up if it was added at a higher
// priority than it is queued at, and keeps its place otherwise.
func (o *order) Touch(r reconcile.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	p, ok := o.takeWanted(r)
	if cur, queued := o.at[r]; ok && queued && p > cur {
		o.remove(r, cur)
		o.push(r, p)
	}
}

func (o *order) remove(r reconcile.Request, p int) {
	l := o.levels[p]
	l.remove(r)
	if l.empty() {
		delete(o.levels, p)
	}
	delete(o.at, r)
}

// Pop hands out the next request (see order) of a namespace under its limit. client-go's
// queue calls it only when Len is not 0, so there is one.
func (o *order) Pop() reconcile.Request {
	o.mu.Lock()
	defer o.mu.Unlock()
	top, first := 0, true
	for p, l := range o.levels {
		if (first || p > top) && l.has(o.open) {
			top, first = p, false
		}
	}
	r := o.levels[top].pop(o.open)
	if o.levels[top].empty() {
		delete(o.levels, top)
	}
	delete(o.at, r)
	o.out[r.Namespace]++
	o.popped[r] = top
	return r
}

// open says whether a request of namespace ns may be handed out.
func (o *order) open(ns string) bool { return o.limit == 0 || o.out[ns] < o.limit }

// Len is the number of queued requests that may be handed out: those of the namespaces under
// their limit.
func (o *order) Len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(o.at)
	for ns := range o.out { // the namespaces at their limit are among those with requests out
		if !o.open(ns) {
			for _, l := range o.levels {
				n -= len(l.lines[ns])
			}
		}
	}
	return n
}

// queuedLen is the number of queued requests, of every namespace.
func (o *order) queuedLen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.at)
}

// done records that r, handed out, is given back.
func (o *order) done(r reconcile.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.out[r.Namespace]--; o.out[r.Namespace] <= 0 {
		delete(o.out, r.Namespace)
	}
}

// takePopped is the priority r was queued at when it was handed out.
func (o *order) takePopped(r reconcile.Request) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	p := o.popped[r]
	delete(o.popped, r)
	return p
}

// level holds the requests of one priority: a line per namespace, and the namespaces with
// requests in the order they take their turns.
type level struct {
	lines map[string][]reconcile.Request
	turns []string
}

func (l *level) push(r reconcile.Request) {
	if len(l.lines[r.Namespace]) == 0 {
		l.turns = append(l.turns, r.Namespace)
	}
	l.lines[r.Namespace] = append(l.lines[r.Namespace], r)
}

// has says whether a namespace open for requests has one queued here.
func (l *level) has(open func(ns string) bool) bool {
	return slices.ContainsFunc(l.turns, open)
}

// pop takes the first request of the first open namespace in the turns; that namespace, if it
// has more, goes to the end of the turns, and the namespaces it passed keep their places.
func (l *level) pop(open func(ns string) bool) reconcile.Request {
	i := slices.IndexFunc(l.turns, open)
	ns := l.turns[i]
	l.turns = slices.Delete(l.turns, i, i+1)
	line := l.lines[ns]
	r := line[0]
	if len(line) == 1 {
		delete(l.lines, ns)
	} else {
		l.lines[ns] = line[1:]
		l.turns = append(l.turns, ns)
	}
	return r
}

func (l *level) remove(r reconcile.Request) {
	line := slices.DeleteFunc(l.lines[r.Namespace], func(q reconcile.Request) bool { return q == r })
	if len(line) > 0 {
		l.lines[r.Namespace] = line
		return
	}
	delete(l.lines, r.Namespace)
	l.turns = slices.DeleteFunc(l.turns, func(ns string) bool { return ns == r.Namespace })
}

func (l *level) empty() bool { return len(l.turns) == 0 }
