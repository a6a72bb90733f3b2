package e2e

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestOrphanStorageClassCollected: a pool that goes without the operator's uninstall, as when
// a user clears a deletion by hand (paused, deleted, its finalizer removed). Its namespaced
// objects go with their owner references; its StorageClass, which no owner reference can
// hold, is deleted by the orphan collector, with a Warning Event on it. Without the
// collector it stays for ever.
func TestOrphanStorageClassCollected(t *testing.T) {
	ctx := context.Background()
	kc := kindNamed(t, "WarpdrivePool")
	ns := env.Namespace(t)
	cr := kc.newCR(t, ns, "orphan", nil)
	env.Create(t, cr)
	waitCondition(t, cr, "Deployed", "True")
	var sc client.Object
	for _, child := range kc.children(cr) {
		if _, ok := child.(*storagev1.StorageClass); ok {
			sc = child
		}
	}
	expectReleaseObject(t, cr, sc)

	t.Log("paused, deleted, its finalizer removed by hand: the release is never uninstalled")
	pause := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, pauseAnnotation))
	if err := env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, pause)); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, cr, "Paused", "True")
	if err := env.Client.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	noFinalizers := []byte(`{"metadata":{"finalizers":null}}`)
	if err := env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, noFinalizers)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, cr)

	t.Log("the StorageClass is collected")
	waitGone(t, sc)
	framework.Eventually(t, converge, func(ctx context.Context) error {
		var list corev1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "StorageClass" && e.InvolvedObject.Name == sc.GetName() && e.Reason == "OrphanCollected" {
				return nil
			}
		}
		return fmt.Errorf("no OrphanCollected Event on StorageClass %s", sc.GetName())
	})
}

// kindNamed is the kind case of kind.
func kindNamed(t testing.TB, kind string) kindCase {
	t.Helper()
	for _, kc := range kinds {
		if kc.kind == kind {
			return kc
		}
	}
	t.Fatalf("no kind case %s", kind)
	return kindCase{}
}
