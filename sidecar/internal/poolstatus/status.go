package poolstatus

import (
	"fmt"
	"strconv"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// StatusField is the one status field the bookkeeping owns: status.pool
// (statuscontract.PoolBooks). Everything in it
// is written at once, with a JSON merge patch of just that object, so nothing else in the
// status is touched.
//
// The pool's conditions live in status.pool.conditions, not status.conditions: the
// helm-operator owns status.conditions (Initialized, Deployed, ReleaseFailed,
// Irreconcilable) and writes it as a whole list, which would erase ours, and ours written
// there would erase its own.
const StatusField = statuscontract.FieldPool

// Usage levels, relative to what the pool may promise (capacity × overcommitRatio). An
// Event is recorded each time usage rises into a higher level.
const (
	levelNormal = iota
	levelHigh   // ≥ 80%
	levelFull   // ≥ 100%
)

// PoolStatus is status.pool. Quantities are canonical Kubernetes quantities in the format
// (binary or decimal SI) of spec.capacity.
type PoolStatus struct {
	// StorageClassName is the class whose claims are counted.
	StorageClassName string `json:"storageClassName"`
	// ObservedGeneration is the generation of the pool whose spec this status reflects.
	ObservedGeneration int64 `json:"observedGeneration"`
	// Capacity is spec.capacity.
	Capacity string `json:"capacity"`
	// Allocatable is capacity × overcommitRatio: what the pool may promise.
	Allocatable string `json:"allocatable"`
	// PoolUsage is embedded, so that its fields sit in status.pool itself, and a pointer, so
	// that a pool that keeps no books (BooksKept False) has none of them: nothing of the
	// claims of a class that is not its own shows in its status.
	*PoolUsage `json:",omitempty"`
	Conditions []metav1.Condition `json:"conditions"`
}

// PoolUsage is what the claims of the pool's class hold, in status.pool. It names no
// namespace: whoever may read the pool learns how much is used and by how many namespaces,
// not which (an administrator can list the claims of the class).
type PoolUsage struct {
	// Allocated is the sum of the storage requests of the class's Bound claims.
	Allocated string `json:"allocated"`
	// Available is allocatable − allocated; negative when the pool is over its limit.
	Available string `json:"available"`
	// Requested is the sum of the storage requests of the class's Pending claims: asked
	// for, not held, so not in allocated (a claim that never binds cannot fill the pool).
	Requested string      `json:"requested"`
	Claims    ClaimCounts `json:"claims"`
	// NamespaceCount is how many namespaces have Bound claims of the class.
	NamespaceCount int64 `json:"namespaceCount"`
}

// ClaimCounts counts the claims of the class: Bound ones hold capacity, Pending ones ask
// for it.
type ClaimCounts struct {
	Bound   int64 `json:"bound"`
	Pending int64 `json:"pending"`
	Total   int64 `json:"total"`
}

// Spec is what the bookkeeping reads of a WarpdrivePool's spec.
type Spec struct {
	Capacity resource.Quantity
	// Ratio is overcommitRatio as an exact decimal.
	Ratio *inf.Dec
	// Class is the pool's StorageClass: spec.storageClassName, or a default (see
	// ClassesOf); sync settles which default.
	Class string
}

// ParseSpec reads the spec of a pool. The CRD schema has already checked the values;
// errors here mean a pool the chart would refuse too. Class is the first of ClassesOf.
func ParseSpec(pool *unstructured.Unstructured) (Spec, error) {
	spec, _, _ := unstructured.NestedMap(pool.Object, "spec")
	var s Spec
	var err error
	if s.Capacity, err = parseCapacity(spec["capacity"]); err != nil {
		return s, fmt.Errorf("spec.capacity: %w", err)
	}
	if s.Ratio, err = parseRatio(spec["overcommitRatio"]); err != nil {
		return s, fmt.Errorf("spec.overcommitRatio: %w", err)
	}
	s.Class = ClassesOf(pool)[0]
	return s, nil
}

// DefaultClass is <namespace>.<name>: the StorageClass the chart names a new pool's class
// after when the pool has no spec.storageClassName. A namespace name has no dot, so no pool of
// another namespace can have the same default.
func DefaultClass(namespace, name string) string {
	return namespace + "." + name
}

// ClassesOf are the StorageClasses a pool may own, the chart's default first:
// spec.storageClassName alone when it is set; otherwise DefaultClass, then the pool's name,
// which chart 0.1.0 named the class after and which the chart keeps for a pool installed with
// it. The sidecar keeps the books of whichever of them the pool's release created
// (PoolReconciler.ownership), so a pool's books follow its class whichever default its release
// was installed with.
func ClassesOf(pool *unstructured.Unstructured) []string {
	class, _, _ := unstructured.NestedString(pool.Object, "spec", "storageClassName")
	if class != "" {
		return []string{class}
	}
	return []string{DefaultClass(pool.GetNamespace(), pool.GetName()), pool.GetName()}
}

func parseCapacity(v any) (resource.Quantity, error) {
	switch c := v.(type) {
	case string:
		return resource.ParseQuantity(c)
	case int64:
		return *resource.NewQuantity(c, resource.DecimalSI), nil
	case float64:
		return resource.ParseQuantity(strconv.FormatFloat(c, 'f', -1, 64))
	case nil:
		return resource.Quantity{}, fmt.Errorf("missing")
	default:
		return resource.Quantity{}, fmt.Errorf("not a quantity: %v", v)
	}
}

// parseRatio reads overcommitRatio exactly. JSON numbers reach the API server's storage and
// every client as float64, so 1.1 arrives as the float64 nearest to 1.1; its shortest
// decimal representation that reads back as the same float64 ('f', -1) is the number the
// user wrote, which becomes an exact inf.Dec. Unset means the schema's default, 1.
func parseRatio(v any) (*inf.Dec, error) {
	var text string
	switch r := v.(type) {
	case nil:
		return inf.NewDec(1, 0), nil
	case int64:
		return inf.NewDec(r, 0), nil
	case float64:
		text = strconv.FormatFloat(r, 'f', -1, 64)
	case string:
		text = r
	default:
		return nil, fmt.Errorf("not a number: %v", v)
	}
	d, ok := new(inf.Dec).SetString(text)
	if !ok || d.Sign() < 0 {
		return nil, fmt.Errorf("not a non-negative number: %v", v)
	}
	return d, nil
}

// Allocatable is capacity × ratio, computed exactly with inf.Dec and rounded down to whole
// bytes: a volume cannot hold part of a byte, and rounding down never promises more than
// the pool has.
func (s Spec) Allocatable() resource.Quantity {
	c := s.Capacity.DeepCopy()
	product := new(inf.Dec).Mul(c.AsDec(), s.Ratio)
	whole := new(inf.Dec).Round(product, 0, inf.RoundDown)
	return *resource.NewDecimalQuantity(*whole, s.Capacity.Format)
}

// canonical writes q in its canonical form in format f (for example 6Gi, 1500M).
func canonical(q resource.Quantity, f resource.Format) string {
	c := q.DeepCopy()
	return resource.NewDecimalQuantity(*c.AsDec(), f).String()
}

// level is the usage level of allocated against allocatable, compared exactly.
func level(allocated, allocatable resource.Quantity) int {
	a, l := allocated.DeepCopy(), allocatable.DeepCopy()
	if a.Cmp(l) >= 0 {
		return levelFull
	}
	// allocated ≥ 80% of allocatable ⇔ 5 × allocated ≥ 4 × allocatable.
	a5 := new(inf.Dec).Mul(a.AsDec(), inf.NewDec(5, 0))
	l4 := new(inf.Dec).Mul(l.AsDec(), inf.NewDec(4, 0))
	if a5.Cmp(l4) >= 0 {
		return levelHigh
	}
	return levelNormal
}

// percent is allocated as a whole percentage of allocatable, rounded down, for messages.
func percent(allocated, allocatable resource.Quantity) string {
	a, l := allocated.DeepCopy(), allocatable.DeepCopy()
	if l.Sign() <= 0 {
		return "all"
	}
	hundredfold := new(inf.Dec).Mul(a.AsDec(), inf.NewDec(100, 0))
	return new(inf.Dec).QuoRound(hundredfold, l.AsDec(), 0, inf.RoundDown).String() + "%"
}

// levelOfStatus is the usage level a written status.pool shows, from its allocated and
// allocatable, or levelNormal when there is none: it is where a new leader picks up, so
// that it does not repeat the Events its predecessor recorded.
func levelOfStatus(pool *unstructured.Unstructured) int {
	allocated, ok1, _ := unstructured.NestedString(pool.Object, "status", StatusField, "allocated")
	allocatable, ok2, _ := unstructured.NestedString(pool.Object, "status", StatusField, "allocatable")
	if !ok1 || !ok2 {
		return levelNormal
	}
	a, err1 := resource.ParseQuantity(allocated)
	l, err2 := resource.ParseQuantity(allocatable)
	if err1 != nil || err2 != nil {
		return levelNormal
	}
	return level(a, l)
}

// conditionsOfStatus reads status.pool.conditions, so that a new leader keeps their
// lastTransitionTime.
func conditionsOfStatus(pool *unstructured.Unstructured) []metav1.Condition {
	raw, _, _ := unstructured.NestedSlice(pool.Object, "status", StatusField, statuscontract.FieldConditions)
	var conds []metav1.Condition
	for _, item := range raw {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			conds = append(conds, c)
		}
	}
	return conds
}

// ComputeStatus is the status of a pool of spec at generation whose class's claims hold
// usage, when own says the pool keeps the books of its class; otherwise usage is ignored,
// and the status has no usage and no usage conditions. conds are the pool's conditions so
// far (not modified); the new ones keep their lastTransitionTime unless their status
// changes, and then take now. It also returns the usage level, for Events (levelNormal for
// a pool that keeps no books, so that it records none).
func ComputeStatus(generation int64, spec Spec, own Ownership, usage Usage, conds []metav1.Condition, now metav1.Time) (PoolStatus, int) {
	f := spec.Capacity.Format
	allocatable := spec.Allocatable()
	st := PoolStatus{
		StorageClassName:   spec.Class,
		ObservedGeneration: generation,
		Capacity:           canonical(spec.Capacity, f),
		Allocatable:        canonical(allocatable, f),
	}
	st.Conditions = append([]metav1.Condition(nil), conds...)
	booksKept := metav1.Condition{Type: statuscontract.BooksKept, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		LastTransitionTime: now, Reason: own.Reason, Message: own.Message}
	if !own.Owned {
		// The usage conditions' messages name what the claims hold: they go too.
		booksKept.Status = metav1.ConditionFalse
		meta.RemoveStatusCondition(&st.Conditions, statuscontract.CapacityAvailable)
		meta.RemoveStatusCondition(&st.Conditions, statuscontract.Overcommitted)
		meta.SetStatusCondition(&st.Conditions, booksKept)
		return st, levelNormal
	}
	meta.SetStatusCondition(&st.Conditions, booksKept)

	available := allocatable.DeepCopy()
	available.Sub(usage.Allocated)
	st.PoolUsage = &PoolUsage{
		Allocated: canonical(usage.Allocated, f),
		Available: canonical(available, f),
		Requested: canonical(usage.Requested, f),
		Claims: ClaimCounts{
			Bound:   int64(usage.Bound),
			Pending: int64(usage.Pending),
			Total:   int64(usage.Bound + usage.Pending),
		},
		NamespaceCount: int64(usage.Namespaces),
	}

	lvl := level(usage.Allocated, allocatable)
	limit := fmt.Sprintf("%s (capacity %s × overcommitRatio %s)", st.Allocatable, st.Capacity, spec.Ratio)
	held := fmt.Sprintf("%d bound claims of StorageClass %q hold %s", st.Claims.Bound, spec.Class, st.Allocated)

	capacityAvailable := metav1.Condition{Type: statuscontract.CapacityAvailable, ObservedGeneration: generation, LastTransitionTime: now}
	if lvl == levelFull {
		capacityAvailable.Status, capacityAvailable.Reason = metav1.ConditionFalse, statuscontract.ReasonPoolFull
		capacityAvailable.Message = fmt.Sprintf("The pool is full: %s, %s of the %s it may promise; "+
			"new claims overcommit it further. Delete unused claims, or raise spec.capacity or spec.overcommitRatio.",
			held, percent(usage.Allocated, allocatable), limit)
	} else {
		capacityAvailable.Status, capacityAvailable.Reason = metav1.ConditionTrue, statuscontract.ReasonCapacityLeft
		capacityAvailable.Message = fmt.Sprintf("%s available: %s, %s of %s.",
			st.Available, held, percent(usage.Allocated, allocatable), limit)
	}
	meta.SetStatusCondition(&st.Conditions, capacityAvailable)

	overcommitted := metav1.Condition{Type: statuscontract.Overcommitted, ObservedGeneration: generation, LastTransitionTime: now}
	physical := spec.Capacity.DeepCopy()
	if over := usage.Allocated.DeepCopy(); over.Cmp(physical) > 0 {
		over.Sub(physical)
		overcommitted.Status, overcommitted.Reason = metav1.ConditionTrue, statuscontract.ReasonAllocatedAboveCapacity
		overcommitted.Message = fmt.Sprintf("%s, %s more than the physical capacity %s: volumes can run out of space "+
			"before they are full. Raise spec.capacity, or move claims to another pool.",
			held, canonical(over, f), st.Capacity)
	} else {
		overcommitted.Status, overcommitted.Reason = metav1.ConditionFalse, statuscontract.ReasonWithinCapacity
		overcommitted.Message = fmt.Sprintf("%s, within the physical capacity %s.", held, st.Capacity)
	}
	meta.SetStatusCondition(&st.Conditions, overcommitted)
	return st, lvl
}

// Threshold Event reasons.
const (
	ReasonUsageHigh = "PoolUsageHigh"
	ReasonFull      = "PoolFull"
)

// usageEvent is an Event to record on a pool.
type usageEvent struct{ reason, message string }

// levelEvents are the Events for usage rising from level from to level to: one per
// threshold crossed upwards (both when usage jumps past 80% and 100% at once), none when
// it falls, none for a pool that keeps no books. Falling below a threshold re-arms it.
func levelEvents(from, to int, st PoolStatus, spec Spec) []usageEvent {
	if st.PoolUsage == nil {
		// A pool that keeps no books has no usage to report, nor to leak through Events.
		return nil
	}
	var out []usageEvent
	// Counts only: the Event is read by whoever may read the pool, who may not learn which
	// other namespaces use it.
	summary := fmt.Sprintf("%s of %s allocated (capacity %s × overcommitRatio %s) to %d bound claims of StorageClass %q in %s; "+
		"%d pending claims ask for %s more.",
		st.Allocated, st.Allocatable, st.Capacity, spec.Ratio, st.Claims.Bound, st.StorageClassName,
		plural(st.NamespaceCount, "namespace"), st.Claims.Pending, st.Requested)
	if from < levelHigh && to >= levelHigh {
		out = append(out, usageEvent{ReasonUsageHigh, "Pool usage crossed 80%: " + summary +
			" Plan more capacity or free unused claims."})
	}
	if from < levelFull && to >= levelFull {
		out = append(out, usageEvent{ReasonFull, "Pool usage reached 100%: " + summary +
			" New claims overcommit the pool: delete unused claims, or raise spec.capacity or spec.overcommitRatio."})
	}
	return out
}

// plural is "1 namespace", "2 namespaces".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// StatusPatch returns the JSON merge patch that sets status.pool of pool to desired, or nil
// when it already holds exactly that. The patch is the whole status.pool object, every
// field present, so nothing stale survives the merge; a field status.pool has and desired
// lacks (the usage of a pool that stopped keeping books) is set to null, which a merge
// patch removes. Nothing outside status.pool is touched.
func StatusPatch(pool *unstructured.Unstructured, desired PoolStatus) ([]byte, error) {
	want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&desired)
	if err != nil {
		return nil, err
	}
	return statuscontract.PoolBooks.MergePatch(pool, statuscontract.Part{Fields: map[string]any{StatusField: want}})
}
