package releaselists

import (
	"context"
	"errors"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// lists counts the LISTs of Secrets the clientset received.
func lists(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "secrets" {
			n++
		}
	}
	return n
}

// The same list twice is one LIST; a narrower selector is answered from it, another selector
// is its own LIST; a write forgets every list, so the next one reads the write; a caller that
// changes its answer changes no other's.
func TestListsAreRememberedUntilAWrite(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r.v1", Namespace: "ns",
		Labels: map[string]string{"owner": "helm", "name": "r"}}})
	m := New(cs.CoreV1().Secrets("ns"))
	byName := metav1.ListOptions{LabelSelector: "owner=helm,name=r"}

	first, err := m.List(ctx, byName)
	if err != nil || len(first.Items) != 1 {
		t.Fatalf("first list: %v, %v", first, err)
	}
	first.Items[0].Name = "changed by the caller"
	again, _ := m.List(ctx, byName)
	if lists(cs) != 1 || len(again.Items) != 1 || again.Items[0].Name != "r.v1" {
		t.Fatalf("the same list again: %d LISTs, items %v; want 1 LIST and r.v1", lists(cs), again.Items)
	}
	deployed, err := m.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=r,status=deployed"})
	if err != nil || lists(cs) != 1 || len(deployed.Items) != 0 {
		t.Fatalf("a narrower selector: %d LISTs, %v, items %v; want none of r.v1, which is not deployed, from memory",
			lists(cs), err, deployed.Items)
	}
	if _, err := m.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=other"}); err != nil || lists(cs) != 2 {
		t.Fatalf("another selector: %d LISTs, %v; want its own", lists(cs), err)
	}
	if _, err := m.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=r", Limit: 10}); err != nil || lists(cs) != 3 {
		t.Fatalf("a paged list: %d LISTs, %v; want it to go to the API server", lists(cs), err)
	}

	if _, err := m.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r.v2", Namespace: "ns",
		Labels: map[string]string{"owner": "helm", "name": "r"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	after, _ := m.List(ctx, byName)
	if lists(cs) != 4 || len(after.Items) != 2 {
		t.Fatalf("after a create: %d LISTs, %d items; want a new LIST that reads the create", lists(cs), len(after.Items))
	}
	if err := m.Delete(ctx, "r.v1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.List(ctx, byName); lists(cs) != 5 || len(after.Items) != 1 {
		t.Fatalf("after a delete: %d LISTs, %d items; want a new LIST that reads the delete", lists(cs), len(after.Items))
	}
}

// After Forget, a list reads what another client wrote since it was remembered.
func TestForgetReadsOtherWriters(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	m := New(cs.CoreV1().Secrets("ns"))
	byName := metav1.ListOptions{LabelSelector: "owner=helm,name=r"}
	if l, err := m.List(ctx, byName); err != nil || len(l.Items) != 0 {
		t.Fatalf("first list: %v, %v", l, err)
	}
	if _, err := cs.CoreV1().Secrets("ns").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "r.v1",
		Namespace: "ns", Labels: map[string]string{"owner": "helm", "name": "r"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if l, _ := m.List(ctx, byName); len(l.Items) != 0 {
		t.Fatalf("before Forget: %d items, want the remembered answer", len(l.Items))
	}
	m.Forget()
	if l, _ := m.List(ctx, byName); len(l.Items) != 1 {
		t.Fatalf("after Forget: %d items, want the other client's record", len(l.Items))
	}
}

// A failed list is not remembered.
func TestAFailedListIsAskedAgain(t *testing.T) {
	cs := fake.NewClientset()
	fail := true
	cs.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if fail {
			fail = false
			return true, nil, errors.New("apiserver down")
		}
		return false, nil, nil
	})
	m := New(cs.CoreV1().Secrets("ns"))
	if _, err := m.List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"}); err == nil {
		t.Fatal("the first list did not fail")
	}
	if _, err := m.List(context.Background(), metav1.ListOptions{LabelSelector: "owner=helm"}); err != nil || lists(cs) != 2 {
		t.Fatalf("after a failure: %d LISTs, %v; want the list asked again", lists(cs), err)
	}
}

// What one upgrade reconcile asks Helm's storage, as helm-operator-plugins' reconciler and
// Helm's actions do: the release's last revision (the reconciler, the gate, the guard), the
// dry run's last and deployed revisions, the upgrade's, then its writes and the history
// pruned. Every answer is what the API server holds, with 2 LISTs instead of 10: the deployed
// revision is found in the records listed.
func TestOneUpgradeThroughHelmsStorage(t *testing.T) {
	cs := fake.NewClientset()
	s := storage.Init(driver.NewSecrets(New(cs.CoreV1().Secrets("ns"))))
	s.MaxHistory = 10
	rel := func(v int, st release.Status) *release.Release {
		return &release.Release{Name: "r", Namespace: "ns", Version: v, Info: &release.Info{Status: st},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1.0.0"}}}
	}
	if err := s.Create(rel(1, release.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	cs.ClearActions()

	for range 3 { // the reconciler's look-up, the rollout gate's, the release guard's
		if last, err := s.Last("r"); err != nil || last.Version != 1 {
			t.Fatalf("last: %v, %v", last, err)
		}
	}
	for range 2 { // the dry run, then the upgrade
		if _, err := s.Last("r"); err != nil {
			t.Fatal(err)
		}
		if d, err := s.Deployed("r"); err != nil || d.Version != 1 {
			t.Fatalf("deployed: %v, %v", d, err)
		}
	}
	if err := s.Create(rel(2, release.StatusPendingUpgrade)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(rel(1, release.StatusSuperseded)); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(rel(2, release.StatusDeployed)); err != nil {
		t.Fatal(err)
	}
	h, err := s.History("r")
	if err != nil || len(h) != 2 {
		t.Fatalf("history after the upgrade: %d revisions, %v; want 2", len(h), err)
	}
	if d, err := s.Deployed("r"); err != nil || d.Version != 2 {
		t.Fatalf("deployed after the upgrade: %v, %v; want revision 2", d, err)
	}
	if got := lists(cs); got != 2 {
		t.Errorf("%d LISTs; want 2: the release's records before the writes, and after them", got)
	}
}
