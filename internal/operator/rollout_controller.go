package operator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// Event reasons of a chart rollout.
const (
	reasonRolloutFailed = "ChartRolloutFailed"
)

// Requeue periods of the rollout controller: while a rollout is under way it looks again
// this often, for the timeouts and MinReady that no event marks; otherwise rarely.
const (
	rolloutPollActive = 2 * time.Second
	rolloutPollIdle   = time.Minute
	// rolloutBatch is how long events wait to share a plan (planSoon).
	rolloutBatch = time.Second
)

// kindRollout is the chart rollout of one kind: a controller, leader-elected with the
// manager, that observes every CR of the kind (their status.chart and conditions), asks
// rollout.Decide which may move to the chart the operator carries, and acts on the plan:
//
//   - the rollout gate of the kind's pipeline (layer_rolloutgate.go) asks it whether a CR may move
//     (admits, rollsBack); before its first plan nothing moves;
//   - CRs it newly admits, and failed CRs to roll back, are sent to the helm reconciler
//     (wake), whose own watch ignores status changes;
//   - the readiness controller writes each CR's ChartRollout condition and failure mark
//     (status) in status.chart; CRs whose status says otherwise than the plan are sent to it
//     (notify);
//   - a CR that newly failed gets a Warning Event, and a halt a log line that says how to
//     resume; the kind's rollout metrics follow the plan.
//
// It keeps only the last plan in memory: every plan is decided again from the cluster, and a
// failure is marked in the CR's status, so a new leader goes on where the last one was.
type kindRollout struct {
	gvk      schema.GroupVersionKind
	selector labels.Selector
	policy   rollout.Policy
	carried  *rollout.Carried
	version  string // of the carried chart
	reader   client.Reader
	recorder record.EventRecorder
	log      logr.Logger
	now      func() time.Time
	// sources tells whether a CR's valuesFrom sources changed since its release was
	// deployed (inputsPending); nil: none can have.
	sources sourceVersions
	// orderKey is the secret that keys the order of the waves (rollout.Policy.OrderKey);
	// nil: unkeyed (the package's tests).
	orderKey func(context.Context) ([]byte, error)

	wake   chan event.GenericEvent // into the kind's helm reconciler
	notify chan event.GenericEvent // into the kind's readiness controller

	mu      sync.RWMutex
	planned bool
	plan    rollout.Plan

	// upgraded is the ChartRollout message of a CR on the carried chart, the same for all.
	upgraded string
	// seen is what the plans read of each CR, and plans counts the plans; both belong to
	// Reconcile, which the controller never runs twice at once (its one request is the kind).
	seen  map[types.NamespacedName]*observed
	plans uint64
}

// observed is what a plan read of one CR at one resourceVersion: the rollout's view of it
// (chartMember) and its ChartRollout condition. Reconcile reads again only the CRs that
// changed since the last plan. A plan looks at every CR of the kind, and through a wave of
// creates or edits plans come every second or two: reading every CR's status each time cost
// O(N) allocations per plan, O(N^2) through a wave (18% of what the manager allocated
// creating 4000 CRs; docs/bench/findings.md, "The rollout's plans read only changed CRs").
type observed struct {
	resourceVersion string
	member          rollout.Member
	// chartRollout: the CR has a ChartRollout condition, and what it says.
	chartRollout                            bool
	chartRolloutStatus                      metav1.ConditionStatus
	chartRolloutReason, chartRolloutMessage string
	// asked: the readiness controller was asked to write askedStatus at this version.
	asked       bool
	askedStatus rolloutStatus
	// plan is the last plan that saw the CR: the ones the last plan did not see are gone.
	plan uint64
}

func newKindRollout(gvk schema.GroupVersionKind, selector labels.Selector, policy rollout.Policy, carried *chart.Chart,
	reader client.Reader, recorder record.EventRecorder, notify chan event.GenericEvent) *kindRollout {
	digest := rollout.Digest(carried)
	return &kindRollout{gvk: gvk, selector: selector, policy: policy,
		carried: rollout.NewCarried(digest), version: carried.Metadata.Version,
		upgraded: upgradedMessage(carried.Metadata.Version, digest),
		reader:   reader, recorder: recorder, now: time.Now,
		log:  ctrl.Log.WithName("rollout").WithValues("kind", gvk.Kind),
		wake: make(chan event.GenericEvent, 1024), notify: notify,
		seen: map[types.NamespacedName]*observed{}}
}

// upgradedMessage is the ChartRollout message of a CR on the chart of version and digest.
func upgradedMessage(version, digest string) string {
	return fmt.Sprintf("the release is on chart %s (%s), the one the operator carries", version, digest)
}

// observe is what the plan reads of cr: what an earlier plan read, if cr has not changed
// since.
func (k *kindRollout) observe(cr *unstructured.Unstructured) *observed {
	key := types.NamespacedName{Namespace: cr.GetNamespace(), Name: cr.GetName()}
	rv := cr.GetResourceVersion()
	o := k.seen[key]
	if o == nil || rv == "" || o.resourceVersion != rv {
		conds := statuscontract.Conditions(cr)
		o = &observed{resourceVersion: rv, member: memberOf(cr, conds)}
		o.member.InputsPending = k.inputsPending(cr, conds)
		if c := statuscontract.Find(conds, statuscontract.ChartRollout); c != nil {
			o.chartRollout, o.chartRolloutStatus, o.chartRolloutReason, o.chartRolloutMessage = true, c.Status, c.Reason, c.Message
		}
		k.seen[key] = o
	}
	o.plan = k.plans
	return o
}

// ownersInputFailures are the failures that name the input a CR's owner gave it, not its chart:
// a source of spec.valuesFrom that cannot be read (gone, unlabelled) or is past the bound, a
// spec over the bound.
var ownersInputFailures = []string{statuscontract.ReasonValuesFromFailed, statuscontract.ReasonSpecTooLarge}

// inputsPending reports whether cr's owner changed its input since its release was deployed
// (rollout.Member.InputsPending): it is Stalled by one of ownersInputFailures, or a source of
// its values is not at the version the release was rendered from. A CR's status changes as
// its reconcile takes a source's change (its conditions, status.valuesFrom), so the answer
// read at each of its versions (observe) follows the source.
func (k *kindRollout) inputsPending(cr *unstructured.Unstructured, conds []metav1.Condition) bool {
	if c := statuscontract.Find(conds, statuscontract.Stalled); c != nil && c.Status == metav1.ConditionTrue &&
		slices.Contains(ownersInputFailures, c.Reason) {
		return true
	}
	if k.sources == nil {
		return false
	}
	applied, _ := statusSourcesOf(cr)
	return k.sources.Changed(context.Background(), cr, applied) != ""
}

// forgetUnseen drops what was read of the CRs the last plan did not see (deleted ones).
func (k *kindRollout) forgetUnseen() {
	for key, o := range k.seen {
		if o.plan != k.plans {
			delete(k.seen, key)
		}
	}
}

func (k *kindRollout) setup(mgr ctrl.Manager) error {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(k.gvk)
	one := k.planSoon()
	return ctrl.NewControllerManagedBy(mgr).
		Named("rollout-"+strings.ToLower(k.gvk.Kind)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(cr), one)).
		WatchesMetadata(&corev1.Namespace{}, one, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(k)
}

// planSoon is the rollout's event handler: every event of a CR or a Namespace asks for one
// plan of the kind, rolloutBatch later. A plan reads every CR, and through a wave of creates,
// edits or deletes the CRs' events come many a second: plans back to back cost O(N) each,
// for nothing a plan a second later would not see as well. Events within the delay share
// one plan (the queue keeps one request, at its earliest time).
func (k *kindRollout) planSoon() handler.EventHandler {
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: k.gvk.Kind}}
	add := func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) { q.AddAfter(req, rolloutBatch) }
	return handler.Funcs{
		CreateFunc: func(_ context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		UpdateFunc: func(_ context.Context, _ event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		DeleteFunc: func(_ context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
		GenericFunc: func(_ context.Context, _ event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			add(q)
		},
	}
}

// wakeSource is the helm reconciler's extra watch: the CRs the rollout admits or rolls back.
// They are queued at handler.LowPriority, so that a wave of upgrades across the fleet yields
// to the edits people make (fairqueue).
func (k *kindRollout) wakeSource() source.Source {
	return source.Channel(k.wake, handler.Funcs{GenericFunc: enqueueLow})
}

// enqueueLow queues the request for e's object at handler.LowPriority.
func enqueueLow(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	r := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)}
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, r)
		return
	}
	q.Add(r)
}

// Reconcile decides the kind's rollout again, for every CR at once (the request names the
// kind).
func (k *kindRollout) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	// Read in place from the cache (no copy of every CR at each plan): nothing here or in the
	// controllers the CRs are sent to writes to them.
	if err := k.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	canaries, err := k.canaryNamespaces(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	forced, err := k.forcedNamespaces(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	policy := k.policy
	if k.orderKey != nil {
		if policy.OrderKey, err = k.orderKey(ctx); err != nil {
			return reconcile.Result{}, fmt.Errorf("the key of the rollout order: %w", err)
		}
	}
	k.plans++
	crs := make([]*unstructured.Unstructured, 0, len(list.Items))
	seen := make([]*observed, 0, len(list.Items))
	members := make([]rollout.Member, 0, len(list.Items))
	for i := range list.Items {
		cr := &list.Items[i]
		if cr.GetDeletionTimestamp() != nil || (k.selector != nil && !k.selector.Matches(labels.Set(cr.GetLabels()))) {
			continue
		}
		o := k.observe(cr)
		m := o.member
		m.Canary = canaries[cr.GetNamespace()]
		m.NamespaceForced = forced[cr.GetNamespace()]
		crs = append(crs, cr)
		seen = append(seen, o)
		members = append(members, m)
	}
	if len(k.seen) > len(seen) {
		k.forgetUnseen()
	}
	plan := rollout.Decide(policy, k.carried.Digest(), members, k.now())

	k.mu.Lock()
	prev, first := k.plan, !k.planned
	k.plan, k.planned = plan, true
	k.mu.Unlock()

	metrics.RolloutProgress(k.gvk.Kind, plan)
	newlyFailed := map[string]bool{}
	for _, key := range plan.NewlyFailed {
		newlyFailed[key] = true
	}
	for i, cr := range crs {
		m := members[i]
		switch {
		case newlyFailed[m.Key] && !prev.Failed[m.Key]:
			// Told once: until the readiness controller has written its failure mark
			// (status.chart.failedDigest) and the cache has it, the next plans find the CR
			// newly failed again.
			k.recorder.Eventf(cr, corev1.EventTypeWarning, reasonRolloutFailed,
				"failed on chart %s (%s): %s; the rollout of the chart halts", k.version, k.carried.Digest(), failureOf(cr))
			k.send(k.wake, cr) // to roll back, by the policy
		case plan.Admitted[m.Key] && m.Digest != "" && m.Digest != plan.Target && (first || !prev.Admitted[m.Key]):
			// A CR whose chart is not known yet is new (its own event brings the install,
			// which no gate holds) or not yet visited by this process (that visit asks the
			// gate, which the plan admits it to already): a wake would only queue it again.
			k.send(k.wake, cr)
		}
		if o, rs := seen[i], k.statusOf(m, plan); k.asks(o, m, rs) {
			o.asked, o.askedStatus = k.send(k.notify, cr), rs
		}
	}
	switch {
	case plan.Halted && (first || !prev.Halted || len(plan.NewlyFailed) > 0):
		var failed []string
		for key := range plan.Failed {
			failed = append(failed, key)
		}
		k.log.Info("chart rollout halted: CRs not yet on the new chart keep theirs. To resume, ship a fixed chart "+
			"(another digest), or label the failed CRs' Namespaces "+rollout.ForceNamespaceLabel+"="+plan.Target+
			" (their owners may annotate a CR "+rollout.ForceAnnotation+"="+plan.Target+" to retry it; the halt lifts once it is healthy), "+
			"or restart the manager with --rollout="+k.gvk.Kind+"=all to move every CR at once",
			"chart", k.version, "digest", plan.Target, "wave", plan.Wave+1, "waves", len(plan.Waves), "failed", failed)
	case !plan.Halted && plan.Wave != prev.Wave && !plan.Done():
		k.log.Info("chart rollout wave", "chart", k.version, "digest", plan.Target, "wave", plan.Wave+1,
			"waves", len(plan.Waves), "crs", len(plan.Waves[plan.Wave]))
	case plan.Done() && len(members) > 0 && (first || !prev.Done()):
		k.log.Info("chart rollout done", "chart", k.version, "digest", plan.Target, "crs", len(members))
	}
	if plan.Halted || plan.Done() {
		return reconcile.Result{RequeueAfter: rolloutPollIdle}, nil
	}
	return reconcile.Result{RequeueAfter: rolloutPollActive}, nil
}

// forcedNamespaces are the chart digests the Namespaces labelled rollout.ForceNamespaceLabel
// force their CRs to, by Namespace (only a cluster administrator labels Namespaces).
func (k *kindRollout) forcedNamespaces(ctx context.Context) (map[string]string, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := k.reader.List(ctx, list, client.HasLabels{rollout.ForceNamespaceLabel}); err != nil {
		return nil, fmt.Errorf("listing the forced Namespaces: %w", err)
	}
	out := make(map[string]string, len(list.Items))
	for _, ns := range list.Items {
		out[ns.Name] = ns.Labels[rollout.ForceNamespaceLabel]
	}
	return out, nil
}

// canaryNamespaces are the Namespaces labelled rollout.CanaryLabel "true": the CRs in them
// are the canaries (only a cluster administrator labels Namespaces).
func (k *kindRollout) canaryNamespaces(ctx context.Context) (map[string]bool, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := k.reader.List(ctx, list, client.MatchingLabels{rollout.CanaryLabel: "true"}); err != nil {
		return nil, fmt.Errorf("listing the canary Namespaces: %w", err)
	}
	out := make(map[string]bool, len(list.Items))
	for _, ns := range list.Items {
		out[ns.Name] = true
	}
	return out, nil
}

// send hands cr to a controller's channel without blocking this one, and reports whether it
// did: a full channel means that controller is busy, and the next plan sends again what is
// still needed.
func (k *kindRollout) send(ch chan event.GenericEvent, cr client.Object) bool {
	select {
	case ch <- event.GenericEvent{Object: cr}:
		return true
	default:
		return false
	}
}

// failureOf is what cr's conditions say of its failure.
func failureOf(cr *unstructured.Unstructured) string {
	conds := statuscontract.Conditions(cr)
	if c := statuscontract.Find(conds, statuscontract.Stalled); c != nil && c.Status == metav1.ConditionTrue {
		return c.Message
	}
	if c := statuscontract.Find(conds, statuscontract.Ready); c != nil && c.Status != metav1.ConditionTrue && c.Message != "" {
		return "not Ready within the timeout: " + c.Message
	}
	return "not Ready within the timeout"
}

// asks reports whether the readiness controller is to be asked to write rs into the status
// of a CR, as o read it; m is o's member as the plan saw it. Not when the status says rs
// already, nor when it was asked for rs at this version of the CR: the readiness controller
// writes nothing for a CR the helm reconciler has not visited yet (it is woken again by that
// visit), and a plan every second or two asking again for every such CR made 2.2 million
// readiness reconciles in the first 20 minutes of creating 10,000 CRs, and filled the
// channel that the helm reconciler's outcomes wait on.
func (k *kindRollout) asks(o *observed, m rollout.Member, rs rolloutStatus) bool {
	says := m.FailedDigest == rs.failedDigest && m.Baseline == rs.baseline && o.chartRollout &&
		o.chartRolloutStatus == rs.condition.Status && o.chartRolloutReason == rs.condition.Reason &&
		o.chartRolloutMessage == rs.condition.Message
	return !says && !(o.asked && o.askedStatus == rs)
}

// Carries implements pipeline.Gate.
func (k *kindRollout) Carries(c *chart.Chart) bool { return k.carried.Is(c) }

// Admits implements pipeline.Gate.
func (k *kindRollout) Admits(cr client.Object) bool {
	if k.policy.AllAtOnce {
		return true
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if !k.planned {
		return false
	}
	key := cr.GetNamespace() + "/" + cr.GetName()
	return k.plan.Admitted[key] || cr.GetAnnotations()[rollout.ForceAnnotation] == k.plan.Target
}

// RollsBack implements pipeline.Gate.
func (k *kindRollout) RollsBack(cr client.Object) bool {
	if !k.policy.Rollback || k.policy.AllAtOnce {
		return false
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.planned && k.plan.Failed[cr.GetNamespace()+"/"+cr.GetName()] &&
		cr.GetAnnotations()[rollout.ForceAnnotation] != k.plan.Target
}

// status implements rolloutSource, for the readiness controller.
func (k *kindRollout) status(cr *unstructured.Unstructured) rolloutStatus {
	k.mu.RLock()
	plan, planned := k.plan, k.planned
	k.mu.RUnlock()
	if !planned {
		return rolloutStatus{targetVersion: k.version, targetDigest: k.carried.Digest()}
	}
	return k.statusOf(chartMember(cr), plan)
}

// statusOf is what plan says of the CR observed as m.
func (k *kindRollout) statusOf(m rollout.Member, plan rollout.Plan) rolloutStatus {
	rs := rolloutStatus{targetVersion: k.version, targetDigest: k.carried.Digest(), known: true}
	_, inPlan := plan.Admitted[m.Key]
	var reason, msg string
	switch {
	case !inPlan && m.Digest != plan.Target:
		reason, msg = statuscontract.ReasonWaiting, "not in the rollout's plan yet"
	case m.Digest == plan.Target && !plan.Failed[m.Key]:
		// Most CRs, most of the time: the message is the same for all (plan.Describe's is
		// not the one written).
		reason = statuscontract.ReasonUpgraded
	default:
		_, reason, msg = plan.Describe(m.Key, m)
	}
	if reason == statuscontract.ReasonUpgraded {
		msg = k.upgraded
		if plan.Target != k.carried.Digest() || msg == "" {
			msg = upgradedMessage(k.version, plan.Target)
		}
	}
	status := metav1.ConditionFalse
	if reason == statuscontract.ReasonUpgraded {
		status = metav1.ConditionTrue
	}
	rs.condition = metav1.Condition{Type: statuscontract.ChartRollout, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: m.Generation}
	if plan.Failed[m.Key] {
		rs.failedDigest = plan.Target
	}
	rs.baseline = plan.Baseline(m)
	return rs
}
