package poolstatus

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Books is the ledger shared by the PVC informer's event handler, which keeps it, and the
// pool controller, which reads it; plus the index from StorageClass to pools that tells
// which pools a claim event concerns.
//
// The handler is registered on every replica when the sidecar starts, so a standby's
// books are as warm as its cache. Only the leader's controller attaches its queue; until
// then claim events update the books and wake no pool.
type Books struct {
	mu     sync.Mutex
	ledger *Ledger
	// pools are the pools of each class, and classes the class of each pool, as the
	// controller last saw them.
	// A pool without spec.storageClassName is indexed under each class it may own
	// (ClassesOf).
	pools   map[string]map[types.NamespacedName]struct{}
	classes map[types.NamespacedName][]string
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
	delay   time.Duration
}

// NewBooks returns empty books.
func NewBooks() *Books {
	return &Books{
		ledger:  NewLedger(),
		pools:   map[string]map[types.NamespacedName]struct{}{},
		classes: map[types.NamespacedName][]string{},
	}
}

var _ toolscache.ResourceEventHandler = (*Books)(nil)

// OnAdd records a claim.
func (b *Books) OnAdd(obj any, _ bool) {
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		b.apply(func(l *Ledger) []string { return l.Apply(ClaimOf(pvc)) })
	}
}

// OnUpdate records a claim's new state (size, phase or class). After a relist, the update may
// be of a claim deleted and created again under the same name while the watch was down: the
// informer then delivers no deletion, so the old claim (its UID) is forgotten here.
func (b *Books) OnUpdate(oldObj, obj any) {
	pvc, ok := obj.(*corev1.PersistentVolumeClaim)
	if !ok {
		return
	}
	old, ok := oldObj.(*corev1.PersistentVolumeClaim)
	if !ok || old.UID == pvc.UID {
		b.OnAdd(pvc, false)
		return
	}
	b.apply(func(l *Ledger) []string { return append(l.Remove(old.UID), l.Apply(ClaimOf(pvc))...) })
}

// OnDelete forgets a claim; a tombstone (a deletion the watch missed) carries its last
// known state.
func (b *Books) OnDelete(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok {
		b.apply(func(l *Ledger) []string { return l.Remove(pvc.UID) })
	}
}

// apply changes the books and wakes the pools of the classes that changed, each after
// the coalescing delay. The pools are looked up under the same lock as the change, so a
// pool added to the index concurrently either is found here or is synced after its own
// addition, and so after this change.
func (b *Books) apply(change func(*Ledger) []string) {
	b.mu.Lock()
	classes := change(b.ledger)
	q, delay := b.queue, b.delay
	var wake []types.NamespacedName
	if q != nil {
		for _, class := range classes {
			for pool := range b.pools[class] {
				wake = append(wake, pool)
			}
		}
	}
	b.mu.Unlock()
	for _, pool := range wake {
		q.AddAfter(reconcile.Request{NamespacedName: pool}, delay)
	}
}

// ClaimOf extracts what the ledger needs of a claim.
func ClaimOf(pvc *corev1.PersistentVolumeClaim) Claim {
	c := Claim{
		UID:       pvc.UID,
		Namespace: pvc.Namespace,
		Size:      pvc.Spec.Resources.Requests[corev1.ResourceStorage],
		Phase:     string(pvc.Status.Phase),
	}
	if pvc.Spec.StorageClassName != nil {
		c.Class = *pvc.Spec.StorageClassName
	}
	return c
}

// attach makes claim events wake pools in q after delay; nil detaches.
func (b *Books) attach(q workqueue.TypedRateLimitingInterface[reconcile.Request], delay time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue, b.delay = q, delay
}

// setPool records the classes of a pool; none removes the pool.
func (b *Books) setPool(pool types.NamespacedName, classes ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.classes[pool]; ok {
		if slices.Equal(old, classes) {
			return
		}
		for _, class := range old {
			delete(b.pools[class], pool)
			if len(b.pools[class]) == 0 {
				delete(b.pools, class)
			}
		}
		delete(b.classes, pool)
	}
	if len(classes) == 0 {
		return
	}
	b.classes[pool] = classes
	for _, class := range classes {
		if b.pools[class] == nil {
			b.pools[class] = map[types.NamespacedName]struct{}{}
		}
		b.pools[class][pool] = struct{}{}
	}
}

// poolsOf lists the pools of class in the index.
func (b *Books) poolsOf(class string) []types.NamespacedName {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(b.pools[class]))
	for pool := range b.pools[class] {
		out = append(out, pool)
	}
	return out
}

// allPools lists the pools in the index.
func (b *Books) allPools() []types.NamespacedName {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(b.classes))
	for pool := range b.classes {
		out = append(out, pool)
	}
	return out
}

// Usage returns what the claims of class hold.
func (b *Books) Usage(class string) Usage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ledger.Usage(class)
}

// Verify compares the books with a recount of the claims list returns. It returns "" when
// they agree, or what differs. With replace, books that differ are replaced by the recount.
//
// list is called with the books locked, so that no claim event reaches the books between
// the list and the replacement: the informer updates its cache before it hands an event to
// the books, so an event the books took before the list is in the list, and one the list
// lacks reaches the books after the replacement, and applies to the recount. A list taken
// before the lock would lose an event the books took in between: a deletion lost so stays
// counted until the next recount.
func (b *Books) Verify(list func() ([]Claim, error), replace bool) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	claims, err := list()
	if err != nil {
		return "", err
	}
	fresh := Recount(claims)
	if diff := b.ledger.CheckTotals(); diff != "" {
		// The running totals are not the sum of the entries: a bug in the arithmetic.
		if replace {
			b.ledger = fresh
		}
		return "running totals: " + diff, nil
	}
	diff := b.ledger.Diff(fresh)
	if diff != "" && replace {
		b.ledger = fresh
	}
	return diff, nil
}
