package poolstatus

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// metadataOf is a StorageClass as the sidecar's metadata cache holds it.
func metadataOf(sc *storagev1.StorageClass) *metav1.PartialObjectMetadata {
	if sc == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: sc.ObjectMeta}
}

// withConditions is pool-a with the helm-operator's conditions.
func withConditions(conds ...map[string]any) *unstructured.Unstructured {
	p := pool(map[string]any{"capacity": "10Gi", "storageClassName": "c"})
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	p.Object["status"] = map[string]any{"conditions": list, "observedGeneration": p.GetGeneration()}
	return p
}

var (
	deployedTrue   = map[string]any{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}
	deployedFalse  = map[string]any{"type": "Deployed", "status": "False"}
	releaseFailed  = map[string]any{"type": "ReleaseFailed", "status": "True", "reason": "InstallError"}
	initializedYes = map[string]any{"type": "Initialized", "status": "True"}
)

func TestOwnershipOf(t *testing.T) {
	cases := []struct {
		name   string
		pool   *unstructured.Unstructured
		sc     *storagev1.StorageClass
		owned  bool
		reason string
		says   []string
	}{
		{"own class, deployed", withConditions(initializedYes, deployedTrue), storageClass("c", "pool-a", "ns1"),
			true, statuscontract.ReasonStorageClassOwned, []string{`"c"`}},
		{"no such class", withConditions(initializedYes, releaseFailed), nil,
			false, statuscontract.ReasonStorageClassNotFound, []string{`StorageClass "c" does not exist`}},
		{"another namespace's pool's class", withConditions(initializedYes, releaseFailed), storageClass("c", "pool-a", "n1"),
			false, statuscontract.ReasonStorageClassNotOwned, []string{`StorageClass "c"`, `a Helm release of another namespace`, `namespace "ns1"`}},
		{"another pool's class in the namespace", withConditions(deployedTrue), storageClass("c", "pool-b", "ns1"),
			false, statuscontract.ReasonStorageClassNotOwned, []string{`release "pool-b" of this namespace`}},
		{"the cluster's class", withConditions(initializedYes, releaseFailed), storageClass("c", "", ""),
			false, statuscontract.ReasonStorageClassNotOwned, []string{`StorageClass "c" was not created by a Helm release`}},
		// A release that is not (or no longer) deployed keeps no books, even of its own class.
		{"own class, not deployed", withConditions(deployedFalse), storageClass("c", "pool-a", "ns1"),
			false, statuscontract.ReasonReleaseNotDeployed, []string{"not deployed"}},
		{"own class, no report yet", withConditions(), storageClass("c", "pool-a", "ns1"),
			false, statuscontract.ReasonReleaseNotDeployed, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := OwnershipOf(tc.pool, "c", metadataOf(tc.sc))
			if got.Owned != tc.owned || got.Reason != tc.reason {
				t.Errorf("owned %v (%s), want %v (%s): %s", got.Owned, got.Reason, tc.owned, tc.reason, got.Message)
			}
			for _, s := range tc.says {
				if !strings.Contains(got.Message, s) {
					t.Errorf("message %q does not say %s", got.Message, s)
				}
			}
			// Another namespace's release is never named to this pool's editors.
			if tc.sc == nil {
				return
			}
			if ns := tc.sc.Annotations[helmReleaseNamespace]; ns != "" && ns != "ns1" && strings.Contains(got.Message, `"`+ns+`"`) {
				t.Errorf("message %q names another namespace's release", got.Message)
			}
		})
	}
}

// usageFields are the fields of status.pool that show what the class's claims hold.
var usageFields = []string{"allocated", "available", "requested", "claims", "namespaceCount"}

// expectNoBooks checks that status.pool shows nothing of the claims, and BooksKept=False for
// reason.
func expectNoBooks(t *testing.T, got *unstructured.Unstructured, reason string, says ...string) {
	t.Helper()
	st, found, _ := unstructured.NestedMap(got.Object, "status", StatusField)
	if !found {
		t.Fatalf("no status.pool: %v", got.Object["status"])
	}
	for _, f := range usageFields {
		if v, ok := st[f]; ok {
			t.Errorf("status.pool.%s is %v: a pool that keeps no books must not show it", f, v)
		}
	}
	for _, c := range conditionsOfStatus(got) {
		if c.Type == statuscontract.CapacityAvailable || c.Type == statuscontract.Overcommitted {
			t.Errorf("condition %s (%q) of a pool that keeps no books", c.Type, c.Message)
		}
	}
	c := poolCondition(t, got, statuscontract.BooksKept)
	if c.Status != metav1.ConditionFalse || c.Reason != reason {
		t.Errorf("BooksKept %s (%s), want False (%s): %s", c.Status, c.Reason, reason, c.Message)
	}
	for _, s := range says {
		if !strings.Contains(c.Message, s) {
			t.Errorf("BooksKept message %q does not say %s", c.Message, s)
		}
	}
	if poolField(got, "storageClassName") != "c" || poolField(got, "capacity") != "10Gi" {
		t.Errorf("status.pool %v: want the class and the capacity still", st)
	}
}

// A pool that names another namespace's pool's StorageClass (its release failed: Helm
// refused to adopt the class) shows nothing of that class's claims, records no Events, and
// says whose class it is.
func TestSyncKeepsNoBooksOfAnotherNamespacesClass(t *testing.T) {
	thief := withConditions(initializedYes, releaseFailed)
	h := newHarness(t, thief, storageClass("c", "owner", "n1"))
	r := h.reconciler()
	// The owner's claims: 12Gi of the thief's 10Gi, which would be PoolFull.
	h.books.OnAdd(pvc("1", "n1", "c", "8Gi", corev1.ClaimBound), false)
	h.books.OnAdd(pvc("2", "secret-team", "c", "4Gi", corev1.ClaimPending), false)

	got := h.reconcile(t, r)
	expectNoBooks(t, got, statuscontract.ReasonStorageClassNotOwned, `StorageClass "c"`, `a Helm release of another namespace`)
	if raw, _ := json.Marshal(got.Object["status"]); strings.Contains(string(raw), "secret-team") || strings.Contains(string(raw), "12Gi") {
		t.Errorf("the status shows the owner's usage: %s", raw)
	}
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("events on a pool that keeps no books: %v", ev)
	}
	patches := h.patches
	h.books.OnAdd(pvc("3", "n1", "c", "1Gi", corev1.ClaimPending), false)
	h.reconcile(t, r)
	if h.patches != patches {
		t.Error("a claim of a class that is not the pool's changed its status")
	}
}

// A StorageClass of the cluster (no Helm annotations) is nobody's pool: a pool that names
// it keeps no books, even once its release somehow reports Deployed.
func TestSyncKeepsNoBooksOfTheClustersClass(t *testing.T) {
	h := newHarness(t, withConditions(initializedYes, deployedTrue), storageClass("c", "", ""))
	h.books.OnAdd(pvc("1", "kube-system", "c", "8Gi", corev1.ClaimBound), false)
	got := h.reconcile(t, h.reconciler())
	expectNoBooks(t, got, statuscontract.ReasonStorageClassNotOwned, "not created by a Helm release")
}

// Ownership follows the live StorageClass: a pool keeping books stops, and its usage
// figures and conditions leave status.pool, when the class stops being its release's; and
// its books return, with the Events of the thresholds crossed, when it is again.
func TestSyncFollowsOwnershipChanges(t *testing.T) {
	ctx := context.Background()
	p := withConditions(initializedYes, deployedTrue)
	sc := storageClass("c", "pool-a", "ns1")
	h := newHarness(t, p, sc)
	r := h.reconciler()
	h.books.OnAdd(pvc("1", "team-a", "c", "9Gi", corev1.ClaimBound), false)

	got := h.reconcile(t, r)
	if poolField(got, "allocated") != "9Gi" || poolCondition(t, got, statuscontract.BooksKept).Status != metav1.ConditionTrue {
		t.Fatalf("the owner's books: %v", got.Object["status"])
	}
	if ev := h.events(); strings.Join(ev, ",") != ReasonUsageHigh {
		t.Errorf("events at 90%%: %v", ev)
	}

	t.Log("the class is handed to another release: the books go")
	sc.Annotations[helmReleaseName] = "pool-b"
	if err := h.client.Update(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got = h.reconcile(t, r)
	expectNoBooks(t, got, statuscontract.ReasonStorageClassNotOwned, `"pool-b" of this namespace`)

	t.Log("the class is deleted")
	if err := h.client.Delete(ctx, sc); err != nil {
		t.Fatal(err)
	}
	got = h.reconcile(t, r)
	expectNoBooks(t, got, statuscontract.ReasonStorageClassNotFound, `StorageClass "c" does not exist`)

	t.Log("the pool's release creates it again: books, and the crossing of 80% again")
	if err := h.client.Create(ctx, storageClass("c", "pool-a", "ns1")); err != nil {
		t.Fatal(err)
	}
	got = h.reconcile(t, r)
	if poolField(got, "allocated") != "9Gi" || poolField(got, "claims", "total") != "1" {
		t.Fatalf("books after the class came back: %v", got.Object["status"])
	}
	c := poolCondition(t, got, statuscontract.BooksKept)
	if c.Status != metav1.ConditionTrue || c.Reason != statuscontract.ReasonStorageClassOwned {
		t.Errorf("BooksKept %+v", c)
	}
	if poolCondition(t, got, statuscontract.CapacityAvailable).Status != metav1.ConditionTrue {
		t.Errorf("CapacityAvailable missing: %v", got.Object["status"])
	}
	if ev := h.events(); strings.Join(ev, ",") != ReasonUsageHigh {
		t.Errorf("events when the books returned at 90%%: %v", ev)
	}
}

// A merge patch keeps what it does not name: the fields status.pool loses are set to null.
func TestStatusPatchRemovesUsage(t *testing.T) {
	spec, _ := ParseSpec(pool(map[string]any{"capacity": "10Gi"}))
	kept, _ := ComputeStatus(1, spec, owned, usageOf(claim("1", "team-a", "pool-a", "1Gi", "Bound")), nil, metav1.Now())
	p := pool(map[string]any{"capacity": "10Gi"})
	written, err := StatusPatch(p, kept)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(written, &doc); err != nil {
		t.Fatal(err)
	}
	p.Object["status"] = doc["status"]

	notOwned := Ownership{Reason: statuscontract.ReasonStorageClassNotOwned, Message: "not ours"}
	unkept, lvl := ComputeStatus(2, spec, notOwned, usageOf(claim("1", "team-a", "pool-a", "100Gi", "Bound")), kept.Conditions, metav1.Now())
	if lvl != levelNormal || unkept.PoolUsage != nil {
		t.Fatalf("a pool that keeps no books: level %d, usage %+v", lvl, unkept.PoolUsage)
	}
	patch, err := StatusPatch(p, unkept)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Status map[string]map[string]any `json:"status"`
	}
	if err := json.Unmarshal(patch, &got); err != nil {
		t.Fatal(err)
	}
	st := got.Status[StatusField]
	for _, f := range usageFields {
		if v, ok := st[f]; !ok || v != nil {
			t.Errorf("patch %s: %s must be null, to remove it", patch, f)
		}
	}
	if st["capacity"] != "10Gi" || strings.Contains(string(patch), "CapacityAvailable") {
		t.Errorf("patch %s", patch)
	}
}

// A StorageClass event wakes the pools that name the class, and only them.
func TestStorageClassEventsWakeThePoolsOfTheClass(t *testing.T) {
	r := &PoolReconciler{Books: NewBooks()}
	a := types.NamespacedName{Namespace: "n1", Name: "a"}
	b := types.NamespacedName{Namespace: "n2", Name: "b"}
	r.Books.setPool(a, "c")
	r.Books.setPool(b, "c")
	r.Books.setPool(types.NamespacedName{Namespace: "n1", Name: "other"}, "d")
	var names []string
	for _, req := range r.poolsOfClass(context.Background(), storageClass("c", "a", "n1")) {
		names = append(names, req.Name)
	}
	if got := strings.Join(sorted(names), ","); got != "a,b" {
		t.Errorf("a change of class c woke %q, want a,b", got)
	}
	if reqs := r.poolsOfClass(context.Background(), storageClass("nobodys", "", "")); len(reqs) != 0 {
		t.Errorf("a class no pool names woke %v", reqs)
	}
}

// The release becoming deployed (or not) can change the pool's ownership: the update
// reaches sync.
func TestPoolInputsChangedOnDeployed(t *testing.T) {
	old := withConditions(initializedYes, releaseFailed)
	now := withConditions(initializedYes, deployedTrue)
	if !poolInputsChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: now}) {
		t.Error("Deployed becoming True was filtered out")
	}
	if poolInputsChanged().Update(event.UpdateEvent{ObjectOld: now, ObjectNew: now.DeepCopy()}) {
		t.Error("an update that changes nothing went through")
	}
}
