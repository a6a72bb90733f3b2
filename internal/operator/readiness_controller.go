package operator

import (
	"context"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/values"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// readinessReconciler writes the manager's part of a CR's status: observedGeneration,
// failures, lastHandledReconcileAt and the conditions Ready, Reconciling and Stalled
// (docs/status.md).
//
// Its loop, one controller per kind:
//
//  1. The helm reconciler records each visit's outcome (internal/operator/outcomes) and
//     wakes this controller; so does every change of the CR, its status included (the
//     sidecar's RolledOut condition, helm-operator-plugins' Paused).
//  2. sync reads the CR from the cache and its outcome from memory, and asks
//     statuscontract.Decide what they mean.
//  3. If that differs from the CR's status, sync applies it (server-side apply, field manager
//     warpdrive-manager) on the condition that the CR is still the version it read: a
//     decision taken on an older version is never written. A conflict is decided again
//     once on the CR read from the API server, and after a second goes back to the queue.
//
// It writes nothing for a CR the helm reconciler of this process has not visited yet: the
// status then holds what the previous leader wrote, or, for a new CR, the CRD's default
// observedGeneration 0, which kstatus reads as in progress.
type readinessReconciler struct {
	// reader reads the CRs: the manager's cache, whose events wake this controller. The
	// manager's client would read them from the API server, as it does every unstructured
	// object: a GET and a JSON decode for every event of the CR, status writes included,
	// six of them per CR through a wave of edits, for a version the apply checks anyway.
	reader   client.Reader
	client   client.Client
	gvk      schema.GroupVersionKind
	selector labels.Selector
	outcomes *outcomes.Store
	rollout  rolloutSource  // status.chart and ChartRollout: the kind's rollout controller
	sources  sourceVersions // whether a source of spec.valuesFrom changed since the release
	metrics  *metrics.Fleet // the CR's Ready and Stalled, and its chart's series
	now      func() metav1.Time
}

// sourceVersions tells which source of a CR's spec.valuesFrom is not at the version the
// deployed release was rendered from, applied (internal/operator/values).
type sourceVersions interface {
	Changed(ctx context.Context, cr *unstructured.Unstructured, applied []valuesfrom.Source) string
}

// rolloutSource says where a CR stands in its kind's chart rollout.
type rolloutSource interface {
	status(cr *unstructured.Unstructured) rolloutStatus
}

// readinessWorkers is how many CRs of a kind the readiness controller syncs at once: two, one
// of them kept for the namespaces other than the busiest (fairqueue.ForWorkers).
//
// Why not one: a quiet tenant's CR, first in line, waits for the one worker to finish a status
// write of the busy tenant's, which takes tenths of a second on the API server an edit wave
// loads, and it does so three times on the way of each edit (UpgradePending,
// observedGeneration, Ready) (docs/bench/memory.md, "An edit wave with one readiness worker
// kept for the other namespaces (twenty-third)").
//
// Why not more for the busy tenant: each wave of 1000 edits starts with a thousand status
// writes (UpgradePending, one per edited CR). With 2 or 4 workers, all the busy tenant's, they
// went out in the wave's first seconds, beside the upgrades, and the other tenant's edits
// reached their Deployment in 5.0-6.0 s and 6.4-10 s against 3.3-4.9 s with one (one run each;
// docs/bench/memory.md, "An edit wave without the sidecar's word on the generation before
// (eighteenth)"). With one kept, the busy tenant has the one worker it had.
const readinessWorkers = 2

// readinessOptions are the readiness controller's options: readinessWorkers workers and the
// fair queue, as the helm reconciler's, without which a tenant's wave of a thousand CRs would
// keep another tenant's Ready waiting behind all of theirs.
func readinessOptions() controller.Options {
	return controller.Options{MaxConcurrentReconciles: readinessWorkers, NewQueue: fairqueue.ForWorkers(readinessWorkers)}
}

// setup builds the controller with readinessWorkers workers.
func (r *readinessReconciler) setup(mgr ctrl.Manager) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.gvk)
	return ctrl.NewControllerManagedBy(mgr).
		Named("readiness-" + strings.ToLower(r.gvk.Kind)).
		WithOptions(readinessOptions()).
		For(cr).
		WatchesRawSource(source.Channel(r.outcomes.Notify(), &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func (r *readinessReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.gvk)
	if err := r.reader.Get(ctx, req.NamespacedName, cr); err != nil {
		if apierrors.IsNotFound(err) {
			r.outcomes.Forget(req.NamespacedName)
			r.metrics.Forget(r.gvk.Kind, req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	err := r.sync(ctx, req, cr)
	if !apierrors.IsConflict(err) {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// The cache is behind the CR. Read it from the API server and decide once more, rather
	// than wait for the cache.
	//
	// Why: the helm reconciler tells this controller of a visit's outcome just before
	// helm-operator-plugins applies its own part of the status, at the end of the same
	// reconcile. The fair queue hands a quiet tenant's CR out at once, so its decision is
	// taken on the cached version from before that apply, and the write conflicts. Under an
	// edit wave of 1000 CRs the cache brought the newer version 0.6 s later, on the way of a
	// quiet tenant's edit to its observedGeneration (docs/bench/memory.md, "An edit wave whose
	// conflicting status writes read the CR again (twenty-second)"). The GET is made only after
	// a conflict, never for every event (see reader).
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(r.gvk)
	if err := r.client.Get(ctx, req.NamespacedName, live); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	err = r.sync(ctx, req, live)
	if apierrors.IsConflict(err) {
		// Changed again since: the cache brings the newer version, and its event brings the
		// CR back here.
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(err)
}

// sync decides the manager's status of cr and applies it if it differs from cr's, on the
// condition that the CR is still cr's version.
func (r *readinessReconciler) sync(ctx context.Context, req reconcile.Request, cr *unstructured.Unstructured) error {
	if cr.GetDeletionTimestamp() != nil || (r.selector != nil && !r.selector.Matches(labels.Set(cr.GetLabels()))) {
		return nil
	}
	o, visited := r.outcomes.Get(req.NamespacedName, cr.GetUID())
	if !visited {
		return nil
	}
	applied, appliedSet := o.Applied, o.AppliedSet
	if !appliedSet {
		applied, appliedSet = statusSourcesOf(cr)
	}
	changed := ""
	if appliedSet {
		changed = r.sources.Changed(ctx, cr, applied)
	}
	want := managerStatus(cr, o, r.now(), r.rollout.status(cr), changed)
	r.metrics.Observe(r.gvk.Kind, cr, want.conditions, want.chart)
	if !want.differs(cr) {
		return nil
	}
	return r.client.Status().Patch(ctx, want.applyObject(cr), client.Apply,
		client.FieldOwner(statuscontract.ManagerFieldManager), client.ForceOwnership)
}

// managerFields is the manager's part of a CR's status: the fields and conditions of
// statuscontract.ManagerStatus.
type managerFields struct {
	observedGeneration int64
	failures           int64
	handled            string
	handledSet         bool
	conditions         []metav1.Condition
	// chart is status.chart (chartstatus.go), nil while the release's chart is unknown.
	chart map[string]any
	// sources is status.valuesFrom, nil for a release rendered from no source.
	sources []any
}

// managerStatus decides the manager's status of cr from its visit outcome o and where it
// stands in its kind's chart rollout, rs.
func managerStatus(cr *unstructured.Unstructured, o outcomes.Outcome, now metav1.Time, rs rolloutStatus, sourceChanged string) managerFields {
	conds := statuscontract.Conditions(cr)
	observed, _, _ := unstructured.NestedInt64(cr.Object, "status", statuscontract.FieldObservedGeneration)
	chart := statusChart(cr, o, rs)
	// The revision this write puts in status.chart: the sidecar's RolledOut counts only once
	// it names it, that is once the sidecar has judged the release this visit deployed.
	revision, _ := statuscontract.Number(chart[chartRevision])
	s := statuscontract.State{
		Generation:    cr.GetGeneration(),
		Deployed:      max(observed, o.Deployed),
		Rollout:       statuscontract.Find(conds, statuscontract.RolledOut),
		Revision:      int64(revision),
		SourceChanged: sourceChanged,
	}
	if p := statuscontract.Find(conds, statuscontract.Paused); p != nil && p.Status == metav1.ConditionTrue {
		s.Paused = true
	}
	if o.Failures > 0 {
		s.Failures, s.FailedGeneration, s.Failure = o.Failures, o.FailedGeneration, &o.Failure
	}
	d := statuscontract.Decide(s)
	f := managerFields{observedGeneration: d.ObservedGeneration}
	if o.Failures > 0 && o.FailedGeneration == s.Generation {
		f.failures = o.Failures
	}
	f.handled, f.handledSet = o.Handled, o.HandledSet
	if !o.HandledSet {
		f.handled, f.handledSet, _ = unstructured.NestedString(cr.Object, "status", statuscontract.FieldLastHandledReconcileAt)
	}
	f.chart = chart
	if o.AppliedSet {
		if len(o.Applied) > 0 {
			f.sources = values.StatusSources(o.Applied)
		}
	} else {
		f.sources, _, _ = unstructured.NestedSlice(cr.Object, "status", statuscontract.FieldValuesFrom)
	}
	decided := []metav1.Condition{d.Ready, d.Reconciling, d.Stalled}
	if rs.known {
		decided = append(decided, rs.condition)
	} else if c := statuscontract.Find(conds, statuscontract.ChartRollout); c != nil {
		decided = append(decided, *c) // the previous leader's word stands until the rollout controller's
	}
	for _, c := range decided {
		c.ObservedGeneration = cr.GetGeneration()
		c.Message = refusal.Truncate(c.Message, refusal.MaxConditionMessage)
		statuscontract.KeepTransitionTime(&c, statuscontract.Find(conds, c.Type), now)
		f.conditions = append(f.conditions, c)
	}
	return f
}

// part is f as the manager's part of the status contract (statuscontract.ManagerStatus).
func (f managerFields) part() statuscontract.Part {
	fields := map[string]any{
		statuscontract.FieldObservedGeneration: f.observedGeneration,
		statuscontract.FieldFailures:           f.failures,
	}
	if f.handledSet {
		fields[statuscontract.FieldLastHandledReconcileAt] = f.handled
	}
	if f.chart != nil {
		fields[statuscontract.FieldChart] = f.chart
	}
	if f.sources != nil {
		fields[statuscontract.FieldValuesFrom] = f.sources
	}
	return statuscontract.Part{Fields: fields, Conditions: f.conditions}
}

// differs reports whether cr's status says something else than f.
func (f managerFields) differs(cr *unstructured.Unstructured) bool {
	return !statuscontract.ManagerStatus.Holds(cr, f.part())
}

// applyObject is the server-side apply configuration of f for cr, conditional on cr's
// resourceVersion: the readiness controller decides from the CR it read.
func (f managerFields) applyObject(cr *unstructured.Unstructured) *unstructured.Unstructured {
	return statuscontract.ManagerStatus.ApplyObject(cr, f.part(), true)
}

// statusChart is the status.chart the manager writes for cr: the chart of the release as
// the outcome saw it (or, before this process has seen it deployed, as the status says),
// whether it is behind the carried chart, and the failure mark. Nil when the chart of the
// release is not known yet.
func statusChart(cr *unstructured.Unstructured, o outcomes.Outcome, rs rolloutStatus) map[string]any {
	old, _, _ := unstructured.NestedMap(cr.Object, "status", statuscontract.FieldChart)
	ch := map[string]any{}
	if o.ChartSet {
		ch[chartVersion], ch[chartDigest], ch[chartRevision] = o.Chart.Version, o.Chart.Digest, o.Chart.Revision
		if !o.Chart.Deployed.IsZero() {
			ch[chartLastDeployed] = o.Chart.Deployed.UTC().Format(time.RFC3339)
		}
	} else {
		for _, k := range []string{chartVersion, chartDigest, chartRevision, chartLastDeployed} {
			if v, ok := old[k]; ok {
				ch[k] = v
			}
		}
	}
	digest, _ := ch[chartDigest].(string)
	if digest == "" {
		return nil
	}
	ch[chartBehind] = digest != rs.targetDigest
	failed := rs.failedDigest
	if !rs.known {
		if f, _ := old[chartFailed].(string); f == rs.targetDigest {
			failed = f
		}
	}
	if failed != "" {
		ch[chartFailed] = failed
	}
	baseline := baselineField(rs.baseline)
	if !rs.known {
		baseline, _ = old[chartBaseline].(map[string]any)
	}
	if baseline != nil {
		ch[chartBaseline] = baseline
	}
	return ch
}

// statusSourcesOf reads status.valuesFrom, as the previous leader wrote it; ok is false if
// the CR has none, or one that does not parse.
func statusSourcesOf(cr *unstructured.Unstructured) (sources []valuesfrom.Source, ok bool) {
	list, found, err := unstructured.NestedSlice(cr.Object, "status", statuscontract.FieldValuesFrom)
	if err != nil || !found {
		return nil, false
	}
	for _, item := range list {
		m, _ := item.(map[string]any)
		kind, _ := m[statuscontract.FieldSourceKind].(string)
		name, _ := m[statuscontract.FieldSourceName].(string)
		version, _ := m[statuscontract.FieldSourceResourceVersion].(string)
		sources = append(sources, valuesfrom.Source{Kind: kind, Name: name, ResourceVersion: version})
	}
	return sources, true
}
