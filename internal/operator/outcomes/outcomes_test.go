package outcomes

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func crAt(gen int64, status map[string]any) *unstructured.Unstructured {
	u := actiontest.Memcached(status)
	u.SetGeneration(gen)
	u.SetUID("uid-1")
	return u
}

func drain(o *Store) {
	for len(o.notify) > 0 {
		<-o.notify
	}
}

// Failures count per generation, go on from the status after a restart, and a success
// clears them; every outcome wakes the readiness controller.
func TestOutcomesCountFailures(t *testing.T) {
	o := New()
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	f := statuscontract.Failure{Reason: statuscontract.ReasonUpgradeFailed, Step: "upgrade", Message: "boom"}

	// A restarted manager: the status counts 2 failures at generation 3.
	cr := crAt(3, map[string]any{"failures": int64(2), "conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "observedGeneration": int64(3)}}})
	o.Failed(cr, f)
	if got, _ := o.Get(key, "uid-1"); got.Failures != 3 || got.FailedGeneration != 3 {
		t.Fatalf("after a restart: %d failures at generation %d, want 3 at 3", got.Failures, got.FailedGeneration)
	}
	if len(o.notify) != 1 {
		t.Fatalf("%d notifications, want 1", len(o.notify))
	}
	drain(o)

	// An edit: generation 4 starts from zero.
	o.Failed(crAt(4, nil), f)
	if got, _ := o.Get(key, "uid-1"); got.Failures != 1 || got.FailedGeneration != 4 {
		t.Fatalf("after an edit: %d failures at generation %d, want 1 at 4", got.Failures, got.FailedGeneration)
	}

	// A terminal refusal is counted once per generation, however often it is met again.
	refused := statuscontract.Failure{Reason: statuscontract.ReasonSpecTooLarge, Step: "values", Message: "too many", Terminal: true}
	o.Failed(crAt(5, nil), refused)
	o.Failed(crAt(5, nil), refused)
	if got, _ := o.Get(key, "uid-1"); got.Failures != 1 || got.FailedGeneration != 5 {
		t.Fatalf("a terminal refusal met twice: %d failures at generation %d, want 1 at 5", got.Failures, got.FailedGeneration)
	}
	o.Failed(crAt(4, nil), f)

	// Success clears the count and records the handled request.
	ok := crAt(4, nil)
	ok.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: "now"})
	o.Succeeded(ok, nil)
	got, _ := o.Get(key, "uid-1")
	if got.Failures != 0 || got.Deployed != 4 || got.Handled != "now" || !got.HandledSet {
		t.Fatalf("after success: %+v", got)
	}

	// A CR deleted and created again under the same name is another CR.
	if _, found := o.Get(key, "uid-2"); found {
		t.Error("the outcome of a deleted CR applies to its successor")
	}
}

// A reconcile request longer than the status schema admits is echoed cut, so that the status
// write still succeeds.
func TestOutcomesBoundTheEchoedRequest(t *testing.T) {
	o := New()
	cr := crAt(1, nil)
	cr.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: strings.Repeat("x", 300000)})
	o.Succeeded(cr, nil)
	got, _ := o.Get(types.NamespacedName{Namespace: "ns", Name: "m"}, "uid-1")
	if len(got.Handled) > maxRequestEcho || !got.HandledSet {
		t.Errorf("echo of %d bytes, want at most %d", len(got.Handled), maxRequestEcho)
	}
}

// The readiness controller is woken with the CR's name, not with the reconciler's CR object,
// which the reconciler goes on changing while the controller's handler reads the event.
func TestTellSendsNoSharedObject(t *testing.T) {
	o := New()
	cr := actiontest.Memcached(nil)
	o.tell(cr)
	e := <-o.notify
	if u, ok := e.Object.(*unstructured.Unstructured); ok && u == cr {
		t.Fatal("the event carries the reconciler's CR object")
	}
	if e.Object.GetNamespace() != "ns" || e.Object.GetName() != "m" {
		t.Errorf("event for %s/%s, want ns/m", e.Object.GetNamespace(), e.Object.GetName())
	}
}
