package outcomes

import (
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// Store remembers, for each CR of one kind, how the helm reconciler's last visit ended:
// the generation it deployed, the failed attempts in a row, the reconcile request it
// handled. The helm reconciler writes its own conditions only when they change, so an
// attempt that fails like the one before, or a reconcile that finds nothing to change,
// leaves no trace on the CR; this is where they are counted. The readiness controller
// (internal/operator/readiness_controller.go) turns them into status.observedGeneration and
// Ready, Reconciling and Stalled, and is told of each new outcome through Notify.
//
// It holds only what this process saw: after a restart, the status the previous leader
// wrote stands until the helm reconciler has visited the CR again, which it does for every
// CR when it starts.
type Store struct {
	mu     sync.Mutex
	byKey  map[types.NamespacedName]*Outcome
	notify chan event.GenericEvent
}

// Outcome is how the helm reconciler's visits of one CR ended, as far as this process saw.
type Outcome struct {
	UID  types.UID
	born time.Time // when this process first recorded the CR
	// Deployed is the generation last installed, upgraded or found unchanged; 0 if none.
	Deployed int64
	// Failures counts the failed attempts in a row at FailedGeneration; Failure is the last.
	Failures         int64
	FailedGeneration int64
	Failure          statuscontract.Failure
	// Handled is the reconcile request (RequestAnnotation) the last visit handled, if
	// HandledSet.
	Handled    string
	HandledSet bool
	// Chart is the chart of the release last deployed or found unchanged, if ChartSet.
	Chart    Chart
	ChartSet bool
	// read are the versions of the sources of spec.valuesFrom the visit in progress read, and
	// secrets the strings it read from Secrets, kept only until the visit ends (redactor);
	// Applied are the versions the release last deployed or found unchanged was rendered
	// from, if AppliedSet.
	read       []valuesfrom.Source
	secrets    valuesfrom.Redactor
	values     map[string]any // the visit's values, translated (for the rollout gate)
	Applied    []valuesfrom.Source
	AppliedSet bool
	// sameInputs counts the upgrades in a row from the inputs (upgradeInputs) inputs, the
	// last at lastUpgrade: how the render-loop layer (layer_renderloop.go) tells a loop.
	inputs      string
	sameInputs  int
	lastUpgrade time.Time
}

// maxRequestEcho bounds the reconcile request echoed in status.lastHandledReconcileAt, as the
// CRD's schema does: an annotation value may be 256 KiB, and an echo the schema refuses would
// make every status write of the CR fail.
const maxRequestEcho = 1024

// handle records the reconcile request cr carries, if any, as handled.
func (e *Outcome) handle(cr client.Object) {
	if v, ok := cr.GetAnnotations()[statuscontract.RequestAnnotation]; ok {
		if len(v) > maxRequestEcho {
			v = refusal.Truncate(v, maxRequestEcho-len(" … "))
		}
		e.Handled, e.HandledSet = v, true
	}
}

// New is an empty Store.
func New() *Store {
	return &Store{byKey: map[types.NamespacedName]*Outcome{}, notify: make(chan event.GenericEvent, 1024)}
}

// entry returns cr's outcome, a new one if cr is new or was deleted and created again.
func (o *Store) entry(cr client.Object) *Outcome {
	key := client.ObjectKeyFromObject(cr)
	e := o.byKey[key]
	if e == nil || e.UID != cr.GetUID() {
		e = &Outcome{UID: cr.GetUID(), born: time.Now()}
		o.byKey[key] = e
	}
	return e
}

// Visited records that the helm reconciler looked at cr without installing or upgrading it:
// reconciling is paused.
func (o *Store) Visited(cr client.Object) {
	o.mu.Lock()
	o.entry(cr)
	o.mu.Unlock()
	o.tell(cr)
}

// Resolved records what the visit in progress made of cr's values: the sources of
// spec.valuesFrom it read, the strings it read from Secrets, and the values translated
// (internal/operator/values/sources.go).
func (o *Store) Resolved(cr client.Object, read []valuesfrom.Source, secrets valuesfrom.Redactor, values map[string]any) {
	o.mu.Lock()
	e := o.entry(cr)
	e.read, e.secrets, e.values = read, secrets, values
	o.mu.Unlock()
}

// Translated are the values the visit in progress of the CR key translated, if any.
func (o *Store) Translated(key types.NamespacedName) (map[string]any, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.byKey[key]; e != nil && e.values != nil {
		return e.values, true
	}
	return nil, false
}

// Redactor takes out of messages what the visit in progress of the CR key read from Secrets.
func (o *Store) Redactor(key types.NamespacedName) valuesfrom.Redactor {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.byKey[key]; e != nil {
		return e.secrets
	}
	return valuesfrom.Redactor{}
}

// Succeeded records that the release rel is deployed at cr's spec.
//
// It ends the visit: the strings read from Secrets are dropped, so that the manager holds
// them only while a visit runs, however many CRs read how large Secrets.
func (o *Store) Succeeded(cr client.Object, rel *release.Release) {
	ch, chartSet := ChartOf(rel)
	o.mu.Lock()
	e := o.entry(cr)
	e.Applied, e.AppliedSet, e.secrets, e.values = e.read, true, valuesfrom.Redactor{}, nil
	e.Deployed = max(e.Deployed, cr.GetGeneration())
	if chartSet {
		e.Chart, e.ChartSet = ch, true
	}
	e.Failures, e.FailedGeneration, e.Failure = 0, 0, statuscontract.Failure{}
	e.handle(cr)
	o.mu.Unlock()
	o.tell(cr)
}

// Failed records a failed attempt at cr's generation. The count goes on from the CR's
// status when this process has not seen the CR fail before (after a restart or a
// failover), so that a restart does not hide a stall.
//
// A failure ends the visit, as Succeeded does; its message was redacted below
// (internal/operator/pipeline/layer_redact.go).
func (o *Store) Failed(cr client.Object, f statuscontract.Failure) {
	f.Message = refusal.Truncate(f.Message, refusal.MaxConditionMessage/2)
	o.mu.Lock()
	e := o.entry(cr)
	e.secrets, e.values = valuesfrom.Redactor{}, nil
	gen := cr.GetGeneration()
	if e.FailedGeneration != gen {
		e.Failures, e.FailedGeneration = statusFailures(cr), gen
	}
	// A terminal refusal met again at the same generation (a second event of the same
	// version) is not counted: the first said all, and a new count would write the whole CR
	// to every watcher again.
	if !(f.Terminal && e.Failures > 0 && e.Failure.Terminal && e.Failure.Reason == f.Reason) {
		e.Failures++
	}
	e.Failure = f
	e.handle(cr)
	o.mu.Unlock()
	o.tell(cr)
}

// statusFailures is the failure count in cr's status, if it counts failures of cr's current
// generation.
func statusFailures(cr client.Object) int64 {
	u, ok := cr.(*unstructured.Unstructured)
	if !ok {
		return 0
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "status", statuscontract.FieldFailures)
	ready := statuscontract.Find(statuscontract.Conditions(u), statuscontract.Ready)
	if n <= 0 || ready == nil || ready.ObservedGeneration != cr.GetGeneration() {
		return 0
	}
	return n
}

// Get is the Outcome of the CR key whose UID is uid, if this process recorded one.
func (o *Store) Get(key types.NamespacedName, uid types.UID) (Outcome, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.byKey[key]
	if e == nil || e.UID != uid {
		return Outcome{}, false
	}
	return *e, true
}

// LoopingUpgrades is how many upgrades in a row of cr were from inputs, the last less than
// hold before now; 0 if the last upgrade was from other inputs.
func (o *Store) LoopingUpgrades(cr client.Object, inputs string, now time.Time, hold time.Duration) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(cr)
	if e.inputs != inputs || now.Sub(e.lastUpgrade) >= hold {
		return 0
	}
	return e.sameInputs
}

// Upgraded records an upgrade of cr from inputs at now.
func (o *Store) Upgraded(cr client.Object, inputs string, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(cr)
	if e.inputs == inputs {
		e.sameInputs++
	} else {
		e.inputs, e.sameInputs = inputs, 1
	}
	e.lastUpgrade = now
}

// Forget drops the outcome of the CR key, which is gone.
func (o *Store) Forget(key types.NamespacedName) {
	o.mu.Lock()
	delete(o.byKey, key)
	o.mu.Unlock()
}

// ForgetGone drops the outcomes of the CRs that live does not hold and that were already
// recorded at since (internal/operator/forget.go's goneForgetter).
func (o *Store) ForgetGone(live map[types.NamespacedName]bool, since time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, e := range o.byKey {
		if !live[k] && e.born.Before(since) {
			delete(o.byKey, k)
		}
	}
}

// tell wakes the readiness controller for cr. It blocks when the controller is 1024
// requests behind, which slows the helm reconcilers down rather than losing a request.
//
// The event carries a copy of cr's name and namespace, not cr: the reconciler goes on
// changing its CR object (the status it writes) while the readiness controller's handler
// reads the event's. Passing cr itself crashed the manager ("concurrent map read and map
// write" in the handler's GetName) when it restarted over 1000 CRs.
func (o *Store) tell(cr client.Object) {
	o.notify <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Namespace: cr.GetNamespace(), Name: cr.GetName()}}}
}

// Notify is the channel on which the Store wakes the readiness controller of its kind, with
// the name and namespace of a CR whose outcome changed; the rollout controller sends into it
// too. It holds 1024 requests; a sender blocks beyond.
func (o *Store) Notify() chan event.GenericEvent { return o.notify }

// Chart is the chart of a deployed release, recorded in the CR's Outcome: what the readiness
// controller writes in status.chart.
type Chart struct {
	Version, Digest string
	Revision        int64
	Deployed        time.Time
}

// ChartOf reads the chart of rel.
func ChartOf(rel *release.Release) (Chart, bool) {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return Chart{}, false
	}
	c := Chart{Version: rel.Chart.Metadata.Version, Digest: rollout.Digest(rel.Chart), Revision: int64(rel.Version)}
	if rel.Info != nil {
		c.Deployed = rel.Info.LastDeployed.Time
	}
	return c, true
}
