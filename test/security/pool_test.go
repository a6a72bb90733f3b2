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
