package poolstatus

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

func pvc(uid, ns, class, size string, phase corev1.PersistentVolumeClaimPhase) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-" + uid, Namespace: ns, UID: types.UID(uid)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
}

// deployedPool is pool-a as the manager leaves it after installing it.
func deployedPool(spec map[string]any) *unstructured.Unstructured {
	p := pool(spec)
	p.Object["status"] = map[string]any{
		"conditions":         []any{map[string]any{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}},
		"observedGeneration": p.GetGeneration(),
	}
	return p
}

// markDeployed sets status.observedGeneration as the manager does once the spec of the
// pool's generation is deployed: the books follow only a deployed spec.
func markDeployed(t *testing.T, c client.Client, p *unstructured.Unstructured) {
	t.Helper()
	if err := unstructured.SetNestedField(p.Object, p.GetGeneration(), "status", "observedGeneration"); err != nil {
		t.Fatal(err)
	}
	if err := c.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// storageClass is a StorageClass with the ownership annotations Helm gives the objects of
// the release releaseNS/release; an empty release gives none (a class of the cluster's).
func storageClass(name, release, releaseNS string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "warpdrive.transwarp.io/pool"}
	if release != "" {
		sc.Annotations = map[string]string{helmReleaseName: release, helmReleaseNamespace: releaseNS}
	}
	return sc
}

// harness runs the reconciler against a fake client, recording status patches and Events.
type harness struct {
	client   client.Client
	books    *Books
	recorder *record.FakeRecorder
	patches  int
}

func newHarness(t *testing.T, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{books: NewBooks(), recorder: record.NewFakeRecorder(100)}
	statusObj := &unstructured.Unstructured{}
	statusObj.SetGroupVersionKind(poolGVK)
	scheme := runtime.NewScheme()
	if err := storagev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h.client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(objs...).
		WithStatusSubresource(statusObj).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if sub != "status" || patch.Type() != types.MergePatchType {
					t.Errorf("patch of %q with %s, want a merge patch of status", sub, patch.Type())
				}
				h.patches++
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	return h
}

// reconciler is a fresh leader: it knows nothing but what the pools' status shows.
func (h *harness) reconciler() *PoolReconciler {
	return &PoolReconciler{
		Client: h.client, GVK: poolGVK, Books: h.books, Recorder: h.recorder,
		written: map[types.NamespacedName]writtenState{},
	}
}

func (h *harness) reconcile(t *testing.T, r *PoolReconciler) *unstructured.Unstructured {
	t.Helper()
	key := types.NamespacedName{Namespace: "ns1", Name: "pool-a"}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(poolGVK)
	if err := h.client.Get(context.Background(), key, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// events drains the Events recorded so far, as "reason" strings.
func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.recorder.Events:
			out = append(out, strings.Fields(e)[1])
		default:
			return out
		}
	}
}

func poolField(u *unstructured.Unstructured, path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, append([]string{"status", StatusField}, path...)...)
	return fmt.Sprint(v)
}

func poolCondition(t *testing.T, u *unstructured.Unstructured, typ string) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(conditionsOfStatus(u), typ)
	if c == nil {
		t.Fatalf("no condition %s in %v", typ, u.Object["status"])
	}
	return *c
}

func TestSyncFollowsBooksWithOneEventPerCrossing(t *testing.T) {
	h := newHarness(t, deployedPool(map[string]any{"capacity": "10Gi"}), storageClass("pool-a", "pool-a", "ns1"))
	r := h.reconciler()
	h.books.OnAdd(pvc("1", "team-a", "pool-a", "4Gi", corev1.ClaimBound), false)
	h.books.OnAdd(pvc("2", "team-b", "pool-a", "2Gi", corev1.ClaimPending), false)
	h.books.OnAdd(pvc("3", "team-b", "elsewhere", "100Gi", corev1.ClaimPending), false)

	got := h.reconcile(t, r)
	if a, q, b, p := poolField(got, "allocated"), poolField(got, "requested"), poolField(got, "claims", "bound"), poolField(got, "claims", "pending"); a != "4Gi" || q != "2Gi" || b != "1" || p != "1" {
		t.Fatalf("allocated %s, requested %s, bound %s, pending %s; want 4Gi, 2Gi, 1, 1", a, q, b, p)
	}
	if poolField(got, "storageClassName") != "pool-a" || poolField(got, "namespaceCount") != "1" {
		t.Errorf("status.pool %v", got.Object["status"])
	}
	if poolField(got, "available") != "6Gi" || poolField(got, "capacity") != "10Gi" {
		t.Errorf("status.pool %v", got.Object["status"])
	}
	if helmConds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions"); len(helmConds) != 1 {
		t.Errorf("the helm-operator's conditions were touched: %v", got.Object["status"])
	}
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("events at 60%%: %v", ev)
	}

	t.Log("to 90%: one PoolUsageHigh")
	h.books.OnUpdate(nil, pvc("2", "team-b", "pool-a", "5Gi", corev1.ClaimBound))
	got = h.reconcile(t, r)
	if poolField(got, "allocated") != "9Gi" {
		t.Fatalf("allocated %s, want 9Gi", poolField(got, "allocated"))
	}
	if ev := h.events(); strings.Join(ev, ",") != ReasonUsageHigh {
		t.Errorf("events crossing 80%%: %v", ev)
	}
	patches := h.patches
	h.reconcile(t, r)
	if h.patches != patches {
		t.Error("nothing changed, yet the status was patched again")
	}
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("events without a crossing: %v", ev)
	}

	t.Log("a pending claim of 1Pi that never binds: no Event, not full")
	h.books.OnAdd(pvc("6", "intruder", "pool-a", "1Pi", corev1.ClaimPending), false)
	got = h.reconcile(t, r)
	if poolField(got, "allocated") != "9Gi" || poolField(got, "requested") != "1Pi" ||
		poolCondition(t, got, statuscontract.CapacityAvailable).Status != metav1.ConditionTrue {
		t.Fatalf("a pending claim filled the pool: %v", got.Object["status"])
	}
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("events for a pending claim: %v", ev)
	}
	h.books.OnDelete(pvc("6", "intruder", "pool-a", "1Pi", corev1.ClaimPending))

	t.Log("to 100%: one PoolFull, conditions flip")
	h.books.OnAdd(pvc("4", "team-c", "pool-a", "1Gi", corev1.ClaimBound), false)
	got = h.reconcile(t, r)
	if ev := h.events(); strings.Join(ev, ",") != ReasonFull {
		t.Errorf("events reaching 100%%: %v", ev)
	}
	if c := poolCondition(t, got, statuscontract.CapacityAvailable); c.Status != metav1.ConditionFalse {
		t.Errorf("CapacityAvailable %+v at 100%%", c)
	}

	t.Log("a new leader starts from the written status: no repeated Events")
	r2 := h.reconciler()
	h.reconcile(t, r2)
	if ev := h.events(); len(ev) != 0 {
		t.Errorf("the new leader repeated %v", ev)
	}

	t.Log("down to 50%, then back over 80%: re-armed, one more PoolUsageHigh")
	h.books.OnDelete(pvc("2", "team-b", "pool-a", "5Gi", corev1.ClaimBound))
	got = h.reconcile(t, r2)
	if poolField(got, "allocated") != "5Gi" || poolCondition(t, got, statuscontract.CapacityAvailable).Status != metav1.ConditionTrue {
		t.Fatalf("after the deletion: %v", got.Object["status"])
	}
	h.books.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "team-c/claim-4", Obj: pvc("4", "team-c", "pool-a", "1Gi", corev1.ClaimBound)})
	h.books.OnAdd(pvc("5", "team-c", "pool-a", "4Gi", corev1.ClaimBound), false)
	got = h.reconcile(t, r2)
	if poolField(got, "allocated") != "8Gi" {
		t.Fatalf("allocated %s, want 8Gi", poolField(got, "allocated"))
	}
	if ev := h.events(); strings.Join(ev, ",") != ReasonUsageHigh {
		t.Errorf("events crossing 80%% again: %v", ev)
	}
}

// A pool without spec.storageClassName keeps the books of <namespace>.<name> when its
// release created that class, or of the class named after the pool when its release created
// that one (chart 0.1.0's default); not those of a class named after the pool that is
// another namespace's. Without either class, it waits for the chart's default.
func TestSyncPicksTheClassItsReleaseCreated(t *testing.T) {
	h := newHarness(t, deployedPool(map[string]any{"capacity": "10Gi"}), storageClass("pool-a", "pool-a", "elsewhere"))
	r := h.reconciler()
	h.books.OnAdd(pvc("1", "team-a", "ns1.pool-a", "3Gi", corev1.ClaimBound), false)
	h.books.OnAdd(pvc("2", "team-b", "pool-a", "5Gi", corev1.ClaimBound), false)
	got := h.reconcile(t, r)
	if c := poolCondition(t, got, statuscontract.BooksKept); c.Reason != statuscontract.ReasonStorageClassNotFound ||
		poolField(got, "storageClassName") != "ns1.pool-a" || poolField(got, "allocated") != "<nil>" {
		t.Fatalf("with another namespace's class of its name: %v", got.Object["status"])
	}
	if err := h.client.Create(context.Background(), storageClass("ns1.pool-a", "pool-a", "ns1")); err != nil {
		t.Fatal(err)
	}
	got = h.reconcile(t, r)
	if poolField(got, "storageClassName") != "ns1.pool-a" || poolField(got, "allocated") != "3Gi" ||
		poolCondition(t, got, statuscontract.BooksKept).Status != metav1.ConditionTrue {
		t.Fatalf("with its class: %v", got.Object["status"])
	}
	if pools := h.books.poolsOf("ns1.pool-a"); len(pools) != 1 {
		t.Errorf("a pool without storageClassName is not woken by <namespace>.<name>: %v", pools)
	}
}

// A pool installed by chart 0.1.0 owns the class named after it, and keeps its books.
func TestSyncKeepsTheClassOfChart010(t *testing.T) {
	h := newHarness(t, deployedPool(map[string]any{"capacity": "10Gi"}), storageClass("pool-a", "pool-a", "ns1"))
	r := h.reconciler()
	h.books.OnAdd(pvc("1", "team-a", "pool-a", "3Gi", corev1.ClaimBound), false)
	got := h.reconcile(t, r)
	if poolField(got, "storageClassName") != "pool-a" || poolField(got, "allocated") != "3Gi" ||
		poolCondition(t, got, statuscontract.BooksKept).Status != metav1.ConditionTrue {
		t.Fatalf("with the class chart 0.1.0 named after it: %v", got.Object["status"])
	}
}

func TestSyncCapacityEditReevaluatesConditions(t *testing.T) {
	h := newHarness(t, deployedPool(map[string]any{"capacity": "10Gi"}), storageClass("pool-a", "pool-a", "ns1"))
	r := h.reconciler()
	h.books.OnAdd(pvc("1", "team-a", "pool-a", "12Gi", corev1.ClaimBound), false)
	got := h.reconcile(t, r)
	if poolCondition(t, got, statuscontract.CapacityAvailable).Status != metav1.ConditionFalse ||
		poolCondition(t, got, statuscontract.Overcommitted).Status != metav1.ConditionTrue {
		t.Fatalf("12Gi of 10Gi: %v", got.Object["status"])
	}

	t.Log("overcommitRatio 2: room again, still over the physical capacity")
	got.Object["spec"] = map[string]any{"capacity": "10Gi", "overcommitRatio": int64(2)}
	got.SetGeneration(2)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if got = h.reconcile(t, r); poolField(got, "allocatable") != "10Gi" || poolField(got, "observedGeneration") != "1" {
		t.Fatalf("before the manager deployed generation 2, the books changed: %v", got.Object["status"])
	}
	markDeployed(t, h.client, got)
	got = h.reconcile(t, r)
	if poolField(got, "allocatable") != "20Gi" || poolField(got, "available") != "8Gi" || poolField(got, "observedGeneration") != "2" ||
		poolCondition(t, got, statuscontract.CapacityAvailable).Status != metav1.ConditionTrue ||
		poolCondition(t, got, statuscontract.Overcommitted).Status != metav1.ConditionTrue {
		t.Fatalf("after the ratio edit: %v", got.Object["status"])
	}

	t.Log("capacity 20Gi: within capacity")
	got.Object["spec"] = map[string]any{"capacity": "20Gi", "overcommitRatio": int64(2)}
	got.SetGeneration(3)
	if err := h.client.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	markDeployed(t, h.client, got)
	got = h.reconcile(t, r)
	if poolCondition(t, got, statuscontract.Overcommitted).Status != metav1.ConditionFalse || poolField(got, "available") != "28Gi" {
		t.Fatalf("after the capacity edit: %v", got.Object["status"])
	}
}

func TestSyncWaitsForTheHelmOperator(t *testing.T) {
	h := newHarness(t, pool(map[string]any{"capacity": "10Gi"}))
	got := h.reconcile(t, h.reconciler())
	if h.patches != 0 || got.Object["status"] != nil {
		t.Errorf("status written before the helm-operator's first report: %v", got.Object["status"])
	}
}

func TestDeletedPoolIsForgotten(t *testing.T) {
	h := newHarness(t)
	r := h.reconciler()
	key := types.NamespacedName{Namespace: "ns1", Name: "pool-a"}
	h.books.setPool(key, "pool-a")
	r.written[key] = writtenState{level: levelFull}
	h.reconcile404(t, r, key)
	if len(r.written) != 0 || len(h.books.allPools()) != 0 {
		t.Errorf("a deleted pool is still tracked: %v, %v", r.written, h.books.allPools())
	}
}

func (h *harness) reconcile404(t *testing.T, r *PoolReconciler, key types.NamespacedName) {
	t.Helper()
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key}); err != nil {
		t.Fatal(err)
	}
}

func TestBooksWakeThePoolsOfTheClass(t *testing.T) {
	b := NewBooks()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	a := types.NamespacedName{Namespace: "ns1", Name: "a"}
	a2 := types.NamespacedName{Namespace: "ns2", Name: "a-again"}
	bb := types.NamespacedName{Namespace: "ns1", Name: "b"}
	b.setPool(a, "class-a")
	b.setPool(a2, "class-a")
	b.setPool(bb, "class-b")
	woken := func() []string {
		var out []string
		for q.Len() > 0 {
			item, _ := q.Get()
			out = append(out, item.Name)
			q.Done(item)
		}
		return out
	}

	b.OnAdd(pvc("1", "team", "class-a", "1Gi", corev1.ClaimPending), false)
	if got := woken(); len(got) != 0 {
		t.Errorf("a standby (no queue attached) woke %v", got)
	}
	b.attach(q, 0)
	b.OnUpdate(nil, pvc("1", "team", "class-a", "2Gi", corev1.ClaimPending))
	if got := strings.Join(sorted(woken()), ","); got != "a,a-again" {
		t.Errorf("a resize woke %q, want both pools of class-a", got)
	}
	b.OnUpdate(nil, pvc("1", "team", "class-b", "2Gi", corev1.ClaimPending))
	if got := strings.Join(sorted(woken()), ","); got != "a,a-again,b" {
		t.Errorf("a class change woke %q, want the pools of both classes", got)
	}
	b.OnAdd(pvc("2", "team", "nobodys", "2Gi", corev1.ClaimPending), false)
	if got := woken(); len(got) != 0 {
		t.Errorf("a claim of a class without a pool woke %v", got)
	}
	b.setPool(bb)
	b.OnDelete(pvc("1", "team", "class-b", "2Gi", corev1.ClaimPending))
	if got := woken(); len(got) != 0 {
		t.Errorf("a removed pool was woken: %v", got)
	}
	if u := b.Usage("nobodys"); u.Pending != 1 {
		t.Errorf("the claim of a class without a pool is not in the books: %+v", u)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestBooksVerify(t *testing.T) {
	b := NewBooks()
	claims := []*corev1.PersistentVolumeClaim{
		pvc("1", "team", "a", "1Gi", corev1.ClaimBound),
		pvc("2", "team", "a", "2Gi", corev1.ClaimPending),
	}
	var recount []Claim
	for _, c := range claims {
		b.OnAdd(c, false)
		recount = append(recount, ClaimOf(c))
	}
	if diff := verifyList(b, recount, true); diff != "" {
		t.Fatalf("books equal to the claims reported a difference: %s", diff)
	}
	// An event the books never got.
	lost := pvc("3", "team", "a", "4Gi", corev1.ClaimPending)
	recount = append(recount, ClaimOf(lost))
	if diff := verifyList(b, recount, false); diff == "" {
		t.Fatal("a missed claim went unnoticed")
	}
	if b.Usage("a").Pending != 1 {
		t.Fatal("Verify without replace changed the books")
	}
	if diff := verifyList(b, recount, true); diff == "" {
		t.Fatal("a missed claim went unnoticed")
	}
	if u := b.Usage("a"); u.Pending != 2 || canonical(u.Allocated, resource.BinarySI) != "1Gi" || canonical(u.Requested, resource.BinarySI) != "6Gi" {
		t.Errorf("after the repair: %+v", u)
	}
	// Events that arrive after the repair still apply.
	b.OnAdd(lost, false)
	b.OnDelete(claims[0])
	if u := b.Usage("a"); u.Bound != 0 || u.Pending != 2 || canonical(u.Allocated, resource.BinarySI) != "0" || canonical(u.Requested, resource.BinarySI) != "6Gi" {
		t.Errorf("events after the repair: %+v", u)
	}
}

// verifyList is Books.Verify of claims.
func verifyList(b *Books, claims []Claim, replace bool) string {
	diff, _ := b.Verify(func() ([]Claim, error) { return claims, nil }, replace)
	return diff
}

// fakeRegistration is a handler registration whose initial replay ends when told.
type fakeRegistration struct{ synced chan struct{} }

func (f fakeRegistration) HasSynced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

func TestClaimSourceWaitsForTheBooks(t *testing.T) {
	reg := fakeRegistration{synced: make(chan struct{})}
	r := &PoolReconciler{Books: NewBooks(), Claims: reg, CoalesceDelay: DefaultCoalesceDelay}
	src := &claimSource{r: r}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := src.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	if r.Books.queue == nil {
		t.Fatal("Start did not attach the queue to the books")
	}
	// Given up on before the books took in the cache: the controller must not start.
	gaveUp, giveUp := context.WithCancel(ctx)
	giveUp()
	if err := src.WaitForSync(gaveUp); err == nil {
		t.Fatal("WaitForSync reported the books synced before the informer's replay ended")
	}
	close(reg.synced)
	if err := src.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
}

// The verifier leaves books that agree with the cache alone, and repairs books that missed
// an event, then wakes every pool.
func TestVerifierRepairsTheBooks(t *testing.T) {
	claims := []*corev1.PersistentVolumeClaim{
		pvc("1", "team", "a", "1Gi", corev1.ClaimBound),
		pvc("2", "team", "a", "2Gi", corev1.ClaimPending),
	}
	reader := fake.NewClientBuilder().WithObjects(claims[0], claims[1]).Build()
	b := NewBooks()
	woken := 0
	v := &Verifier{Reader: reader, Books: b, Wake: func() { woken++ }, RecheckDelay: time.Millisecond}
	for _, c := range claims {
		b.OnAdd(c, false)
	}
	v.verify(context.Background())
	if woken != 0 {
		t.Fatal("books equal to the cache were repaired")
	}

	b.OnDelete(claims[1]) // as if the books had missed a claim
	v.verify(context.Background())
	if u := b.Usage("a"); woken != 1 || u.Pending != 1 || canonical(u.Allocated, resource.BinarySI) != "1Gi" || canonical(u.Requested, resource.BinarySI) != "2Gi" {
		t.Errorf("after the repair: woken %d times, usage %+v", woken, u)
	}
}

// A claim event the informer delivers while the verifier recounts is not undone by the
// repair: the recount is of a list taken with the books locked, so that an event either is
// in the books before the list, and so in the list, or reaches them after the repair. Here
// a Pending 3Gi claim is deleted just after the list: had the event reached the books
// before the repair, the repair would bring the claim back until the next recount.
func TestVerifierRepairKeepsEventsDuringTheRecount(t *testing.T) {
	claims := []*corev1.PersistentVolumeClaim{
		pvc("1", "team", "a", "1Gi", corev1.ClaimBound),
		pvc("2", "team", "a", "3Gi", corev1.ClaimPending),
		pvc("3", "team", "a", "2Gi", corev1.ClaimPending),
	}
	b := NewBooks()
	b.OnAdd(claims[0], false)
	b.OnAdd(claims[1], false) // claim 3 missed: both recounts differ, and the second repairs
	var lists int
	delivered := make(chan struct{})
	reader := interceptor.NewClient(fake.NewClientBuilder().WithObjects(claims[0], claims[1], claims[2]).Build(),
		interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if lists++; lists != 2 {
				return nil
			}
			// The informer deletes claim 2 from the cache, then hands the event to the books.
			if err := c.Delete(ctx, claims[1]); err != nil {
				return err
			}
			if b.mu.TryLock() { // the books are not locked: the event reaches them now
				b.mu.Unlock()
				b.OnDelete(claims[1])
				close(delivered)
				return nil
			}
			go func() { b.OnDelete(claims[1]); close(delivered) }()
			return nil
		}})
	v := &Verifier{Reader: reader, Books: b, RecheckDelay: time.Millisecond}
	v.verify(context.Background())
	<-delivered
	if u := b.Usage("a"); u.Pending != 1 || canonical(u.Requested, resource.BinarySI) != "2Gi" {
		t.Errorf("after the repair and the deletion: %d pending claims request %s, want 1 requesting 2Gi",
			u.Pending, canonical(u.Requested, resource.BinarySI))
	}
}

// A claim deleted and created again under its name while the watch was down comes back from
// the relist as an update with another UID, and no deletion: the old claim leaves the books.
func TestBooksUpdateOfAClaimCreatedAgain(t *testing.T) {
	b := NewBooks()
	old := pvc("1", "team", "a", "3Gi", corev1.ClaimPending)
	b.OnAdd(old, false)
	again := pvc("2", "team", "a", "1Gi", corev1.ClaimPending)
	again.Name = old.Name
	b.OnUpdate(old, again)
	if u := b.Usage("a"); u.Pending != 1 || canonical(u.Requested, resource.BinarySI) != "1Gi" {
		t.Errorf("after the claim was created again: %d pending claims request %s, want 1 requesting 1Gi",
			u.Pending, canonical(u.Requested, resource.BinarySI))
	}
	b.OnDelete(again)
	if u := b.Usage("a"); u.Pending != 0 || !u.Requested.IsZero() {
		t.Errorf("after its deletion: %d pending claims request %s, want none", u.Pending, canonical(u.Requested, resource.BinarySI))
	}
}
