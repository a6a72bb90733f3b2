package operator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func crAt(gen int64, status map[string]any) *unstructured.Unstructured {
	u := actiontest.Memcached(status)
	u.SetGeneration(gen)
	u.SetUID("uid-1")
	return u
}

// The manager's status of a CR: decided from the outcome, nothing written when it says
// the same already, and the apply carries the CR's resourceVersion as a precondition.
func TestManagerStatus(t *testing.T) {
	now := metav1.Unix(1000, 0)
	cr := crAt(2, map[string]any{"observedGeneration": int64(1), "conditions": []any{
		map[string]any{"type": "RolledOut", "status": "True", "observedGeneration": int64(2)}}})
	cr.SetResourceVersion("42")
	f := managerStatus(cr, outcomes.Outcome{UID: "uid-1", Deployed: 2, Handled: "x", HandledSet: true}, now, rolloutStatus{}, "")
	if f.observedGeneration != 2 || f.failures != 0 || f.handled != "x" {
		t.Fatalf("manager fields %+v", f)
	}
	if ready := statuscontract.Find(f.conditions, statuscontract.Ready); ready == nil || ready.Status != metav1.ConditionTrue || !ready.LastTransitionTime.Equal(&now) {
		t.Fatalf("Ready %+v, want True since now", ready)
	}
	if !f.differs(cr) {
		t.Fatal("a CR at observedGeneration 1 does not differ from a decision for 2")
	}
	apply := f.applyObject(cr)
	if apply.GetResourceVersion() != "42" {
		t.Errorf("apply without the resourceVersion precondition: %v", apply.Object["metadata"])
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(apply.Object, "status", "replicas"); found {
		t.Error("the manager applies a field of the sidecar's")
	}
	// The same status again, beside the sidecar's condition: no write.
	status := apply.Object["status"].(map[string]any)
	status["conditions"] = append(status["conditions"].([]any),
		map[string]any{"type": "RolledOut", "status": "True", "observedGeneration": int64(2)})
	cr.Object["status"] = status
	if managerStatus(cr, outcomes.Outcome{UID: "uid-1", Deployed: 2, Handled: "x", HandledSet: true}, metav1.Unix(2000, 0), rolloutStatus{}, "").differs(cr) {
		t.Error("an unchanged decision differs from the status it wrote: it would be written forever")
	}
}
