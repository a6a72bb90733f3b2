package security

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// A tenant allowed to create WarpdrivePools (the pool editor role, which does not aggregate
// to "edit", bound in their namespace) names a StorageClass they do not own: the cluster
// admin's, which another namespace's claims use. The pool's release fails (Helm will not
// adopt the class), the class is untouched, and the pool's status shows nothing of the
// other namespace's claims.
func TestPoolNamingAStorageClassItDoesNotOwn(t *testing.T) {
	tn := newTenant(t)
	ctx := context.Background()
	tn.mayEditPools(t)
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "security-shared-" + rand.String(5)}, Provisioner: "example.com/none"}
	if err := env.Client.Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	users := env.Namespace(t)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: users, Name: "secret-project"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &sc.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("7Gi")}},
		},
	}
	if err := env.Client.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	before := outside(t, tn.ns)

	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tos.transwarp.io/v1alpha1", "kind": "WarpdrivePool",
		"metadata": map[string]any{"namespace": tn.ns, "name": "taker"},
		"spec":     map[string]any{"capacity": "1Gi", "replicas": int64(1), "storageClassName": sc.Name},
	}}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		return tn.client.Create(ctx, pool.DeepCopy()) // once the binding is in effect
	})
	var v []string
	err := framework.Poll(ctx, 90*time.Second, func(ctx context.Context) error {
		got := pool.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
			return err
		}
		if s, _, _ := framework.Condition(got, "ReleaseFailed"); s != "True" {
			return fmt.Errorf("ReleaseFailed=%q", s)
		}
		return nil
	})
	if err != nil {
		v = append(v, "the pool's release: "+err.Error())
	}
	// The sidecar writes the pool's books within a second of any change; give it time to
	// write what it should not.
	time.Sleep(5 * time.Second)
	got := pool.DeepCopy()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pool), got); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(got.Object["status"])
	if strings.Contains(string(raw), users) || strings.Contains(string(raw), "7Gi") {
		v = append(v, "the pool's status shows another namespace's claims: "+string(raw))
	}
	if err := tn.deleteAndWait(pool); err != nil {
		v = append(v, "deleting the pool: "+err.Error())
	}
	report(t, append(v, before.diff(outside(t, tn.ns))...))
}

// A tenant allowed to create WarpdrivePools clears their pool's deletion by hand: paused,
// deleted, its finalizer removed, so that the operator never uninstalls its release. The
// pool's StorageClass, cluster-scoped, must not outlive it (a tenant who could leave classes
// behind could fill the cluster with them), and nothing else outside the tenant's namespace
// may change: not the StorageClass of a pool of the same name in another namespace.
func TestPoolDeletionClearedByHand(t *testing.T) {
	tn := newTenant(t)
	ctx := context.Background()
	tn.mayEditPools(t)
	newPool := func(ns string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "tos.transwarp.io/v1alpha1", "kind": "WarpdrivePool",
			"metadata": map[string]any{"namespace": ns, "name": "pool"},
			"spec":     map[string]any{"capacity": "1Gi", "replicas": int64(1), "storageClassName": ns + "-pool"},
		}}
	}
	// Ready: installed and rolled out, so that nothing of the neighbour's changes later (the
	// stock helm-operator writes no Ready: Deployed).
	condition := "Ready"
	if stock {
		condition = "Deployed"
	}
	ready := func(cr *unstructured.Unstructured) {
		t.Helper()
		framework.Eventually(t, 90*time.Second, func(ctx context.Context) error {
			got := cr.DeepCopy()
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
				return err
			}
			if s, _, _ := framework.Condition(got, condition); s != "True" {
				return fmt.Errorf("%s/%s: %s=%q", cr.GetNamespace(), cr.GetName(), condition, s)
			}
			return nil
		})
	}
	neighbour := newPool(env.Namespace(t))
	if err := env.Client.Create(ctx, neighbour); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), neighbour) })
	mine := newPool(tn.ns)
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		return tn.client.Create(ctx, mine.DeepCopy()) // once the binding is in effect
	})
	ready(neighbour)
	ready(mine)
	own := "StorageClass /" + tn.ns + "-pool"
	before := outside(t, tn.ns)
	if _, ok := before.objects[own]; !ok {
		t.Fatalf("the tenant's pool has no %s", own)
	}

	var v []string
	for _, patch := range []string{
		`{"metadata":{"annotations":{"warpdrive.transwarp.io/pause-reconcile":"true"}}}`,
		"delete",
		`{"metadata":{"finalizers":null}}`,
	} {
		var err error
		if patch == "delete" {
			err = tn.client.Delete(ctx, mine.DeepCopy())
		} else {
			err = tn.client.Patch(ctx, mine.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		if err != nil {
			t.Fatalf("as the tenant, %s: %v", patch, err)
		}
	}
	err := framework.Poll(ctx, 90*time.Second, func(ctx context.Context) error {
		if _, ok := outside(t, tn.ns).objects[own]; ok {
			return fmt.Errorf("%s still there", own)
		}
		return nil
	})
	if err != nil {
		v = append(v, "the pool gone without its uninstall: "+err.Error())
	}
	for _, d := range before.diff(outside(t, tn.ns)) {
		if d != "deleted "+own {
			v = append(v, d)
		}
	}
	report(t, v)
}

// mayEditPools binds the pool editor role, which does not aggregate to "edit", to the tenant
// in their namespace.
func (tn *tenant) mayEditPools(t *testing.T) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: "tenant-pools"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "warpdrivepool-editor-role"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tn.ns, Name: "tenant"}},
	}
	if err := env.Client.Create(context.Background(), rb); err != nil {
		t.Fatal(err)
	}
}

// A tenant claims 1Pi of another tenant's pool's StorageClass (any namespace editor may
// create a claim of any class). Nothing binds it; a pool that counted Pending claims as
// allocated would read Full at once, and record PoolUsageHigh and PoolFull: its owner's
// claims refused or alarms raised by someone with no right over the pool. Only Bound claims
// hold capacity: the pool shows the claim apart (claims.pending, requested), stays
// CapacityAvailable=True, records no usage Event, and names not the claimer's namespace.
func TestPoolPendingClaimCannotFillAnotherTenantsPool(t *testing.T) {
	ctx := context.Background()
	attacker := newTenant(t)
	victim := newPool(t, env.Client, env.Namespace(t), "pool")
	class := victim.storageClass()
	claim := poolClaim(attacker.ns, "everything", class, "1Pi")
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		return attacker.client.Create(ctx, claim.DeepCopy())
	})

	var v []string
	err := framework.Poll(ctx, 90*time.Second, func(ctx context.Context) error {
		books, err := victim.books(ctx, env.Client)
		if err != nil {
			return err
		}
		if books.Claims.Pending != 1 || books.Requested != "1Pi" {
			return fmt.Errorf("the pool does not count the claim as Pending yet: %s", books)
		}
		return nil
	})
	if err != nil {
		v = append(v, "the pool's books: "+err.Error())
	}
	// Give the sidecar time to write and record what it should not.
	time.Sleep(5 * time.Second)
	books, err := victim.books(ctx, env.Client)
	if err != nil {
		t.Fatal(err)
	}
	if books.Allocated != "0" || books.Available != "1Gi" || books.condition("CapacityAvailable") != "True" {
		v = append(v, "another tenant's Pending claim fills the pool: "+books.String())
	}
	if events := victim.usageEvents(t, env.Client); len(events) > 0 {
		v = append(v, "another tenant's Pending claim raises the pool's usage Events: "+strings.Join(events, "; "))
	}
	if leak := victim.names(t, env.Client, attacker.ns); leak != "" {
		v = append(v, leak)
	}
	report(t, v)
}

// A tenant's pool is filled by the claims of two other namespaces (bound by the cluster's
// volumes) and asked for by a third's Pending claim. The tenant, who may read their pool
// and the Events of their namespace, learns how much is used and by how many namespaces,
// not which: neither the pool's status nor its PoolUsageHigh and PoolFull Events name them.
func TestPoolBooksNameNoOtherNamespace(t *testing.T) {
	ctx := context.Background()
	tn := newTenant(t)
	tn.mayEditPools(t)
	var pool *tenantPool
	framework.Eventually(t, time.Minute, func(context.Context) error { // once the binding is in effect
		var err error
		pool, err = tryNewPool(tn.client, tn.ns, "pool")
		return err
	})
	pool.waitBooksKept(t)
	class := pool.storageClass()
	users := []string{env.Namespace(t), env.Namespace(t), env.Namespace(t)}
	for i, ns := range users[:2] {
		c := poolClaim(ns, "data", class, "600Mi")
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		bindClaim(t, c, fmt.Sprintf("security-%s-%d", tn.ns, i))
	}
	if err := env.Client.Create(ctx, poolClaim(users[2], "wish", class, "1Gi")); err != nil {
		t.Fatal(err)
	}

	var v []string
	err := framework.Poll(ctx, 90*time.Second, func(ctx context.Context) error {
		books, err := pool.books(ctx, tn.client)
		if err != nil {
			return err
		}
		if books.Allocated != "1200Mi" || books.Claims.Bound != 2 || books.Claims.Pending != 1 || books.NamespaceCount != 2 ||
			books.condition("CapacityAvailable") != "False" {
			return fmt.Errorf("the tenant reads %s; want 1200Mi allocated to 2 bound claims in 2 namespaces, 1 pending, CapacityAvailable=False", books)
		}
		if events := pool.usageEvents(t, tn.client); len(events) < 2 {
			return fmt.Errorf("the tenant reads usage Events %v; want PoolUsageHigh and PoolFull", events)
		}
		return nil
	})
	if err != nil {
		v = append(v, "the pool's books: "+err.Error())
	}
	if leak := pool.names(t, tn.client, users...); leak != "" {
		v = append(v, leak)
	}
	if err := tn.deleteAndWait(pool.cr); err != nil {
		v = append(v, "deleting the pool: "+err.Error())
	}
	report(t, v)
}

// tenantPool is a WarpdrivePool of the pool tests, with its own StorageClass.
type tenantPool struct{ cr *unstructured.Unstructured }

// tryNewPool creates, as c, a pool of 1Gi named name in ns with the StorageClass
// <ns>-<name>.
func tryNewPool(c client.Client, ns, name string) (*tenantPool, error) {
	cr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tos.transwarp.io/v1alpha1", "kind": "WarpdrivePool",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec":     map[string]any{"capacity": "1Gi", "replicas": int64(1), "storageClassName": ns + "-" + name},
	}}
	if err := c.Create(context.Background(), cr.DeepCopy()); err != nil {
		return nil, err
	}
	return &tenantPool{cr: cr}, nil
}

// newPool is tryNewPool, and waits until the pool keeps the books of its class.
func newPool(t *testing.T, c client.Client, ns, name string) *tenantPool {
	t.Helper()
	p, err := tryNewPool(c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), p.cr) })
	p.waitBooksKept(t)
	return p
}

func (p *tenantPool) storageClass() string {
	class, _, _ := unstructured.NestedString(p.cr.Object, "spec", "storageClassName")
	return class
}

// waitBooksKept waits until the pool keeps the books of its class (BooksKept=True): its
// release created the class and the sidecar counts its claims.
func (p *tenantPool) waitBooksKept(t *testing.T) {
	t.Helper()
	framework.Eventually(t, 90*time.Second, func(ctx context.Context) error {
		books, err := p.books(ctx, env.Client)
		if err != nil {
			return err
		}
		if s := books.condition("BooksKept"); s != "True" {
			return fmt.Errorf("pool %s/%s: BooksKept=%q", p.cr.GetNamespace(), p.cr.GetName(), s)
		}
		return nil
	})
}

// poolBooks is what the tests read of status.pool.
type poolBooks struct {
	Allocated string `json:"allocated"`
	Available string `json:"available"`
	Requested string `json:"requested"`
	Claims    struct {
		Bound   int64 `json:"bound"`
		Pending int64 `json:"pending"`
	} `json:"claims"`
	NamespaceCount int64              `json:"namespaceCount"`
	Conditions     []metav1.Condition `json:"conditions"`
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
	return fmt.Sprintf("allocated %s available %s requested %s, %d bound %d pending in %d namespaces, CapacityAvailable=%s",
		b.Allocated, b.Available, b.Requested, b.Claims.Bound, b.Claims.Pending, b.NamespaceCount, b.condition("CapacityAvailable"))
}

// books reads status.pool as c.
func (p *tenantPool) books(ctx context.Context, c client.Client) (*poolBooks, error) {
	got := p.cr.DeepCopy()
	if err := c.Get(ctx, client.ObjectKeyFromObject(p.cr), got); err != nil {
		return nil, err
	}
	raw, found, _ := unstructured.NestedFieldNoCopy(got.Object, "status", "pool")
	if !found {
		return nil, fmt.Errorf("pool %s/%s has no status.pool yet", p.cr.GetNamespace(), p.cr.GetName())
	}
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	b := &poolBooks{}
	return b, json.Unmarshal(data, b)
}

// poolEvents are the Events on the pool, as c lists them.
func (p *tenantPool) poolEvents(t *testing.T, c client.Client) []corev1.Event {
	t.Helper()
	var list corev1.EventList
	if err := c.List(context.Background(), &list, client.InNamespace(p.cr.GetNamespace())); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "WarpdrivePool" && e.InvolvedObject.Name == p.cr.GetName() {
			out = append(out, e)
		}
	}
	return out
}

// usageEvents are the pool's PoolUsageHigh and PoolFull Events, as "reason: message".
func (p *tenantPool) usageEvents(t *testing.T, c client.Client) []string {
	t.Helper()
	var out []string
	for _, e := range p.poolEvents(t, c) {
		if e.Reason == "PoolUsageHigh" || e.Reason == "PoolFull" {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// names returns a violation if the pool's status or any of its Events, as c reads them,
// names one of namespaces; "" if none does.
func (p *tenantPool) names(t *testing.T, c client.Client, namespaces ...string) string {
	t.Helper()
	got := p.cr.DeepCopy()
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p.cr), got); err != nil {
		t.Fatal(err)
	}
	status, _ := json.Marshal(got.Object["status"])
	var leaks []string
	for _, ns := range namespaces {
		if strings.Contains(string(status), ns) {
			leaks = append(leaks, "the pool's status names namespace "+ns+": "+string(status))
		}
		for _, e := range p.poolEvents(t, c) {
			if strings.Contains(e.Message, ns) {
				leaks = append(leaks, fmt.Sprintf("the pool's %s Event names namespace %s: %q", e.Reason, ns, e.Message))
			}
		}
	}
	return strings.Join(leaks, "; ")
}

func poolClaim(ns, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

// bindClaim binds claim to a volume named name, pre-bound to it, as a provisioner would
// (none runs on the local cluster), and waits until the claim is Bound. The volume is
// deleted when the test ends.
func bindClaim(t *testing.T, claim *corev1.PersistentVolumeClaim, name string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              *claim.Spec.StorageClassName,
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: claim.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + name}},
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID},
		},
	}
	if err := env.Client.Create(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pv) })
	framework.Eventually(t, 90*time.Second, func(ctx context.Context) error {
		got := claim.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(claim), got); err != nil {
			return err
		}
		if got.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s/%s is %s, want Bound", claim.Namespace, claim.Name, got.Status.Phase)
		}
		return nil
	})
}
