package statuscontract

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Condition types of the contract.
const (
	// Ready, Reconciling and Stalled are written by the manager (kstatus' types).
	Ready       = "Ready"
	Reconciling = "Reconciling"
	Stalled     = "Stalled"
	// RolledOut is written by the sidecar: every workload of the release deployed at the
	// condition's observedGeneration, and at the release revision its message names
	// (RolloutMessage), has rolled out.
	RolledOut = "RolledOut"
	// Paused is helm-operator-plugins' condition, True while the pause annotation is set.
	Paused = "Paused"
	// ChartRollout is written by the manager: True when the CR's release is on the chart the
	// operator carries; False while a rollout of that chart has not reached it, with why
	// (docs/rollouts.md).
	ChartRollout = "ChartRollout"
)

// Annotations users set on a CR.
const (
	// PauseAnnotation "true" stops every reconcile of the CR.
	PauseAnnotation = "warpdrive.transwarp.io/pause-reconcile"
	// RequestAnnotation forces one reconcile each time its value changes; the value handled is
	// echoed in status.lastHandledReconcileAt (Flux's convention).
	RequestAnnotation = "warpdrive.transwarp.io/reconcile-requested-at"
)

// Field managers of the server-side applies to a CR's status. Each owns disjoint fields,
// declared in StatusOwners.
const (
	// HelmFieldManager owns helm-operator-plugins' conditions and status.deployedRelease.
	HelmFieldManager = "warpdrive-helm"
	// ManagerFieldManager owns observedGeneration, failures, lastHandledReconcileAt and the
	// Ready, Reconciling and Stalled conditions.
	ManagerFieldManager = "warpdrive-manager"
	// SidecarFieldManager owns the replica counts, the selector and RolledOut.
	SidecarFieldManager = "warpdrive-sidecar"
)

// MaxTries is how many failed attempts in a row at one generation make a CR Stalled.
// Attempts go on after it, with the controller's exponential back-off.
const MaxTries = 3

// Reasons of the manager's conditions (Decide; the table of docs/status.md).
const (
	// ReasonReady: Ready True, Reconciling False: the generation is deployed and its
	// workloads have rolled out.
	ReasonReady = "Ready"
	// ReasonInstallPending, ReasonUpgradePending: Ready False, Reconciling True: the install
	// (nothing deployed yet) or the upgrade of the CR's generation is pending or under way.
	ReasonInstallPending = "InstallPending"
	ReasonUpgradePending = "UpgradePending"
	// ReasonRollingOut: Ready False, Reconciling True: the generation is deployed and its
	// workloads are rolling out. The sidecar's RolledOut False has it too.
	ReasonRollingOut = "RollingOut"
	// ReasonRetryingAfterFailure: Reconciling True after fewer than MaxTries failed attempts
	// at the generation; Ready False has the failure's reason.
	ReasonRetryingAfterFailure = "RetryingAfterFailure"
	// ReasonPaused: Reconciling False, and Ready False unless the generation was deployed and
	// rolled out, while the CR has the pause annotation.
	ReasonPaused = "Paused"
	// ReasonStalled: Reconciling False while Stalled is True.
	ReasonStalled = "Stalled"
	// ReasonProgressing is declared but Decide sets it on no condition.
	ReasonProgressing = "Progressing"
	// ReasonNotStalled: Stalled False.
	ReasonNotStalled = "NotStalled"
	// ReasonValuesSourceChanged: a source of spec.valuesFrom changed since the release was
	// rendered from it, and the upgrade that applies it is pending.
	ReasonValuesSourceChanged = "ValuesSourceChanged"
	// The reasons of a CR whose render passed a bound of the manager's (--render-*), one per
	// bound, so that `kubectl get` names it: Stalled until the spec, a source or the chart
	// changes.
	ReasonRenderMemoryExceeded = "RenderMemoryExceeded"
	ReasonRenderTimeExceeded   = "RenderTimeExceeded"
	ReasonRenderOutputExceeded = "RenderOutputExceeded"
	ReasonRenderCrashed        = "RenderCrashed"
	// ReasonQuarantined: the manager died twice in a row while rendering this generation of
	// the CR (an OOM kill, a panic); Stalled until the spec changes, so that the operator does
	// not crash-loop on it.
	ReasonQuarantined = "Quarantined"
	// ReasonReleaseNameTaken: a Helm release of the CR's name has records in its namespace
	// that the operator cannot prove its own (installed by the helm CLI, Flux or another
	// tool): it neither installs over them nor takes their objects.
	ReasonReleaseNameTaken = "ReleaseNameTaken"
	// ReasonObjectNotOwned: an object the release would make exists, and nothing proves it
	// the release's (an owner reference to the CR; for a cluster-scoped object, the CR named
	// in its owner annotations): the operator does not take it over by its Helm annotations,
	// which anyone who may write the object can set.
	ReasonObjectNotOwned = "ObjectNotOwned"
)

// Failure is the last failed attempt at a generation.
type Failure struct {
	// Reason names what failed, in CamelCase: InstallFailed, UpgradeFailed, ...
	Reason string
	// Step is what was attempted, for messages: "install", "upgrade", "drift repair".
	Step string
	// Message is Helm's error.
	Message string
	// Terminal says that trying again cannot mend it; only a change of the CR can (its spec
	// over --max-spec-values). Such a CR is Stalled at once and not retried, and its
	// message counts no attempts, so that its status is written once rather than at each
	// retry: every write of it sends the whole CR to every watcher.
	Terminal bool
}

// State is what the manager knows of a CR when it decides.
type State struct {
	// Generation is the CR's metadata.generation now.
	Generation int64
	// Deployed is status.observedGeneration as it stands: the generation whose spec is in
	// the deployed release, or one the manager gave up on. 0 before the first success.
	Deployed int64
	// Failures counts the failed attempts in a row at FailedGeneration; Failure is the last.
	Failures         int64
	FailedGeneration int64
	Failure          *Failure
	// Paused is helm-operator-plugins' Paused condition being True.
	Paused bool
	// Rollout is the sidecar's RolledOut condition, nil before it wrote one.
	Rollout *metav1.Condition
	// Revision is the revision of the deployed release, as status.chart.revision says it
	// with this decision (DeployedRevision); 0 if not known.
	Revision int64
	// SourceChanged names a source of spec.valuesFrom whose version is not the one the
	// deployed release was rendered from ("Secret \"db\""); "" if none.
	SourceChanged string
}

// Decision is the manager's part of the status.
type Decision struct {
	ObservedGeneration int64
	Ready              metav1.Condition
	Reconciling        metav1.Condition
	Stalled            metav1.Condition
}

// Decide is the one place that says what a CR's status means. It is level-based: the same
// state gives the same decision, whoever asks and however often.
func Decide(s State) Decision {
	d := Decision{ObservedGeneration: s.Deployed}
	set := func(c *metav1.Condition, typ string, status metav1.ConditionStatus, reason, msg string) {
		*c = metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation}
	}
	notStalled := func() { set(&d.Stalled, Stalled, metav1.ConditionFalse, ReasonNotStalled, "") }
	step, pending := "upgrade", ReasonUpgradePending
	if s.Deployed == 0 {
		step, pending = "install", ReasonInstallPending
	}
	failing := s.Failure != nil && s.Failures > 0 && s.FailedGeneration == s.Generation
	if failing && s.Failure.Step != "" {
		step = s.Failure.Step
	}

	switch {
	case s.Paused:
		notStalled()
		set(&d.Reconciling, Reconciling, metav1.ConditionFalse, ReasonPaused,
			fmt.Sprintf("reconciling is paused by the annotation %s", PauseAnnotation))
		if s.SourceChanged != "" {
			set(&d.Ready, Ready, metav1.ConditionFalse, ReasonPaused,
				fmt.Sprintf("reconciling is paused; the change of %s waits", s.SourceChanged))
		} else if s.Deployed == s.Generation && rolledOut(s) {
			set(&d.Ready, Ready, metav1.ConditionTrue, ReasonReady, "the release of this generation is deployed and rolled out; reconciling is paused")
		} else {
			set(&d.Ready, Ready, metav1.ConditionFalse, ReasonPaused,
				fmt.Sprintf("reconciling is paused; generation %d waits", s.Generation))
		}

	case failing && s.Failure.Terminal:
		d.ObservedGeneration = s.Generation
		msg := fmt.Sprintf("%s of generation %d refused: %s", step, s.Generation, s.Failure.Message)
		set(&d.Stalled, Stalled, metav1.ConditionTrue, s.Failure.Reason, msg)
		set(&d.Reconciling, Reconciling, metav1.ConditionFalse, ReasonStalled, "progress needs a change of the spec")
		set(&d.Ready, Ready, metav1.ConditionFalse, s.Failure.Reason, msg)

	case failing && s.Failures >= MaxTries:
		// Given up on: observedGeneration says so, so that kstatus reads Failed rather
		// than waiting for a generation that will not come without a change.
		d.ObservedGeneration = s.Generation
		msg := fmt.Sprintf("%s of generation %d failed %d times, retrying with back-off: %s",
			step, s.Generation, s.Failures, s.Failure.Message)
		set(&d.Stalled, Stalled, metav1.ConditionTrue, s.Failure.Reason, msg)
		set(&d.Reconciling, Reconciling, metav1.ConditionFalse, ReasonStalled, "progress needs a change of the spec or of the cluster")
		set(&d.Ready, Ready, metav1.ConditionFalse, s.Failure.Reason, msg)

	case failing:
		notStalled()
		msg := fmt.Sprintf("%s of generation %d failed %d time(s), retrying: %s",
			step, s.Generation, s.Failures, s.Failure.Message)
		set(&d.Reconciling, Reconciling, metav1.ConditionTrue, ReasonRetryingAfterFailure, msg)
		set(&d.Ready, Ready, metav1.ConditionFalse, s.Failure.Reason, msg)

	case s.Deployed != s.Generation:
		notStalled()
		msg := fmt.Sprintf("%s of generation %d pending", step, s.Generation)
		set(&d.Reconciling, Reconciling, metav1.ConditionTrue, pending, msg)
		set(&d.Ready, Ready, metav1.ConditionFalse, pending, msg)

	case s.SourceChanged != "":
		notStalled()
		msg := fmt.Sprintf("%s changed; the upgrade of generation %d that applies it is pending", s.SourceChanged, s.Generation)
		set(&d.Reconciling, Reconciling, metav1.ConditionTrue, ReasonValuesSourceChanged, msg)
		set(&d.Ready, Ready, metav1.ConditionFalse, ReasonValuesSourceChanged, msg)

	case rolledOut(s):
		notStalled()
		set(&d.Reconciling, Reconciling, metav1.ConditionFalse, ReasonReady, "")
		set(&d.Ready, Ready, metav1.ConditionTrue, ReasonReady,
			fmt.Sprintf("generation %d is deployed and rolled out", s.Generation))

	default:
		notStalled()
		msg := fmt.Sprintf("generation %d is deployed; waiting for its workloads to roll out", s.Generation)
		if _, said, ok := judged(s); ok && said != "" {
			msg = fmt.Sprintf("generation %d is deployed; %s", s.Generation, said)
		}
		set(&d.Reconciling, Reconciling, metav1.ConditionTrue, ReasonRollingOut, msg)
		set(&d.Ready, Ready, metav1.ConditionFalse, ReasonRollingOut, msg)
	}
	return d
}

// rolledOut reports whether the sidecar found the workloads of the deployed release rolled
// out.
func rolledOut(s State) bool {
	c, _, ok := judged(s)
	return ok && c.Status == metav1.ConditionTrue
}

// judged is the sidecar's RolledOut and what it says, if it judged the release deployed now:
// the one at the deployed generation and at the deployed revision. A report on an older
// generation says nothing about this one; nor does one on an older release of the same
// generation: an upgrade with no edit of the spec (a source of spec.valuesFrom changed, the
// carried chart rolled out) leaves the generation as it was, and the sidecar's word on the
// release before it would read as a word on the new one until the sidecar sees the upgrade
// (TestSourceChangeReadyWaitsForTheRollout).
func judged(s State) (c *metav1.Condition, said string, ok bool) {
	if s.Rollout == nil || s.Rollout.ObservedGeneration != s.Deployed {
		return nil, "", false
	}
	revision, said := JudgedRevision(s.Rollout)
	return s.Rollout, said, revision == s.Revision
}

// judgedPrefix heads the message of a RolledOut condition on a known release revision.
const judgedPrefix = "release revision "

// RolloutMessage is the message of a RolledOut condition on the workloads of the release at
// revision (DeployedRevision), saying msg: "release revision 7: 1 workload(s) rolled out".
// Revision 0, not known, is not named.
//
// The revision is in the message because a condition has no other field for it, and a field
// of its own under status would need every CRD's status schema to keep it.
func RolloutMessage(revision int64, msg string) string {
	if revision <= 0 {
		return msg
	}
	return judgedPrefix + strconv.FormatInt(revision, 10) + ": " + msg
}

// JudgedRevision reads a RolledOut condition that RolloutMessage wrote: the release revision
// it judged, 0 if it names none, and what it says of it.
func JudgedRevision(c *metav1.Condition) (revision int64, msg string) {
	rest, ok := strings.CutPrefix(c.Message, judgedPrefix)
	if !ok {
		return 0, c.Message
	}
	number, said, ok := strings.Cut(rest, ": ")
	revision, err := strconv.ParseInt(number, 10, 64)
	if !ok || err != nil || revision <= 0 {
		return 0, c.Message
	}
	return revision, said
}

// DeployedRevision is the revision of cr's release as the manager last saw it deployed,
// status.chart.revision; 0 if the status has none.
func DeployedRevision(cr *unstructured.Unstructured) int64 {
	status, _ := cr.Object["status"].(map[string]any)
	chart, _ := status[FieldChart].(map[string]any)
	n, _ := Number(chart[FieldChartRevision])
	return int64(n)
}

// Conditions reads status.conditions of a CR. Entries that do not parse are left out.
//
// It reads the fields in place, with neither a copy of the list nor reflection: the rollout
// controller reads every CR's conditions at each plan, and plans on every CR event, so through
// a wave of N creates this runs O(N^2) times (reading in place halved what the manager
// allocated in a wave of 500 creates, 21.4 -> 10.7 GB:
// docs/bench/findings.md, "The rollout's conditions read in place").
func Conditions(cr *unstructured.Unstructured) []metav1.Condition {
	field, _, _ := unstructured.NestedFieldNoCopy(cr.Object, "status", FieldConditions)
	list, _ := field.([]any)
	out := make([]metav1.Condition, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if c, ok := condition(m); ok {
			out = append(out, c)
		}
	}
	return out
}

// condition is one entry of status.conditions; ok is false if a field has the wrong type, as
// the unstructured converter would refuse it.
func condition(m map[string]any) (c metav1.Condition, ok bool) {
	str := func(key string, into *string) bool {
		v, found := m[key]
		if !found || v == nil {
			return true
		}
		s, isString := v.(string)
		*into = s
		return isString
	}
	var status, since string
	if !str("type", &c.Type) || !str("status", &status) || !str("reason", &c.Reason) ||
		!str("message", &c.Message) || !str("lastTransitionTime", &since) {
		return c, false
	}
	c.Status = metav1.ConditionStatus(status)
	switch g := m["observedGeneration"].(type) {
	case nil:
	case int64:
		c.ObservedGeneration = g
	case float64:
		c.ObservedGeneration = int64(g)
	default:
		return c, false
	}
	if since != "" {
		if err := c.LastTransitionTime.UnmarshalQueryParameter(since); err != nil {
			return c, false
		}
	}
	return c, true
}

// Find returns the condition of type typ, or nil.
func Find(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// KeepTransitionTime gives c the lastTransitionTime of old when its status has not changed,
// and now otherwise, as the API conventions ask.
func KeepTransitionTime(c *metav1.Condition, old *metav1.Condition, now metav1.Time) {
	if old != nil && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
		c.LastTransitionTime = old.LastTransitionTime
		return
	}
	c.LastTransitionTime = now
}

// SameCondition reports whether two conditions say the same, ignoring lastTransitionTime.
func SameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason &&
		a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration
}
