package workloadstatus

import (
	"encoding/json"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Workload is the part of a Deployment, StatefulSet or DaemonSet that feeds a
// CR's status.
type Workload struct {
	Kind              string
	Name              string
	Selector          *metav1.LabelSelector
	Replicas          int32
	ReadyReplicas     int32
	AvailableReplicas int32
}

// Kind order for choosing the primary workload, whose selector the CR's scale
// subresource exposes.
const (
	kindDeployment  = "Deployment"
	kindStatefulSet = "StatefulSet"
	kindDaemonSet   = "DaemonSet"
)

var kindRank = map[string]int{kindDeployment: 0, kindStatefulSet: 1, kindDaemonSet: 2}

// FromDeployment extracts a Deployment's counts.
func FromDeployment(d *appsv1.Deployment) Workload {
	return Workload{
		Kind:              kindDeployment,
		Name:              d.Name,
		Selector:          d.Spec.Selector,
		Replicas:          d.Status.Replicas,
		ReadyReplicas:     d.Status.ReadyReplicas,
		AvailableReplicas: d.Status.AvailableReplicas,
	}
}

// FromStatefulSet extracts a StatefulSet's counts.
func FromStatefulSet(s *appsv1.StatefulSet) Workload {
	return Workload{
		Kind:              kindStatefulSet,
		Name:              s.Name,
		Selector:          s.Spec.Selector,
		Replicas:          s.Status.Replicas,
		ReadyReplicas:     s.Status.ReadyReplicas,
		AvailableReplicas: s.Status.AvailableReplicas,
	}
}

// FromDaemonSet extracts a DaemonSet's counts: a DaemonSet wants one pod per
// eligible node, so its "replicas" is the number of nodes it should run on.
func FromDaemonSet(d *appsv1.DaemonSet) Workload {
	return Workload{
		Kind:              kindDaemonSet,
		Name:              d.Name,
		Selector:          d.Spec.Selector,
		Replicas:          d.Status.DesiredNumberScheduled,
		ReadyReplicas:     d.Status.NumberReady,
		AvailableReplicas: d.Status.NumberAvailable,
	}
}

// Status holds the CR status fields the sidecar owns. Every other status
// field (conditions, deployedRelease) belongs to the helm-operator.
type Status struct {
	Replicas           int32
	ReadyReplicas      int32
	AvailableReplicas  int32
	ObservedGeneration int64
	// Selector is the primary workload's label selector in string form; the
	// CRDs' scale subresource reads it through labelSelectorPath
	// .status.selector so that `kubectl scale` and HPAs can find the pods.
	Selector string
}

// Names of the owned fields under .status.
const (
	fieldReplicas           = "replicas"
	fieldReadyReplicas      = "readyReplicas"
	fieldAvailableReplicas  = "availableReplicas"
	fieldObservedGeneration = "observedGeneration"
	fieldSelector           = "selector"
)

// ComputeStatus derives the desired owned status of a CR at generation from
// the workloads of its release. With no workloads the counts are zero rather
// than absent, so that "scaled to nothing" is distinguishable from "not
// computed yet".
func ComputeStatus(generation int64, workloads []Workload) Status {
	st := Status{ObservedGeneration: generation}
	if len(workloads) == 0 {
		return st
	}
	sorted := make([]Workload, len(workloads))
	copy(sorted, workloads)
	sort.Slice(sorted, func(i, j int) bool {
		if ri, rj := kindRank[sorted[i].Kind], kindRank[sorted[j].Kind]; ri != rj {
			return ri < rj
		}
		return sorted[i].Name < sorted[j].Name
	})
	for _, w := range sorted {
		st.Replicas += w.Replicas
		st.ReadyReplicas += w.ReadyReplicas
		st.AvailableReplicas += w.AvailableReplicas
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

// StatusPatch returns the JSON merge patch that brings cr's owned status
// fields to desired, or nil when they already hold those values. The patch
// contains only the owned fields that differ, never anything else, so it
// cannot clobber the helm-operator's conditions or deployedRelease. A missing
// or mistyped field counts as different.
func StatusPatch(cr *unstructured.Unstructured, desired Status) ([]byte, error) {
	current, _ := cr.Object["status"].(map[string]interface{})
	diff := map[string]interface{}{}
	setIfDiffers := func(field string, want interface{}) {
		if !fieldEquals(current[field], want) {
			diff[field] = want
		}
	}
	setIfDiffers(fieldReplicas, int64(desired.Replicas))
	setIfDiffers(fieldReadyReplicas, int64(desired.ReadyReplicas))
	setIfDiffers(fieldAvailableReplicas, int64(desired.AvailableReplicas))
	setIfDiffers(fieldObservedGeneration, desired.ObservedGeneration)
	setIfDiffers(fieldSelector, desired.Selector)
	if len(diff) == 0 {
		return nil, nil
	}
	return json.Marshal(map[string]interface{}{"status": diff})
}

// ownedStatusFields returns the raw owned fields of cr's status, for cheap
// change detection on CR events.
func ownedStatusFields(cr *unstructured.Unstructured) [5]interface{} {
	st, _ := cr.Object["status"].(map[string]interface{})
	return [5]interface{}{
		st[fieldReplicas], st[fieldReadyReplicas], st[fieldAvailableReplicas],
		st[fieldObservedGeneration], st[fieldSelector],
	}
}

// fieldEquals compares a value decoded from JSON with a desired value. JSON
// numbers arrive as int64 from the API machinery's decoder but may be float64
// or another int type from other sources; they compare by value.
func fieldEquals(got, want interface{}) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		return ok && g == w
	case int64:
		switch g := got.(type) {
		case int64:
			return g == w
		case int32:
			return int64(g) == w
		case int:
			return int64(g) == w
		case float64:
			return g == float64(w)
		}
	}
	return false
}
