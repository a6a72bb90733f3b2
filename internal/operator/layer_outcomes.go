package operator

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/hook"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// outcomes remembers, for each CR of one kind, how the helm reconciler's last visit ended:
// the generation it deployed, the failed attempts in a row, the reconcile request it
// handled. The helm reconciler writes its own conditions only when they change, so an
// attempt that fails like the one before, or a reconcile that finds nothing to change,
// leaves no trace on the CR; this is where they are counted. The readiness controller
// (readiness_controller.go) turns them into status.observedGeneration and Ready, Reconciling and
// Stalled, and is told of each new outcome through notify.
//
// It holds only what this process saw: after a restart, the status the previous leader
// wrote stands until the helm reconciler has visited the CR again, which it does for every
// CR when it starts.
type outcomes struct {
	mu     sync.Mutex
	byKey  map[types.NamespacedName]*outcome
	notify chan event.GenericEvent
}

type outcome struct {
	uid  types.UID
	born time.Time // when this process first recorded the CR
	// deployed is the generation last installed, upgraded or found unchanged; 0 if none.
	deployed int64
	// failures counts the failed attempts in a row at failedGeneration; failure is the last.
	failures         int64
	failedGeneration int64
	failure          statuscontract.Failure
	// handled is the reconcile request (RequestAnnotation) the last visit handled.
	handled    string
	handledSet bool
	// chart is the chart of the release last deployed or found unchanged, if chartSet.
	chart    deployedChart
	chartSet bool
	// read are the versions of the sources of spec.valuesFrom the visit in progress read, and
	// secrets the strings it read from Secrets, kept only until the visit ends (redactor);
	// applied are the versions the release last deployed or found unchanged was rendered
	// from, if appliedSet.
	read       []valuesfrom.Source
	secrets    valuesfrom.Redactor
	values     map[string]any // the visit's values, translated (for the rollout gate)
	applied    []valuesfrom.Source
	appliedSet bool
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
func (e *outcome) handle(cr client.Object) {
	if v, ok := cr.GetAnnotations()[statuscontract.RequestAnnotation]; ok {
		if len(v) > maxRequestEcho {
			v = refusal.Truncate(v, maxRequestEcho-len(" … "))
		}
		e.handled, e.handledSet = v, true
	}
}

func newOutcomes() *outcomes {
	return &outcomes{byKey: map[types.NamespacedName]*outcome{}, notify: make(chan event.GenericEvent, 1024)}
}

// entry returns cr's outcome, a new one if cr is new or was deleted and created again.
func (o *outcomes) entry(cr client.Object) *outcome {
	key := client.ObjectKeyFromObject(cr)
	e := o.byKey[key]
	if e == nil || e.uid != cr.GetUID() {
		e = &outcome{uid: cr.GetUID(), born: time.Now()}
		o.byKey[key] = e
	}
	return e
}

// visited records that the helm reconciler looked at cr without installing or upgrading it:
// reconciling is paused.
func (o *outcomes) visited(cr client.Object) {
	o.mu.Lock()
	o.entry(cr)
	o.mu.Unlock()
	o.tell(cr)
}

// resolved records what the visit in progress made of cr's values: the sources of
// spec.valuesFrom it read, the strings it read from Secrets, and the values translated
// (valuessources.go).
func (o *outcomes) resolved(cr client.Object, read []valuesfrom.Source, secrets valuesfrom.Redactor, values map[string]any) {
	o.mu.Lock()
	e := o.entry(cr)
	e.read, e.secrets, e.values = read, secrets, values
	o.mu.Unlock()
}

// translated are the values the visit in progress of the CR key translated, if any.
func (o *outcomes) translated(key types.NamespacedName) (map[string]any, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.byKey[key]; e != nil && e.values != nil {
		return e.values, true
	}
	return nil, false
}

// redactor takes out of messages what the visit in progress of the CR key read from Secrets.
func (o *outcomes) redactor(key types.NamespacedName) valuesfrom.Redactor {
	o.mu.Lock()
	defer o.mu.Unlock()
	if e := o.byKey[key]; e != nil {
		return e.secrets
	}
	return valuesfrom.Redactor{}
}

// succeeded records that the release rel is deployed at cr's spec.
//
// It ends the visit: the strings read from Secrets are dropped, so that the manager holds
// them only while a visit runs, however many CRs read how large Secrets.
func (o *outcomes) succeeded(cr client.Object, rel *release.Release) {
	ch, chartSet := chartOf(rel)
	o.mu.Lock()
	e := o.entry(cr)
	e.applied, e.appliedSet, e.secrets, e.values = e.read, true, valuesfrom.Redactor{}, nil
	e.deployed = max(e.deployed, cr.GetGeneration())
	if chartSet {
		e.chart, e.chartSet = ch, true
	}
	e.failures, e.failedGeneration, e.failure = 0, 0, statuscontract.Failure{}
	e.handle(cr)
	o.mu.Unlock()
	o.tell(cr)
}

// failed records a failed attempt at cr's generation. The count goes on from the CR's
// status when this process has not seen the CR fail before (after a restart or a
// failover), so that a restart does not hide a stall.
//
// A failure ends the visit, as succeeded does; its message was redacted below (layer_redact.go).
func (o *outcomes) failed(cr client.Object, f statuscontract.Failure) {
	f.Message = refusal.Truncate(f.Message, refusal.MaxConditionMessage/2)
	o.mu.Lock()
	e := o.entry(cr)
	e.secrets, e.values = valuesfrom.Redactor{}, nil
	gen := cr.GetGeneration()
	if e.failedGeneration != gen {
		e.failures, e.failedGeneration = statusFailures(cr), gen
	}
	// A terminal refusal met again at the same generation (a second event of the same
	// version) is not counted: the first said all, and a new count would write the whole CR
	// to every watcher again.
	if !(f.Terminal && e.failures > 0 && e.failure.Terminal && e.failure.Reason == f.Reason) {
		e.failures++
	}
	e.failure = f
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

func (o *outcomes) get(key types.NamespacedName, uid types.UID) (outcome, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.byKey[key]
	if e == nil || e.uid != uid {
		return outcome{}, false
	}
	return *e, true
}

// loopingUpgrades is how many upgrades in a row of cr were from inputs, the last less than
// renderLoopHold before now; 0 if the last upgrade was from other inputs.
func (o *outcomes) loopingUpgrades(cr client.Object, inputs string, now time.Time) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	e := o.entry(cr)
	if e.inputs != inputs || now.Sub(e.lastUpgrade) >= renderLoopHold {
		return 0
	}
	return e.sameInputs
}

// upgraded records an upgrade of cr from inputs at now.
func (o *outcomes) upgraded(cr client.Object, inputs string, now time.Time) {
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

func (o *outcomes) forget(key types.NamespacedName) {
	o.mu.Lock()
	delete(o.byKey, key)
	o.mu.Unlock()
}

// forgetGone drops the outcomes of the CRs that live does not hold and that were already
// recorded at since (goneForgetter).
func (o *outcomes) forgetGone(live map[types.NamespacedName]bool, since time.Time) {
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
func (o *outcomes) tell(cr client.Object) {
	o.notify <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Namespace: cr.GetNamespace(), Name: cr.GetName()}}}
}

// withOutcomes hands out action clients that record each failed attempt in o. Successes are
// recorded by the post-hook (recordSuccess), which runs only once the whole install, upgrade
// or drift repair has succeeded.
func withOutcomes(getter helmclient.ActionClientGetter, o *outcomes, metrics *fleetSeries) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, cr client.Object) (helmclient.ActionInterface, error) {
		c, err := getter.ActionClientFor(ctx, cr)
		if err != nil {
			o.failed(cr, statuscontract.Failure{Reason: statuscontract.ReasonErrorGettingClient, Step: "reconcile", Message: err.Error()})
			return nil, err
		}
		return outcomeClient{ActionInterface: c, obj: cr, outcomes: o, metrics: metrics}, nil
	})
}

type outcomeClient struct {
	helmclient.ActionInterface
	obj      client.Object
	outcomes *outcomes
	metrics  *fleetSeries // the last install's or upgrade's duration and result
}

func (c outcomeClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		c.outcomes.failed(c.obj, statuscontract.Failure{Reason: statuscontract.ReasonReleaseLookupFailed, Step: "reconcile", Message: err.Error()})
	}
	return rel, err
}

func (c outcomeClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.metrics.helmOperation(c.obj.GetObjectKind().GroupVersionKind().Kind, namespace, name, time.Since(start), err)
	if f, refused := refusal.Of(err); refused {
		c.outcomes.failed(c.obj, f)
	} else if err != nil {
		c.outcomes.failed(c.obj, statuscontract.Failure{Reason: statuscontract.ReasonInstallFailed, Step: "install", Message: err.Error()})
	}
	return rel, err
}

func (c outcomeClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	if !isDryRun(opts) {
		c.metrics.helmOperation(c.obj.GetObjectKind().GroupVersionKind().Kind, namespace, name, time.Since(start), err)
	}
	if f, refused := refusal.Of(err); refused {
		c.outcomes.failed(c.obj, f)
	} else if err != nil {
		reason := statuscontract.ReasonUpgradeFailed
		if isDryRun(opts) {
			reason = statuscontract.ReasonDryRunFailed // the spec does not render or is refused: see layer_releaseevents.go
		}
		c.outcomes.failed(c.obj, statuscontract.Failure{Reason: reason, Step: "upgrade", Message: err.Error()})
	}
	return rel, err
}

func (c outcomeClient) Reconcile(rel *release.Release) error {
	err := c.ActionInterface.Reconcile(rel)
	if err != nil {
		c.outcomes.failed(c.obj, statuscontract.Failure{Reason: statuscontract.ReasonReconcileFailed, Step: "drift repair", Message: err.Error()})
	}
	return err
}

// recordSuccess is the reconciler's post-hook: it runs after every install, upgrade or
// unchanged release that succeeded, before the reconciler's own status write.
func recordSuccess(o *outcomes) hook.PostHook {
	return hook.PostHookFunc(func(obj *unstructured.Unstructured, rel release.Release, _ logr.Logger) error {
		o.succeeded(obj, &rel)
		return nil
	})
}
