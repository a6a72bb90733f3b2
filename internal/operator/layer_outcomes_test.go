package operator

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

func crAt(gen int64, status map[string]any) *unstructured.Unstructured {
	u := memcached(status)
	u.SetGeneration(gen)
	u.SetUID("uid-1")
	return u
}

func drain(o *outcomes) {
	for len(o.notify) > 0 {
		<-o.notify
	}
}

// Failures count per generation, go on from the status after a restart, and a success
// clears them; every outcome wakes the readiness controller.
func TestOutcomesCountFailures(t *testing.T) {
	o := newOutcomes()
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	f := statuscontract.Failure{Reason: statuscontract.ReasonUpgradeFailed, Step: "upgrade", Message: "boom"}

	// A restarted manager: the status counts 2 failures at generation 3.
	cr := crAt(3, map[string]any{"failures": int64(2), "conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "observedGeneration": int64(3)}}})
	o.failed(cr, f)
	if got, _ := o.get(key, "uid-1"); got.failures != 3 || got.failedGeneration != 3 {
		t.Fatalf("after a restart: %d failures at generation %d, want 3 at 3", got.failures, got.failedGeneration)
	}
	if len(o.notify) != 1 {
		t.Fatalf("%d notifications, want 1", len(o.notify))
	}
	drain(o)

	// An edit: generation 4 starts from zero.
	o.failed(crAt(4, nil), f)
	if got, _ := o.get(key, "uid-1"); got.failures != 1 || got.failedGeneration != 4 {
		t.Fatalf("after an edit: %d failures at generation %d, want 1 at 4", got.failures, got.failedGeneration)
	}

	// A terminal refusal is counted once per generation, however often it is met again.
	refused := statuscontract.Failure{Reason: statuscontract.ReasonSpecTooLarge, Step: "values", Message: "too many", Terminal: true}
	o.failed(crAt(5, nil), refused)
	o.failed(crAt(5, nil), refused)
	if got, _ := o.get(key, "uid-1"); got.failures != 1 || got.failedGeneration != 5 {
		t.Fatalf("a terminal refusal met twice: %d failures at generation %d, want 1 at 5", got.failures, got.failedGeneration)
	}
	o.failed(crAt(4, nil), f)

	// Success clears the count and records the handled request.
	ok := crAt(4, nil)
	ok.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: "now"})
	o.succeeded(ok, nil)
	got, _ := o.get(key, "uid-1")
	if got.failures != 0 || got.deployed != 4 || got.handled != "now" || !got.handledSet {
		t.Fatalf("after success: %+v", got)
	}

	// A CR deleted and created again under the same name is another CR.
	if _, found := o.get(key, "uid-2"); found {
		t.Error("the outcome of a deleted CR applies to its successor")
	}
}

// The manager's status of a CR: decided from the outcome, nothing written when it says
// the same already, and the apply carries the CR's resourceVersion as a precondition.
func TestManagerStatus(t *testing.T) {
	now := metav1.Unix(1000, 0)
	cr := crAt(2, map[string]any{"observedGeneration": int64(1), "conditions": []any{
		map[string]any{"type": "RolledOut", "status": "True", "observedGeneration": int64(2)}}})
	cr.SetResourceVersion("42")
	f := managerStatus(cr, outcome{uid: "uid-1", deployed: 2, handled: "x", handledSet: true}, now, rolloutStatus{}, "")
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
	if managerStatus(cr, outcome{uid: "uid-1", deployed: 2, handled: "x", handledSet: true}, metav1.Unix(2000, 0), rolloutStatus{}, "").differs(cr) {
		t.Error("an unchanged decision differs from the status it wrote: it would be written forever")
	}
}

// A reconcile request longer than the status schema admits is echoed cut, so that the status
// write still succeeds.
func TestOutcomesBoundTheEchoedRequest(t *testing.T) {
	o := newOutcomes()
	cr := crAt(1, nil)
	cr.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: strings.Repeat("x", 300000)})
	o.succeeded(cr, nil)
	got, _ := o.get(types.NamespacedName{Namespace: "ns", Name: "m"}, "uid-1")
	if len(got.handled) > maxRequestEcho || !got.handledSet {
		t.Errorf("echo of %d bytes, want at most %d", len(got.handled), maxRequestEcho)
	}
}

// The readiness controller is woken with the CR's name, not with the reconciler's CR object,
// which the reconciler goes on changing while the controller's handler reads the event.
func TestTellSendsNoSharedObject(t *testing.T) {
	o := newOutcomes()
	cr := memcached(nil)
	o.tell(cr)
	e := <-o.notify
	if u, ok := e.Object.(*unstructured.Unstructured); ok && u == cr {
		t.Fatal("the event carries the reconciler's CR object")
	}
	if e.Object.GetNamespace() != "ns" || e.Object.GetName() != "m" {
		t.Errorf("event for %s/%s, want ns/m", e.Object.GetNamespace(), e.Object.GetName())
	}
}
