package workloadstatus

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// Workload is the part of a Deployment, StatefulSet or DaemonSet that feeds a
// CR's status: its replica counts, and what says whether it has rolled out.
type Workload struct {
	Kind              string
	Name              string
	Selector          *metav1.LabelSelector
	Replicas          int32
	ReadyReplicas     int32
	AvailableReplicas int32
	// Generation and ObservedGeneration are the workload's own: its controller has seen its
	// latest spec when they are equal.
	Generation         int64
	ObservedGeneration int64
	// Desired is how many replicas the spec asks for; Updated how many run the latest spec.
	Desired int32
	Updated int32
}

// Kind order for choosing the primary workload, whose selector the CR's scale
// subresource exposes.
const (
	kindDeployment  = "Deployment"
	kindStatefulSet = "StatefulSet"
	kindDaemonSet   = "DaemonSet"
)

var kindRank = map[string]int{kindDeployment: 0, kindStatefulSet: 1, kindDaemonSet: 2}

// kindFields are the fields of a Workload that each kind keeps under names of its own; the
// rest the three kinds keep alike, and newWorkload reads them once for all.
type kindFields struct {
	selector           *metav1.LabelSelector
	observedGeneration int64
	desired            int32
	replicas           int32
	ready              int32
	available          int32
	updated            int32
}

// newWorkload is the Workload of obj, of kind kind, with f read from obj by its kind. It takes
// obj as an interface of a pointer and f by value, so that reading a workload allocates
// nothing (rolloutDone reads one on every workload update the sidecar sees).
func newWorkload(kind string, obj metav1.Object, f kindFields) Workload {
	return Workload{
		Kind:               kind,
		Name:               obj.GetName(),
		Selector:           f.selector,
		Replicas:           f.replicas,
		ReadyReplicas:      f.ready,
		AvailableReplicas:  f.available,
		Generation:         obj.GetGeneration(),
		ObservedGeneration: f.observedGeneration,
		Desired:            f.desired,
		Updated:            f.updated,
	}
}

// FromDeployment extracts a Deployment's counts. spec.replicas defaults to 1 in the API: an
// object read without defaulting must not be taken to want none.
func FromDeployment(d *appsv1.Deployment) Workload {
	return newWorkload(kindDeployment, d, kindFields{
		selector:           d.Spec.Selector,
		observedGeneration: d.Status.ObservedGeneration,
		desired:            ptr.Deref(d.Spec.Replicas, 1),
		replicas:           d.Status.Replicas,
		ready:              d.Status.ReadyReplicas,
		available:          d.Status.AvailableReplicas,
		updated:            d.Status.UpdatedReplicas,
	})
}

// FromStatefulSet extracts a StatefulSet's counts, named as a Deployment's are.
func FromStatefulSet(s *appsv1.StatefulSet) Workload {
	return newWorkload(kindStatefulSet, s, kindFields{
		selector:           s.Spec.Selector,
		observedGeneration: s.Status.ObservedGeneration,
		desired:            ptr.Deref(s.Spec.Replicas, 1),
		replicas:           s.Status.Replicas,
		ready:              s.Status.ReadyReplicas,
		available:          s.Status.AvailableReplicas,
		updated:            s.Status.UpdatedReplicas,
	})
}

// FromDaemonSet extracts a DaemonSet's counts: a DaemonSet wants one pod per
// eligible node, so its "replicas" is the number of nodes it should run on.
func FromDaemonSet(d *appsv1.DaemonSet) Workload {
	return newWorkload(kindDaemonSet, d, kindFields{
		selector:           d.Spec.Selector,
		observedGeneration: d.Status.ObservedGeneration,
		desired:            d.Status.DesiredNumberScheduled,
		replicas:           d.Status.DesiredNumberScheduled,
		ready:              d.Status.NumberReady,
		available:          d.Status.NumberAvailable,
		updated:            d.Status.UpdatedNumberScheduled,
	})
}

// rollout says what w still waits for, "" once it has rolled out: its controller has seen
// its latest spec, and every desired replica runs that spec and is available, with no old
// one left. A workload that has rolled out costs no allocation: rolloutDone asks this of every
// workload update the sidecar sees.
func (w Workload) rollout() string {
	switch {
	case w.ObservedGeneration < w.Generation:
		return fmt.Sprintf("%s %s: its controller has not seen the new spec yet", w.Kind, w.Name)
	case w.Updated < w.Desired:
		return fmt.Sprintf("%s %s: %d of %d replicas updated", w.Kind, w.Name, w.Updated, w.Desired)
	case w.Replicas > w.Desired:
		return fmt.Sprintf("%s %s: %d old replicas still running", w.Kind, w.Name, w.Replicas-w.Desired)
	case w.AvailableReplicas < w.Desired:
		return fmt.Sprintf("%s %s: %d of %d replicas available", w.Kind, w.Name, w.AvailableReplicas, w.Desired)
	}
	return ""
}

// Status holds the CR status fields the sidecar owns (statuscontract.SidecarStatus). Every
// other status field belongs to the manager (docs/status.md).
type Status struct {
	Replicas          int32
	ReadyReplicas     int32
	AvailableReplicas int32
	// Selector is the primary workload's label selector in string form; the
	// CRDs' scale subresource reads it through labelSelectorPath
	// .status.selector so that `kubectl scale` and HPAs can find the pods.
	Selector string
	// RolledOut says whether the workloads of the release deployed at its
	// observedGeneration, and at the revision its message names, have rolled
	// out; the manager's Ready depends on it.
	RolledOut metav1.Condition
}

// Names of the owned fields under .status: statuscontract.SidecarStatus.
const (
	fieldReplicas          = statuscontract.FieldReplicas
	fieldReadyReplicas     = statuscontract.FieldReadyReplicas
	fieldAvailableReplicas = statuscontract.FieldAvailableReplicas
	fieldSelector          = statuscontract.FieldSelector
)

// ComputeStatus derives the desired owned status of a CR from the workloads of
// its release, deployed at generation deployed (the manager's
// status.observedGeneration; 0 if none yet) and at release revision revision
// (statuscontract.DeployedRevision), which RolledOut names: an upgrade that
// leaves the generation as it was (a source of spec.valuesFrom changed) is
// told from the release before it by the revision alone. With no workloads the
// counts are zero rather than absent, so that "scaled to nothing" is
// distinguishable from "not computed yet".
func ComputeStatus(deployed, revision int64, workloads []Workload) Status {
	st := Status{RolledOut: metav1.Condition{Type: statuscontract.RolledOut, ObservedGeneration: deployed}}
	sorted := make([]Workload, len(workloads))
	copy(sorted, workloads)
	sort.Slice(sorted, func(i, j int) bool {
		if ri, rj := kindRank[sorted[i].Kind], kindRank[sorted[j].Kind]; ri != rj {
			return ri < rj
		}
		return sorted[i].Name < sorted[j].Name
	})
	var waiting []string
	for _, w := range sorted {
		st.Replicas += w.Replicas
		st.ReadyReplicas += w.ReadyReplicas
		st.AvailableReplicas += w.AvailableReplicas
		if msg := w.rollout(); msg != "" {
			waiting = append(waiting, msg)
		}
	}
	switch {
	case deployed == 0:
		st.RolledOut.Status, st.RolledOut.Reason, st.RolledOut.Message =
			metav1.ConditionUnknown, statuscontract.ReasonNothingDeployed, "no release is deployed yet"
	case len(waiting) == 0:
		st.RolledOut.Status, st.RolledOut.Reason, st.RolledOut.Message =
			metav1.ConditionTrue, statuscontract.ReasonRolloutComplete, fmt.Sprintf("%d workload(s) rolled out", len(sorted))
	default:
		msg := waiting[0]
		if len(waiting) > 1 {
			msg += fmt.Sprintf(" (and %d more workload(s) rolling out)", len(waiting)-1)
		}
		st.RolledOut.Status, st.RolledOut.Reason, st.RolledOut.Message = metav1.ConditionFalse, statuscontract.ReasonRollingOut, msg
	}
	if deployed != 0 {
		st.RolledOut.Message = statuscontract.RolloutMessage(revision, st.RolledOut.Message)
	}
	if len(sorted) == 0 {
		return st
	}
	if sel := sorted[0].Selector; sel != nil {
		// The API server rejects apps/v1 workloads with an invalid selector, so
		// the error branch is unreachable for real objects; an empty selector
		// string is the safe answer for the scale subresource if it happens.
		if s, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			st.Selector = s.String()
		}
	}
	return st
}

// part is desired as the sidecar's part of the status contract
// (statuscontract.SidecarStatus). Zeros and an empty selector are applied, not omitted:
// applying without a field would give up its ownership and leave the old value.
func part(desired Status) statuscontract.Part {
	return statuscontract.Part{
		Fields: map[string]any{
			fieldReplicas:          int64(desired.Replicas),
			fieldReadyReplicas:     int64(desired.ReadyReplicas),
			fieldAvailableReplicas: int64(desired.AvailableReplicas),
			fieldSelector:          desired.Selector,
		},
		Conditions: []metav1.Condition{desired.RolledOut},
	}
}

// differs reports whether cr's status holds other values than desired in the
// fields the sidecar owns. A missing or mistyped field counts as different.
func differs(cr *unstructured.Unstructured, desired Status) bool {
	return !statuscontract.SidecarStatus.Holds(cr, part(desired))
}

// applyObject is the server-side apply configuration of the sidecar's status
// fields of cr: only those fields, so that it cannot touch the manager's.
func applyObject(cr *unstructured.Unstructured, desired Status) *unstructured.Unstructured {
	return statuscontract.SidecarStatus.ApplyObject(cr, part(desired), false)
}

// ownedStatusFields returns what of cr's status the sync reads or writes, for
// cheap change detection on CR events: the owned fields, RolledOut, and the
// manager's observedGeneration and release revision, whose every change needs
// a new RolledOut.
func ownedStatusFields(cr *unstructured.Unstructured) [7]interface{} {
	st, _ := cr.Object["status"].(map[string]interface{})
	var rolledOut interface{}
	if c := statuscontract.Find(statuscontract.Conditions(cr), statuscontract.RolledOut); c != nil {
		rolledOut = *c
	}
	return [7]interface{}{
		st[fieldReplicas], st[fieldReadyReplicas], st[fieldAvailableReplicas],
		st[statuscontract.FieldObservedGeneration], st[fieldSelector], rolledOut,
		statuscontract.DeployedRevision(cr),
	}
}
