package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The sidecar keeps the books of each WarpdrivePool in status.pool: what the claims of the
// pool's StorageClass hold, in every namespace. These tests check them against a recount
// from scratch of the claims the apiserver lists, written here independently of the
// sidecar's ledger. Only Bound claims hold capacity (allocated, the usage levels, the
// Events); Pending ones are counted apart (claims.pending, requested). The books name no
// namespace, only how many have Bound claims (namespaceCount).

// poolBooks is status.pool as the sidecar writes it.
type poolBooks struct {
	StorageClassName   string `json:"storageClassName"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Capacity           string `json:"capacity"`
	Allocatable        string `json:"allocatable"`
	Allocated          string `json:"allocated"`
	Available          string `json:"available"`
	Requested          string `json:"requested"`
	Claims             struct {
		Bound   int64 `json:"bound"`
		Pending int64 `json:"pending"`
		Total   int64 `json:"total"`
	} `json:"claims"`
	NamespaceCount int64              `json:"namespaceCount"`
	Conditions     []metav1.Condition `json:"conditions"`
}

func readBooks(cr *unstructured.Unstructured) (*poolBooks, error) {
	raw, found, _ := unstructured.NestedFieldNoCopy(cr.Object, "status", "pool")
	if !found {
		return nil, fmt.Errorf("%s has no status.pool yet; status: %v", cr.GetName(), cr.Object["status"])
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	b := &poolBooks{}
	return b, json.Unmarshal(data, b)
}

func (b *poolBooks) condition(typ string) string {
	for _, c := range b.Conditions {
		if c.Type == typ {
			return string(c.Status)
		}
	}
	return ""
}

func (b *poolBooks) String() string {
	return fmt.Sprintf("allocated %s available %s of %s, requested %s, bound %d pending %d total %d, %d namespaces, CapacityAvailable=%s Overcommitted=%s",
		b.Allocated, b.Available, b.Allocatable, b.Requested, b.Claims.Bound, b.Claims.Pending, b.Claims.Total, b.NamespaceCount,
		b.condition("CapacityAvailable"), b.condition("Overcommitted"))
}

// createPool creates a WarpdrivePool named name in ns with its own StorageClass, and waits
// until it is deployed.
func createPool(t testing.TB, ns, name, capacity string, ratio any) *unstructured.Unstructured {
	t.Helper()
	cr := newCR(t, "WarpdrivePool", ns, name, map[string]any{
		"capacity": capacity, "overcommitRatio": ratio, "replicas": int64(1), "storageClassName": ns + "-" + name,
	})
	env.Create(t, cr)
	waitCondition(t, cr, "Deployed", "True")
	return cr
}

func poolClass(cr *unstructured.Unstructured) string {
	class, _, _ := unstructured.NestedString(cr.Object, "spec", "storageClassName")
	return class
}

func newClaim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// pvLabel marks the PersistentVolumes a test creates (they are cluster-scoped) with its
// namespace, for cleanup.
const pvLabel = "e2e.warpdrive.transwarp.io/namespace"

// cleanupPVs deletes the test's PersistentVolumes when it ends.
func cleanupPVs(t testing.TB, ns string) {
	t.Cleanup(func() {
		err := env.Client.DeleteAllOf(context.Background(), &corev1.PersistentVolume{}, client.MatchingLabels{pvLabel: ns})
		if err != nil {
			t.Errorf("deleting the test's PersistentVolumes: %v", err)
		}
	})
}

// volumeFor is a PersistentVolume pre-bound to claim: the controller-manager's binder binds
// them, as it would a volume a provisioner made. (No provisioner runs on the local cluster,
// so claims of a pool stay Pending otherwise.)
func volumeFor(claim *corev1.PersistentVolumeClaim, testNS string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + string(claim.UID), Labels: map[string]string{pvLabel: testNS}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              *claim.Spec.StorageClassName,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + string(claim.UID)}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
		},
	}
}

// bind binds claim to a new volume of its size and waits until it is Bound.
func bind(t testing.TB, claim *corev1.PersistentVolumeClaim, testNS string) {
	t.Helper()
	env.Create(t, volumeFor(claim, testNS))
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if err := get(ctx, claim); err != nil {
			return err
		}
		if claim.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s/%s is %s, want Bound", claim.Namespace, claim.Name, claim.Status.Phase)
		}
		return nil
	})
}

// resize grows a bound claim's request (the apiserver allows it only for bound claims of
// a class that allows expansion, as the pool's does).
func resize(t testing.TB, claim *corev1.PersistentVolumeClaim, size string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size)
	if err := env.Client.Patch(context.Background(), claim, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("resizing %s/%s to %s: %v", claim.Namespace, claim.Name, size, err)
	}
}

// waitBooks waits until the pool's books pass check.
func waitBooks(t testing.TB, cr *unstructured.Unstructured, check func(b *poolBooks) error) *poolBooks {
	t.Helper()
	var books *poolBooks
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, cr)
		if err != nil {
			return err
		}
		if books, err = readBooks(got); err != nil {
			return err
		}
		if err := check(books); err != nil {
			return fmt.Errorf("pool %s: %w\n  books: %s", cr.GetName(), err, books)
		}
		return nil
	})
	return books
}

// wantBooks is what a test expects of a pool, in the pool's canonical quantities.
type wantBooks struct {
	// allocated is what the Bound claims hold; requested what the Pending ones ask for.
	allocated, available, requested string
	bound, pending                  int64
	// namespaces is how many namespaces have Bound claims.
	namespaces        int64
	capacityAvailable string
	overcommitted     string
}

func (w wantBooks) check(b *poolBooks) error {
	requested := w.requested
	if requested == "" {
		requested = "0"
	}
	switch {
	case b.Allocated != w.allocated || b.Available != w.available:
		return fmt.Errorf("allocated %s available %s, want %s and %s", b.Allocated, b.Available, w.allocated, w.available)
	case b.Requested != requested:
		return fmt.Errorf("requested %s, want %s", b.Requested, requested)
	case b.Claims.Bound != w.bound || b.Claims.Pending != w.pending || b.Claims.Total != w.bound+w.pending:
		return fmt.Errorf("claims %+v, want %d bound and %d pending", b.Claims, w.bound, w.pending)
	case b.NamespaceCount != w.namespaces:
		return fmt.Errorf("namespaceCount %d, want %d", b.NamespaceCount, w.namespaces)
	case w.capacityAvailable != "" && b.condition("CapacityAvailable") != w.capacityAvailable:
		return fmt.Errorf("CapacityAvailable=%s, want %s", b.condition("CapacityAvailable"), w.capacityAvailable)
	case w.overcommitted != "" && b.condition("Overcommitted") != w.overcommitted:
		return fmt.Errorf("Overcommitted=%s, want %s", b.condition("Overcommitted"), w.overcommitted)
	}
	return nil
}

// TestPoolBookkeeping: claims created, bound, resized and deleted across namespaces and two
// pools; after each step each pool's status.pool is exact (Bound claims allocated, Pending
// ones requested, a count of namespaces and no name), and kubectl shows it.
func TestPoolBookkeeping(t *testing.T) {
	ns1, ns2, ns3 := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	cleanupPVs(t, ns1)
	a := createPool(t, ns1, "pool-a", "10Gi", int64(1))
	b := createPool(t, ns1, "pool-b", "20Gi", 1.5)
	classA, classB := poolClass(a), poolClass(b)

	t.Log("empty pools")
	waitBooks(t, a, wantBooks{allocated: "0", available: "10Gi", capacityAvailable: "True", overcommitted: "False"}.check)
	books := waitBooks(t, b, wantBooks{allocated: "0", available: "30Gi"}.check)
	if books.Capacity != "20Gi" || books.Allocatable != "30Gi" || books.StorageClassName != classB || books.ObservedGeneration != 1 {
		t.Errorf("pool-b: capacity %s allocatable %s class %s generation %d; want 20Gi, 30Gi (20Gi × 1.5), %s, 1",
			books.Capacity, books.Allocatable, books.StorageClassName, books.ObservedGeneration, classB)
	}

	t.Log("claims in three namespaces, one of a class no pool serves")
	a1 := newClaim(ns1, "a1", classA, "1Gi")
	a2 := newClaim(ns2, "a2", classA, "2Gi")
	a3 := newClaim(ns2, "a3", classA, "512Mi")
	b1 := newClaim(ns2, "b1", classB, "3Gi")
	b2 := newClaim(ns3, "b2", classB, "500Mi")
	other := newClaim(ns3, "other", ns1+"-no-such-pool", "100Gi")
	for _, c := range []*corev1.PersistentVolumeClaim{a1, a2, a3, b1, b2, other} {
		env.Create(t, c)
	}
	t.Log("all Pending: asked for, nothing held")
	waitBooks(t, a, wantBooks{allocated: "0", available: "10Gi", requested: "3584Mi", pending: 3}.check)
	waitBooks(t, b, wantBooks{allocated: "0", available: "30Gi", requested: "3572Mi", pending: 2}.check)

	t.Log("a1 bound: Pending → Bound, same size, from requested to allocated")
	bind(t, a1, ns1)
	waitBooks(t, a, wantBooks{allocated: "1Gi", available: "9Gi", requested: "2560Mi", bound: 1, pending: 2, namespaces: 1}.check)

	t.Log("a2 and b1 bound: a second namespace holds pool-a, one holds pool-b")
	bind(t, a2, ns1)
	bind(t, b1, ns1)
	waitBooks(t, a, wantBooks{allocated: "3Gi", available: "7Gi", requested: "512Mi", bound: 2, pending: 1, namespaces: 2}.check)
	waitBooks(t, b, wantBooks{allocated: "3Gi", available: "27Gi", requested: "500Mi", bound: 1, pending: 1, namespaces: 1}.check)

	t.Log("a1 resized to 4Gi: counts at its new size (its volume is still 1Gi)")
	resize(t, a1, "4Gi")
	waitBooks(t, a, wantBooks{allocated: "6Gi", available: "4Gi", requested: "512Mi", bound: 2, pending: 1, namespaces: 2}.check)

	t.Log("b2 deleted; a3 deleted")
	for _, c := range []*corev1.PersistentVolumeClaim{b2, a3} {
		if err := env.Client.Delete(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	waitBooks(t, b, wantBooks{allocated: "3Gi", available: "27Gi", bound: 1, namespaces: 1}.check)
	waitBooks(t, a, wantBooks{allocated: "6Gi", available: "4Gi", bound: 2, namespaces: 2,
		capacityAvailable: "True", overcommitted: "False"}.check)

	t.Log("the books name no namespace: pool-a's status shows neither of the others")
	for _, p := range []*unstructured.Unstructured{a, b} {
		raw, _ := json.Marshal(mustGetCR(t, p).Object["status"])
		for _, other := range []string{ns2, ns3} {
			if strings.Contains(string(raw), other) {
				t.Errorf("pool %s's status names namespace %s: %s", p.GetName(), other, raw)
			}
		}
		if pool, _, _ := unstructured.NestedMap(mustGetCR(t, p).Object, "status", "pool"); pool["namespaces"] != nil {
			t.Errorf("pool %s's status.pool lists namespaces: %v", p.GetName(), pool["namespaces"])
		}
	}

	t.Log("kubectl shows capacity, allocated, free and claims")
	out, err := env.Kubectl("get", "warpdrivepools", "-n", ns1)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(strings.Join(strings.Fields(lines[0]), " "), "CAPACITY ALLOCATED FREE CLAIMS") {
		t.Fatalf("kubectl get:\n%s", out)
	}
	// The columns by their headers: the printer columns of every kind come before them.
	header := strings.Fields(lines[0])
	columns := []string{"NAME", "CAPACITY", "ALLOCATED", "FREE", "CLAIMS", "READY"}
	for _, row := range []struct{ line, want string }{{lines[1], "pool-a 10Gi 6Gi 4Gi 2 True"}, {lines[2], "pool-b 20Gi 3Gi 27Gi 1 True"}} {
		f := strings.Fields(row.line)
		var got []string
		for _, c := range columns {
			if i := slices.Index(header, c); i >= 0 && i < len(f) {
				got = append(got, f[i])
			}
		}
		if strings.Join(got, " ") != row.want {
			t.Errorf("kubectl get row %q (header %q), want %v: %q", row.line, lines[0], columns, row.want)
		}
	}

	t.Log("pool-b deleted: its claims stay as they were, pool-a's books go on")
	before := b1.DeepCopy()
	if err := get(context.Background(), before); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	waitGone(t, b)
	after := b1.DeepCopy()
	if err := get(context.Background(), after); err != nil {
		t.Fatalf("pool-b's claim is gone with the pool: %v", err)
	}
	if after.ResourceVersion != before.ResourceVersion || after.DeletionTimestamp != nil {
		t.Errorf("pool-b's claim was modified when the pool was deleted: %v", after)
	}
	env.Create(t, newClaim(ns3, "a4", classA, "1Gi"))
	waitBooks(t, a, wantBooks{allocated: "6Gi", available: "4Gi", requested: "1Gi", bound: 2, pending: 1, namespaces: 2}.check)
}

// poolEvents counts the Events of each reason recorded on a pool (an Event repeated by the
// recorder counts as many times as it happened).
func poolEvents(ctx context.Context, cr *unstructured.Unstructured) (map[string]int32, error) {
	list, err := env.Clientset.CoreV1().Events(cr.GetNamespace()).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": cr.GetName(), "involvedObject.kind": cr.GetKind()}.String(),
	})
	if err != nil {
		return nil, err
	}
	counts := map[string]int32{}
	for _, e := range list.Items {
		if e.Source.Component != "warpdrive-sidecar" && e.ReportingController != "warpdrive-sidecar" {
			continue
		}
		counts[e.Reason] += max(e.Count, 1)
	}
	return counts, nil
}

func waitEvents(t testing.TB, cr *unstructured.Unstructured, high, full int32) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		counts, err := poolEvents(ctx, cr)
		if err != nil {
			return err
		}
		if counts["PoolUsageHigh"] != high || counts["PoolFull"] != full {
			return fmt.Errorf("events %v, want PoolUsageHigh %d and PoolFull %d", counts, high, full)
		}
		return nil
	})
}

// TestPoolThresholdEvents: usage crossing 80% and 100% records one Event each and flips the
// conditions; a capacity or ratio edit re-evaluates them at once, without any claim event.
// Only Bound claims fill the pool (the test binds each claim it fills it with): a Pending
// claim of 1Pi, which never binds, crosses nothing. The Events name no namespace.
func TestPoolThresholdEvents(t *testing.T) {
	ns := env.Namespace(t)
	cleanupPVs(t, ns)
	pool := createPool(t, ns, "events", "10Gi", int64(1))
	class := poolClass(pool)
	claim := func(name, size string) {
		c := newClaim(ns, name, class, size)
		env.Create(t, c)
		bind(t, c, ns)
	}

	claim("c1", "4Gi")
	waitBooks(t, pool, wantBooks{allocated: "4Gi", available: "6Gi", bound: 1, namespaces: 1, capacityAvailable: "True", overcommitted: "False"}.check)
	waitEvents(t, pool, 0, 0)

	t.Log("a Pending claim of 1Pi: asked for, not held; no crossing")
	env.Create(t, newClaim(ns, "huge", class, "1Pi"))
	waitBooks(t, pool, wantBooks{allocated: "4Gi", available: "6Gi", requested: "1Pi", bound: 1, pending: 1, namespaces: 1,
		capacityAvailable: "True", overcommitted: "False"}.check)
	waitEvents(t, pool, 0, 0)

	t.Log("80%")
	claim("c2", "4Gi")
	waitBooks(t, pool, wantBooks{allocated: "8Gi", available: "2Gi", requested: "1Pi", bound: 2, pending: 1, namespaces: 1,
		capacityAvailable: "True", overcommitted: "False"}.check)
	waitEvents(t, pool, 1, 0)

	t.Log("100%: full, not yet over the physical capacity")
	claim("c3", "2Gi")
	books := waitBooks(t, pool, wantBooks{allocated: "10Gi", available: "0", requested: "1Pi", bound: 3, pending: 1, namespaces: 1,
		capacityAvailable: "False", overcommitted: "False"}.check)
	waitEvents(t, pool, 1, 1)
	for _, c := range books.Conditions {
		if c.Type == "CapacityAvailable" && (c.Reason != "PoolFull" || !strings.Contains(c.Message, "spec.capacity")) {
			t.Errorf("CapacityAvailable=False says %s: %q; want what to do about it", c.Reason, c.Message)
		}
	}
	checkEventMessages(t, pool, "3 bound claims", "in 1 namespace;", "1 pending claims ask for 1Pi more")

	t.Log("110%: overcommitted; no new crossing, no new Event")
	claim("c4", "1Gi")
	waitBooks(t, pool, wantBooks{allocated: "11Gi", available: "-1Gi", requested: "1Pi", bound: 4, pending: 1, namespaces: 1,
		capacityAvailable: "False", overcommitted: "True"}.check)

	t.Log("overcommitRatio 2: room again at once, still over the physical capacity")
	patchSpec(t, pool, map[string]any{"overcommitRatio": int64(2)})
	books = waitBooks(t, pool, wantBooks{allocated: "11Gi", available: "9Gi", requested: "1Pi", bound: 4, pending: 1, namespaces: 1,
		capacityAvailable: "True", overcommitted: "True"}.check)
	if books.Allocatable != "20Gi" || books.ObservedGeneration != 2 {
		t.Errorf("after the ratio edit: allocatable %s at generation %d, want 20Gi at 2", books.Allocatable, books.ObservedGeneration)
	}

	t.Log("capacity 20Gi, ratio 1: within capacity")
	patchSpec(t, pool, map[string]any{"capacity": "20Gi", "overcommitRatio": int64(1)})
	waitBooks(t, pool, wantBooks{allocated: "11Gi", available: "9Gi", requested: "1Pi", bound: 4, pending: 1, namespaces: 1,
		capacityAvailable: "True", overcommitted: "False"}.check)
	waitEvents(t, pool, 1, 1)

	t.Log("capacity back to 10Gi: both thresholds crossed again, one Event each")
	patchSpec(t, pool, map[string]any{"capacity": "10Gi"})
	waitBooks(t, pool, wantBooks{allocated: "11Gi", available: "-1Gi", requested: "1Pi", bound: 4, pending: 1, namespaces: 1,
		capacityAvailable: "False", overcommitted: "True"}.check)
	waitEvents(t, pool, 2, 2)

	t.Log("a claim that crosses nothing: the counts stay")
	claim("c5", "1Gi")
	waitBooks(t, pool, wantBooks{allocated: "12Gi", available: "-2Gi", requested: "1Pi", bound: 5, pending: 1, namespaces: 1}.check)
	counts, err := poolEvents(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	if counts["PoolUsageHigh"] != 2 || counts["PoolFull"] != 2 {
		t.Errorf("events %v, want 2 of each: one per crossing", counts)
	}
}

// checkEventMessages checks that the sidecar's usage Events on the pool say each of says
// and name no namespace (the pool's own, the only one whose claims the test makes, either).
func checkEventMessages(t testing.TB, cr *unstructured.Unstructured, says ...string) {
	t.Helper()
	list, err := env.Clientset.CoreV1().Events(cr.GetNamespace()).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": cr.GetName(), "involvedObject.kind": cr.GetKind()}.String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason != "PoolUsageHigh" && e.Reason != "PoolFull" {
			continue
		}
		n++
		// The class is named <namespace>-<pool>: take it out before looking for the namespace.
		msg := strings.ReplaceAll(e.Message, poolClass(cr), "<class>")
		if strings.Contains(msg, cr.GetNamespace()) {
			t.Errorf("%s Event names namespace %s: %q", e.Reason, cr.GetNamespace(), e.Message)
		}
		if e.Reason != "PoolFull" {
			continue
		}
		for _, s := range says {
			if !strings.Contains(e.Message, s) {
				t.Errorf("%s Event %q does not say %q", e.Reason, e.Message, s)
			}
		}
	}
	if n == 0 {
		t.Errorf("no usage Event on pool %s", cr.GetName())
	}
}

// recount is the books of one class recounted from scratch from the claims the apiserver
// lists, as the pool's status must show them at a quiet moment.
type recount struct {
	// allocated is what the Bound claims hold, requested what the Pending ones ask for.
	allocated, requested resource.Quantity
	bound, pending       int64
	// namespaces are those with Bound claims.
	namespaces map[string]bool
}

func recountClaims(ctx context.Context, class string) (*recount, error) {
	var list corev1.PersistentVolumeClaimList
	if err := env.Client.List(ctx, &list); err != nil {
		return nil, err
	}
	r := &recount{namespaces: map[string]bool{}}
	for _, c := range list.Items {
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != class {
			continue
		}
		size := c.Spec.Resources.Requests[corev1.ResourceStorage]
		switch c.Status.Phase {
		case corev1.ClaimBound:
			r.bound++
			r.allocated.Add(size)
			r.namespaces[c.Namespace] = true
		case corev1.ClaimPending, "":
			r.pending++
			r.requested.Add(size)
		}
	}
	return r, nil
}

// matches compares books with the recount: quantities by value, the namespaces by count.
func (r *recount) matches(b *poolBooks) error {
	eq := func(field, got string, want resource.Quantity) error {
		q, err := resource.ParseQuantity(got)
		if err != nil {
			return fmt.Errorf("%s %q: %w", field, got, err)
		}
		if q.Cmp(want) != 0 {
			return fmt.Errorf("%s %s, recount %s", field, got, want.String())
		}
		return nil
	}
	if err := eq("allocated", b.Allocated, r.allocated); err != nil {
		return err
	}
	allocatable := resource.MustParse(b.Allocatable)
	allocatable.Sub(r.allocated)
	if err := eq("available", b.Available, allocatable); err != nil {
		return err
	}
	if err := eq("requested", b.Requested, r.requested); err != nil {
		return err
	}
	if b.Claims.Bound != r.bound || b.Claims.Pending != r.pending || b.Claims.Total != r.bound+r.pending {
		return fmt.Errorf("claims %+v, recount %d bound %d pending", b.Claims, r.bound, r.pending)
	}
	if b.NamespaceCount != int64(len(r.namespaces)) {
		return fmt.Errorf("namespaceCount %d, recount %d namespaces with Bound claims", b.NamespaceCount, len(r.namespaces))
	}
	return nil
}

// waitRecount waits until each pool's books equal a recount from scratch.
func waitRecount(t testing.TB, pools ...*unstructured.Unstructured) {
	t.Helper()
	for _, p := range pools {
		framework.Eventually(t, converge, func(ctx context.Context) error {
			got, err := getCR(ctx, p)
			if err != nil {
				return err
			}
			books, err := readBooks(got)
			if err != nil {
				return err
			}
			r, err := recountClaims(ctx, poolClass(p))
			if err != nil {
				return err
			}
			if err := r.matches(books); err != nil {
				return fmt.Errorf("pool %s: %w", p.GetName(), err)
			}
			return nil
		})
		got := mustGetCR(t, p)
		books, _ := readBooks(got)
		t.Logf("pool %s equals the recount: %s", p.GetName(), books)
	}
}

// churn makes random claim operations: create, delete, bind (a pre-bound volume) and
// resize (grow a bound claim), spread over namespaces and classes, by several workers each
// on its own claims.
type churn struct {
	t          testing.TB
	testNS     string
	namespaces []string
	classes    []string
	done       atomic.Int64
	byKind     sync.Map // op kind -> *atomic.Int64

	mu sync.Mutex
	// withVolume are the claims left at the end for which a volume was made.
	withVolume map[types.UID]bool
}

var churnSizes = []string{"1Gi", "2Gi", "512Mi", "1G", "250M", "3Gi", "100Mi"}

type churnClaim struct {
	claim   *corev1.PersistentVolumeClaim
	bound   bool // a volume was made for it
	resized int
}

func (c *churn) count(kind string) {
	c.done.Add(1)
	n, _ := c.byKind.LoadOrStore(kind, &atomic.Int64{})
	n.(*atomic.Int64).Add(1)
}

func (c *churn) summary() string {
	var parts []string
	c.byKind.Range(func(k, v any) bool {
		parts = append(parts, fmt.Sprintf("%s %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	sort.Strings(parts)
	return fmt.Sprintf("%d operations: %s", c.done.Load(), strings.Join(parts, ", "))
}

// run makes ops operations with workers workers, seeded with seed.
func (c *churn) run(ctx context.Context, workers, ops int, seed int64, prefix string) {
	c.mu.Lock()
	c.withVolume = map[types.UID]bool{}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c.worker(ctx, rand.New(rand.NewSource(seed+int64(w))), fmt.Sprintf("%s-w%d", prefix, w), ops/workers)
		}(w)
	}
	wg.Wait()
}

func (c *churn) worker(ctx context.Context, rng *rand.Rand, prefix string, ops int) {
	var claims []*churnClaim
	pick := func(ok func(*churnClaim) bool) int {
		var idx []int
		for i, cl := range claims {
			if ok(cl) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return -1
		}
		return idx[rng.Intn(len(idx))]
	}
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, cl := range claims {
			if cl.bound {
				c.withVolume[cl.claim.UID] = true
			}
		}
	}()
	for done, seq := 0, 0; done < ops && ctx.Err() == nil; {
		switch p := rng.Intn(100); {
		case p < 45 || len(claims) == 0: // create
			seq++
			cl := newClaim(c.namespaces[rng.Intn(len(c.namespaces))], fmt.Sprintf("%s-%d", prefix, seq),
				c.classes[rng.Intn(len(c.classes))], churnSizes[rng.Intn(len(churnSizes))])
			if err := env.Client.Create(ctx, cl); err != nil {
				c.t.Errorf("creating claim %s: %v", cl.Name, err)
				continue
			}
			claims = append(claims, &churnClaim{claim: cl})
			c.count("create")
			done++
		case p < 70: // delete
			i := rng.Intn(len(claims))
			if err := env.Client.Delete(ctx, claims[i].claim); err != nil && !apierrors.IsNotFound(err) {
				c.t.Errorf("deleting claim %s: %v", claims[i].claim.Name, err)
				continue
			}
			claims = append(claims[:i], claims[i+1:]...)
			c.count("delete")
			done++
		case p < 80: // bind
			i := pick(func(cl *churnClaim) bool { return !cl.bound })
			if i < 0 {
				continue
			}
			if err := env.Client.Create(ctx, volumeFor(claims[i].claim, c.testNS)); err != nil {
				c.t.Errorf("creating a volume for claim %s: %v", claims[i].claim.Name, err)
				continue
			}
			claims[i].bound = true
			c.count("bind")
			done++
		default: // resize: only a Bound claim may grow
			i := pick(func(cl *churnClaim) bool { return cl.bound })
			if i < 0 {
				continue
			}
			cl := claims[i]
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cl.claim), cl.claim); err != nil || cl.claim.Status.Phase != corev1.ClaimBound {
				continue // not bound yet
			}
			size := cl.claim.Spec.Resources.Requests[corev1.ResourceStorage]
			size.Add(resource.MustParse(churnSizes[rng.Intn(len(churnSizes))]))
			patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"storage":%q}}}}`, size.String())
			if err := env.Client.Patch(ctx, cl.claim, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				if !apierrors.IsNotFound(err) {
					c.t.Errorf("resizing claim %s: %v", cl.claim.Name, err)
				}
				continue
			}
			cl.resized++
			c.count("resize")
			done++
		}
	}
}

// waitVolumesBound waits until every claim left that got a volume is Bound, so that the
// recount that follows includes Pending → Bound transitions.
func (c *churn) waitVolumesBound(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var list corev1.PersistentVolumeClaimList
		if err := env.Client.List(ctx, &list); err != nil {
			return err
		}
		waiting := 0
		for _, cl := range list.Items {
			if c.withVolume[cl.UID] && cl.Status.Phase != corev1.ClaimBound {
				waiting++
			}
		}
		if waiting > 0 {
			return fmt.Errorf("%d of %d claims with a volume not Bound yet", waiting, len(c.withVolume))
		}
		return nil
	})
}

// churnSetup makes two pools and the namespaces and classes to churn over: the two pools'
// classes and one that no pool serves (its StorageClass names another provisioner, so that
// the controller-manager waits for it quietly, as for the pools').
func churnSetup(t *testing.T) (*churn, []*unstructured.Unstructured) {
	ns := env.Namespace(t)
	cleanupPVs(t, ns)
	namespaces := []string{ns, env.Namespace(t), env.Namespace(t), env.Namespace(t)}
	pools := []*unstructured.Unstructured{
		createPool(t, ns, "churn-a", "1Ti", int64(1)),
		createPool(t, ns, "churn-b", "500Gi", 2.5),
	}
	other := &storagev1.StorageClass{
		ObjectMeta:           metav1.ObjectMeta{Name: ns + "-no-pool"},
		Provisioner:          "example.com/not-a-pool",
		AllowVolumeExpansion: ptr.To(true),
	}
	env.Create(t, other)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), other) })
	c := &churn{t: t, testNS: ns, namespaces: namespaces,
		classes: []string{poolClass(pools[0]), poolClass(pools[1]), other.Name}}
	return c, pools
}

// waitRecountWithBound is waitRecount, and checks that claims of every pool were bound
// along the way.
func waitRecountWithBound(t testing.TB, pools ...*unstructured.Unstructured) {
	t.Helper()
	waitRecount(t, pools...)
	for _, p := range pools {
		books, err := readBooks(mustGetCR(t, p))
		if err != nil {
			t.Fatal(err)
		}
		if books.Claims.Bound == 0 {
			t.Errorf("pool %s has no bound claims: the churn did not exercise binding", p.GetName())
		}
	}
}

// TestPoolChurn: 2400 random claim operations by eight concurrent workers; at the end each
// pool's books equal a recount from scratch.
func TestPoolChurn(t *testing.T) {
	c, pools := churnSetup(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	c.run(context.Background(), 8, 2400, seed, "churn")
	t.Log(c.summary())
	if c.done.Load() < 2000 {
		t.Fatalf("only %d operations made", c.done.Load())
	}
	c.waitVolumesBound(t)
	waitRecountWithBound(t, pools...)
}

// TestPoolFailover: the leading sidecar is killed in the middle of churn; the standby takes
// over and at the end the books equal a recount from scratch: nothing was lost.
func TestPoolFailover(t *testing.T) {
	c, pools := churnSetup(t)
	addr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	standby, err := startSidecar("sidecar-pool-standby", addr, false)
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func(context.Context) error {
		_, err := framework.Metric(addr, "leader_election_master_status")
		return err
	})
	if n, _ := framework.Metric(addr, "leader_election_master_status"); n != 0 {
		t.Fatal("the standby reports itself leader while the leader lives")
	}

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	churned := make(chan struct{})
	go func() {
		defer close(churned)
		c.run(context.Background(), 8, 1600, seed, "failover")
	}()
	framework.Eventually(t, converge, func(context.Context) error {
		if n := c.done.Load(); n < 500 {
			return fmt.Errorf("%d operations so far", n)
		}
		return nil
	})
	t.Logf("killing the leader after %d operations", c.done.Load())
	sidecar.Kill()
	sidecar = standby
	<-churned
	t.Log(c.summary())

	c.waitVolumesBound(t)
	waitRecountWithBound(t, pools...)
	if n, err := framework.Metric(addr, "leader_election_master_status"); err != nil || n != 1 {
		t.Fatalf("the standby is not leader after the failover (%v, %v)", n, err)
	}
	if n, _ := framework.Metric(addr, "controller_runtime_reconcile_total", `controller="poolstatus"`); n == 0 {
		t.Fatal("the books followed, but not through the standby's syncs")
	}
}

// The books are a pool's only if its StorageClass is its own: a pool whose spec names a
// class that another pool's release, or the cluster, created keeps none, so that a
// namespace editor cannot read other namespaces' usage through a pool's status.

// usageFields are the fields of status.pool that show what the class's claims hold.
var usageFields = []string{"allocated", "available", "requested", "claims", "namespaceCount"}

// waitNoBooks waits until the pool's status.pool shows no usage, no usage conditions, and
// BooksKept=False for reason with a message that says each of says; it returns status.pool.
func waitNoBooks(t testing.TB, cr *unstructured.Unstructured, reason string, says ...string) map[string]any {
	t.Helper()
	var pool map[string]any
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, cr)
		if err != nil {
			return err
		}
		var found bool
		if pool, found, _ = unstructured.NestedMap(got.Object, "status", "pool"); !found {
			return fmt.Errorf("%s has no status.pool yet; status: %v", cr.GetName(), got.Object["status"])
		}
		books, err := readBooks(got)
		if err != nil {
			return err
		}
		var kept *metav1.Condition
		for i, c := range books.Conditions {
			switch c.Type {
			case "BooksKept":
				kept = &books.Conditions[i]
			case "CapacityAvailable", "Overcommitted":
				return fmt.Errorf("pool %s has the usage condition %s: %q", cr.GetName(), c.Type, c.Message)
			}
		}
		if kept == nil || kept.Status != metav1.ConditionFalse || kept.Reason != reason {
			return fmt.Errorf("pool %s: BooksKept %+v, want False for %s", cr.GetName(), kept, reason)
		}
		for _, s := range says {
			if !strings.Contains(kept.Message, s) {
				return fmt.Errorf("pool %s: BooksKept message %q does not say %q", cr.GetName(), kept.Message, s)
			}
		}
		for _, f := range usageFields {
			if v, ok := pool[f]; ok {
				return fmt.Errorf("pool %s keeps no books, yet status.pool.%s is %v", cr.GetName(), f, v)
			}
		}
		return nil
	})
	return pool
}

// expectNoSidecarEvents checks that the sidecar recorded no usage Event on the pool.
func expectNoSidecarEvents(t testing.TB, cr *unstructured.Unstructured) {
	t.Helper()
	counts, err := poolEvents(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 0 {
		t.Errorf("usage Events on pool %s, which keeps no books: %v", cr.GetName(), counts)
	}
}

// TestPoolForeignStorageClassKeepsNoBooks: pool "owner" in n1 owns its StorageClass; pool
// "thief" in n2 names the same class. Helm refuses to adopt the class, the thief's release
// fails, and the thief's status shows nothing of the class's claims (of n1 or any other
// namespace) and says whose class it is; the owner's books go on as before. Once the owner
// is deleted (its release uninstalled, the class with it), the thief's release creates the
// class, and the books of that class become the thief's.
func TestPoolForeignStorageClassKeepsNoBooks(t *testing.T) {
	ctx := context.Background()
	n1, n2, n3 := env.Namespace(t), env.Namespace(t), env.Namespace(t)
	cleanupPVs(t, n1)
	owner := createPool(t, n1, "owner", "10Gi", int64(1))
	class := poolClass(owner)
	// Bound, so that they hold capacity: only Bound claims fill a pool.
	boundClaim := func(ns, name, size string) {
		c := newClaim(ns, name, class, size)
		env.Create(t, c)
		bind(t, c, n1)
	}
	boundClaim(n1, "db", "2Gi")
	boundClaim(n3, "cache", "1Gi")
	waitBooks(t, owner, wantBooks{allocated: "3Gi", available: "7Gi", bound: 2, namespaces: 2}.check)
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}}
	if err := get(ctx, sc); err != nil {
		t.Fatal(err)
	}

	t.Log("a pool of another namespace names the owner's class: its release fails, it keeps no books")
	// 1Gi: the owner's claims would fill it three times over, and raise both Events.
	thief := newCR(t, "WarpdrivePool", n2, "thief", map[string]any{
		"capacity": "1Gi", "overcommitRatio": int64(1), "replicas": int64(1), "storageClassName": class})
	env.Create(t, thief)
	waitCondition(t, thief, "ReleaseFailed", "True")
	pool := waitNoBooks(t, thief, "StorageClassNotOwned", fmt.Sprintf("StorageClass %q", class), "a Helm release of another namespace")
	if pool["storageClassName"] != class || pool["capacity"] != "1Gi" {
		t.Errorf("thief's status.pool %v: want its class and capacity still", pool)
	}
	raw, _ := json.Marshal(mustGetCR(t, thief).Object["status"])
	for _, leak := range []string{n3, "3Gi", "2Gi"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("the thief's status shows %q of the owner's claims: %s", leak, raw)
		}
	}

	t.Log("a new claim counts for the owner only")
	boundClaim(n1, "logs", "4Gi")
	waitBooks(t, owner, wantBooks{allocated: "7Gi", available: "3Gi", bound: 3, namespaces: 2,
		capacityAvailable: "True", overcommitted: "False"}.check)
	if raw, _ := json.Marshal(mustGetCR(t, owner).Object["status"]); strings.Contains(string(raw), n3) {
		t.Errorf("the owner's status names namespace %s, whose claim it counts: %s", n3, raw)
	}
	waitNoBooks(t, thief, "StorageClassNotOwned")
	expectNoSidecarEvents(t, thief)
	expectPoolUntouched(t, owner, sc)
	if err := get(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if sc.Annotations["meta.helm.sh/release-name"] != "owner" || sc.Annotations["meta.helm.sh/release-namespace"] != n1 {
		t.Errorf("the owner's StorageClass has ownership annotations %v", sc.Annotations)
	}

	t.Log("the owner is deleted: its class goes; the thief's release creates it, and keeps its books")
	if err := env.Client.Delete(ctx, owner); err != nil {
		t.Fatal(err)
	}
	waitGone(t, owner)
	waitCondition(t, thief, "Deployed", "True")
	books := waitBooks(t, thief, wantBooks{allocated: "7Gi", available: "-6Gi", bound: 3, namespaces: 2,
		capacityAvailable: "False", overcommitted: "True"}.check)
	for _, c := range books.Conditions {
		if c.Type == "BooksKept" && (c.Status != metav1.ConditionTrue || c.Reason != "StorageClassOwned") {
			t.Errorf("BooksKept %+v once the class is the thief's", c)
		}
	}
	if err := get(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if sc.Annotations["meta.helm.sh/release-name"] != "thief" || sc.Annotations["meta.helm.sh/release-namespace"] != n2 {
		t.Errorf("the class's ownership annotations %v, want the thief's release", sc.Annotations)
	}
}

// TestPoolClusterStorageClassKeepsNoBooks: a StorageClass the cluster admin made (no Helm
// annotations) is no pool's: a pool that names it keeps no books of its claims.
func TestPoolClusterStorageClassKeepsNoBooks(t *testing.T) {
	ns, users := env.Namespace(t), env.Namespace(t)
	clusterSC := &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: ns + "-cluster"},
		Provisioner: "example.com/not-a-pool",
	}
	env.Create(t, clusterSC)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), clusterSC) })
	env.Create(t, newClaim(users, "data", clusterSC.Name, "5Gi"))

	pool := newCR(t, "WarpdrivePool", ns, "taker", map[string]any{
		"capacity": "1Gi", "overcommitRatio": int64(1), "replicas": int64(1), "storageClassName": clusterSC.Name})
	env.Create(t, pool)
	waitCondition(t, pool, "ReleaseFailed", "True")
	waitNoBooks(t, pool, "StorageClassNotOwned", fmt.Sprintf("StorageClass %q", clusterSC.Name), "not created by a Helm release")
	raw, _ := json.Marshal(mustGetCR(t, pool).Object["status"])
	if strings.Contains(string(raw), users) || strings.Contains(string(raw), "5Gi") {
		t.Errorf("the pool's status shows the cluster class's claims: %s", raw)
	}
	expectNoSidecarEvents(t, pool)
}

// TestPoolStorageClassNameImmutable: the apiserver refuses to change, add or remove a pool's
// storageClassName, which would move its books to another class.
func TestPoolStorageClassNameImmutable(t *testing.T) {
	ns := env.Namespace(t)
	named := newCR(t, "WarpdrivePool", ns, "named", map[string]any{"capacity": "1Gi", "storageClassName": ns + "-named"})
	env.Create(t, named)
	// Without storageClassName the class is <namespace>.<name>: a name unique to the test.
	unnamed := newCR(t, "WarpdrivePool", ns, "unnamed", map[string]any{"capacity": "1Gi"})
	unstructured.RemoveNestedField(unnamed.Object, "spec", "storageClassName")
	env.Create(t, unnamed)

	cases := []struct {
		name  string
		cr    *unstructured.Unstructured
		patch string
		want  string
	}{
		{"renamed", named, `{"spec":{"storageClassName":"` + ns + `-other"}}`, "storageClassName cannot be changed"},
		{"removed", named, `{"spec":{"storageClassName":null}}`, "storageClassName cannot be added or removed after creation"},
		{"added", unnamed, `{"spec":{"storageClassName":"` + ns + `-added"}}`, "storageClassName cannot be added or removed after creation"},
	}
	for _, tc := range cases {
		err := env.Client.Patch(context.Background(), tc.cr.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(tc.patch)))
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid saying %q", tc.name, err, tc.want)
		}
	}
	patchSpec(t, named, map[string]any{"capacity": "2Gi"})
	if got := poolClass(mustGetCR(t, named)); got != ns+"-named" {
		t.Errorf("storageClassName %q after the refused edits", got)
	}
}

// defaultPool creates a WarpdrivePool named name in ns without spec.storageClassName.
func defaultPool(t testing.TB, ns, name string) *unstructured.Unstructured {
	t.Helper()
	cr := newCR(t, "WarpdrivePool", ns, name, map[string]any{"capacity": "1Gi", "replicas": int64(1)})
	unstructured.RemoveNestedField(cr.Object, "spec", "storageClassName")
	env.Create(t, cr)
	return cr
}

// waitOwnClass waits until the pool's release has made the StorageClass class and the pool
// keeps its books.
func waitOwnClass(t testing.TB, pool *unstructured.Unstructured, class string) {
	t.Helper()
	waitCondition(t, pool, "Deployed", "True")
	framework.Eventually(t, converge, func(ctx context.Context) error {
		sc := &storagev1.StorageClass{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: class}, sc); err != nil {
			return err
		}
		if a := sc.Annotations; a["meta.helm.sh/release-name"] != pool.GetName() || a["meta.helm.sh/release-namespace"] != pool.GetNamespace() {
			return fmt.Errorf("StorageClass %s is not the pool's: %v", class, a)
		}
		return nil
	})
	waitBooks(t, pool, func(b *poolBooks) error {
		if b.StorageClassName != class || b.condition("BooksKept") != "True" {
			return fmt.Errorf("books of %q (BooksKept=%s), want %q kept", b.StorageClassName, b.condition("BooksKept"), class)
		}
		return nil
	})
}

// TestPoolsOfOneNameInTwoNamespaces: two pools of one name, in two namespaces, without
// spec.storageClassName, both install, each with its own class <namespace>.<name> (as make
// demo and make demo-deploy do with the same sample).
func TestPoolsOfOneNameInTwoNamespaces(t *testing.T) {
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	p1, p2 := defaultPool(t, ns1, "fast"), defaultPool(t, ns2, "fast")
	waitOwnClass(t, p1, ns1+".fast")
	waitOwnClass(t, p2, ns2+".fast")
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "fast"}, &storagev1.StorageClass{}); !apierrors.IsNotFound(err) {
		t.Errorf("a StorageClass named after the pools: %v", err)
	}
}

// TestPoolKeepsTheClassOfChart010: a pool installed by chart 0.1.0 has a class named after it,
// which its claims use; the chart keeps that class, on install as on upgrade, and makes no
// <namespace>.<name>. (The class is made here as chart 0.1.0's release made it: with Helm's
// annotations, and the owner annotations helm-operator-plugins puts on a cluster-scoped
// object, which prove it the pool's: the operator adopts no class on Helm's annotations alone.)
func TestPoolKeepsTheClassOfChart010(t *testing.T) {
	ns := env.Namespace(t)
	name := "old-" + ns[len(ns)-5:]
	// The pool first, paused: the class's owner annotations name it, and a class whose owner
	// does not exist is an orphan the operator collects.
	pool := newCR(t, "WarpdrivePool", ns, name, map[string]any{"capacity": "1Gi", "replicas": int64(1)})
	unstructured.RemoveNestedField(pool.Object, "spec", "storageClassName")
	pool.SetAnnotations(map[string]string{statuscontract.PauseAnnotation: "true"})
	env.Create(t, pool)
	class := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm"},
			Annotations: map[string]string{"meta.helm.sh/release-name": name, "meta.helm.sh/release-namespace": ns,
				"operator-sdk/primary-resource": ns + "/" + name, "operator-sdk/primary-resource-type": "WarpdrivePool.tos.transwarp.io"}},
		Provisioner:          "warpdrive.transwarp.io/pool",
		ReclaimPolicy:        ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode:    ptr.To(storagev1.VolumeBindingImmediate),
		AllowVolumeExpansion: ptr.To(true),
		Parameters:           map[string]string{"pool": name, "poolNamespace": ns, "poolService": name + "." + ns + ".svc"},
	}
	env.Create(t, class)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), class) }) // the uninstall deletes it once adopted
	unpause := []byte(`{"metadata":{"annotations":{"` + statuscontract.PauseAnnotation + `":null}}}`)
	if err := env.Client.Patch(context.Background(), pool, client.RawPatch(types.MergePatchType, unpause)); err != nil {
		t.Fatal(err)
	}
	waitOwnClass(t, pool, name)
	patchSpec(t, pool, map[string]any{"capacity": "2Gi"})
	waitCondition(t, pool, "Ready", "True")
	waitOwnClass(t, pool, name)
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: ns + "." + name}, &storagev1.StorageClass{}); !apierrors.IsNotFound(err) {
		t.Errorf("the pool has a class <namespace>.<name> too: %v", err)
	}
}
