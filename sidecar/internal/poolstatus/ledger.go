package poolstatus

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Claim is what the ledger needs of a PersistentVolumeClaim.
type Claim struct {
	UID       types.UID
	Namespace string
	// Class is spec.storageClassName; claims without one belong to no pool.
	Class string
	// Size is spec.resources.requests.storage: what the claim asks of the pool. A bound
	// claim's status.capacity is the size of its volume, which lags a resize (and may
	// exceed the request when a bigger volume was matched); the request is the promise
	// the pool made, so a resized claim counts at its new size at once.
	Size resource.Quantity
	// Phase is status.phase. Only Bound claims hold capacity; Pending ones are counted
	// apart, as asking for it; a Lost claim's volume is gone. An empty phase (not yet
	// defaulted) counts as Pending.
	Phase string
}

const (
	phasePending = "Pending"
	phaseBound   = "Bound"
)

func (c Claim) counts() bool {
	return c.Class != "" && (c.Phase == "" || c.Phase == phasePending || c.Phase == phaseBound)
}

// entry is a claim as it was last counted.
type entry struct {
	class     string
	namespace string
	size      resource.Quantity
	bound     bool
}

// classTotals are the running totals of the claims of one StorageClass.
type classTotals struct {
	// allocated is what the Bound claims hold; requested what the Pending claims ask for.
	// A pending claim holds nothing yet: counted as allocated, a claim that never binds
	// (anyone may ask for 1Pi) would make any pool read Full.
	allocated, requested resource.Quantity
	bound, pending       int
	// namespaces counts the claims of each namespace, bound and pending, so that the
	// status can say how many namespaces use the class, never which.
	namespaces map[string]*namespaceTotals
}

type namespaceTotals struct{ bound, pending int }

// Ledger keeps the books of every claim that counts against a StorageClass, keyed by
// claim UID, with running totals per class and per namespace within a class.
//
// Exactness rests on one invariant: the totals are always the sum of the entries. Apply
// and Remove keep it by taking out exactly what an entry added (its stored size, not the
// claim's new one) before adding the claim's current contribution, with resource.Quantity
// arithmetic, which is exact (int64 with a decimal scale, or inf.Dec when that overflows).
// Because an update sets a claim's entry to the claim's current state rather than adding
// a delta to it, applying the same state twice, or events out of a recount's order, can
// never double-count: the books converge to the claims the informer last delivered.
//
// It tracks every class, not only the pools' classes, so that a pool created for a class
// already in use is counted at once; an entry is a few dozen bytes. A Ledger is not safe
// for concurrent use (Books guards it).
type Ledger struct {
	entries map[types.UID]entry
	classes map[string]*classTotals
}

// NewLedger returns empty books.
func NewLedger() *Ledger {
	return &Ledger{entries: map[types.UID]entry{}, classes: map[string]*classTotals{}}
}

// Recount builds the books from scratch from a list of claims.
func Recount(claims []Claim) *Ledger {
	l := NewLedger()
	for _, c := range claims {
		l.Apply(c)
	}
	return l
}

// Apply records the current state of a claim in constant time, and returns the classes
// whose totals changed (none, one, or two when the claim moved between classes).
func (l *Ledger) Apply(c Claim) []string {
	old, had := l.entries[c.UID]
	if !c.counts() {
		if !had {
			return nil
		}
		return l.Remove(c.UID)
	}
	e := entry{class: c.Class, namespace: c.Namespace, size: c.Size.DeepCopy(), bound: c.Phase == phaseBound}
	if had {
		if old.class == e.class && old.namespace == e.namespace && old.bound == e.bound && old.size.Cmp(e.size) == 0 {
			return nil
		}
		l.unrecord(old)
	}
	l.entries[c.UID] = e
	l.record(e)
	if had && old.class != e.class {
		return []string{old.class, e.class}
	}
	return []string{e.class}
}

// Remove forgets a deleted claim, and returns the class whose totals changed, if any.
func (l *Ledger) Remove(uid types.UID) []string {
	old, had := l.entries[uid]
	if !had {
		return nil
	}
	delete(l.entries, uid)
	l.unrecord(old)
	return []string{old.class}
}

func (l *Ledger) record(e entry) {
	t := l.classes[e.class]
	if t == nil {
		t = &classTotals{namespaces: map[string]*namespaceTotals{}}
		l.classes[e.class] = t
	}
	n := t.namespaces[e.namespace]
	if n == nil {
		n = &namespaceTotals{}
		t.namespaces[e.namespace] = n
	}
	if e.bound {
		t.allocated.Add(e.size)
		t.bound++
		n.bound++
	} else {
		t.requested.Add(e.size)
		t.pending++
		n.pending++
	}
}

// unrecord takes out exactly what record(e) put in. Classes and namespaces left without
// claims are dropped, so that the books hold only what is in use.
func (l *Ledger) unrecord(e entry) {
	t := l.classes[e.class]
	n := t.namespaces[e.namespace]
	if e.bound {
		t.allocated.Sub(e.size)
		t.bound--
		n.bound--
	} else {
		t.requested.Sub(e.size)
		t.pending--
		n.pending--
	}
	if n.bound+n.pending == 0 {
		delete(t.namespaces, e.namespace)
	}
	if t.bound+t.pending == 0 {
		delete(l.classes, e.class)
	}
}

// Usage is what a class's claims hold, as a pool's status shows it: totals and counts,
// no namespace's name (a pool's readers may not learn which namespaces use it).
type Usage struct {
	// Allocated is what the Bound claims hold; Requested what the Pending claims ask for.
	Allocated, Requested resource.Quantity
	Bound, Pending       int
	// Namespaces is how many namespaces have Bound claims of the class.
	Namespaces int
}

// Usage returns a copy of the totals of class. It costs O(namespaces of the class), once
// per status write rather than per claim event.
func (l *Ledger) Usage(class string) Usage {
	t := l.classes[class]
	if t == nil {
		return Usage{}
	}
	u := Usage{Allocated: t.allocated.DeepCopy(), Requested: t.requested.DeepCopy(), Bound: t.bound, Pending: t.pending}
	for _, n := range t.namespaces {
		if n.bound > 0 {
			u.Namespaces++
		}
	}
	return u
}

// Len is the number of claims counted.
func (l *Ledger) Len() int { return len(l.entries) }

// Diff describes how l differs from other (a recount), or returns "" when the books agree
// entry by entry and total by total. Both ledgers may have quantities converted to
// inf.Dec form by the comparison; their values do not change.
func (l *Ledger) Diff(other *Ledger) string {
	if len(l.entries) != len(other.entries) {
		return fmt.Sprintf("%d claims counted, the recount has %d", len(l.entries), len(other.entries))
	}
	for uid, e := range l.entries {
		o, ok := other.entries[uid]
		if !ok || o.class != e.class || o.namespace != e.namespace || o.bound != e.bound || o.size.Cmp(e.size) != 0 {
			return fmt.Sprintf("claim %s differs from the recount", uid)
		}
	}
	if len(l.classes) != len(other.classes) {
		return fmt.Sprintf("%d classes in use, the recount has %d", len(l.classes), len(other.classes))
	}
	for class, t := range l.classes {
		o, ok := other.classes[class]
		if !ok || t.allocated.Cmp(o.allocated) != 0 || t.requested.Cmp(o.requested) != 0 || t.bound != o.bound || t.pending != o.pending || len(t.namespaces) != len(o.namespaces) {
			return fmt.Sprintf("totals of class %q differ from the recount", class)
		}
		for ns, n := range t.namespaces {
			m, ok := o.namespaces[ns]
			if !ok || *n != *m {
				return fmt.Sprintf("totals of namespace %s in class %q differ from the recount", ns, class)
			}
		}
	}
	return ""
}

// CheckTotals recomputes the totals from the entries and reports the first class whose
// running totals differ, or "" when the invariant holds.
func (l *Ledger) CheckTotals() string {
	fresh := NewLedger()
	for _, e := range l.entries {
		fresh.record(e)
	}
	fresh.entries = l.entries
	return l.Diff(fresh)
}
