package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestLifecycle walks a CR of every kind through what users do with it: create (a Helm
// install), edit its spec (a Helm upgrade), damage its objects by hand (repaired), delete it
// (a Helm uninstall that leaves nothing behind).
func TestLifecycle(t *testing.T) {
	for _, kc := range kinds {
		t.Run(kc.kind, func(t *testing.T) {
			t.Parallel()
			ns := env.Namespace(t)
			cr := kc.newCR(t, ns, "lifecycle", nil)
			env.Create(t, cr)

			t.Log("install: Deployed=True, revision 1, objects rendered from spec")
			waitCondition(t, cr, "Deployed", "True")
			waitRevision(t, ns, cr.GetName(), 1)
			want := kc.replicas(cr)
			waitWorkload(t, kc, cr, want)
			for _, child := range kc.children(cr) {
				expectReleaseObject(t, cr, child)
			}

			t.Log("spec edit: a Helm upgrade to revision 2, the workload follows")
			want++
			patchSpec(t, cr, map[string]any{kc.replicasField: want})
			waitRevision(t, ns, cr.GetName(), 2)
			waitWorkload(t, kc, cr, want)

			t.Log("drift: a hand edit of the workload is reverted")
			w := kc.workload(cr)
			if err := get(context.Background(), w); err != nil {
				t.Fatal(err)
			}
			setWorkloadReplicas(w, int32(want+5))
			if err := env.Client.Update(context.Background(), w); err != nil {
				t.Fatalf("editing %s by hand: %v", w.GetName(), err)
			}
			waitWorkload(t, kc, cr, want)

			for _, child := range kc.children(cr) {
				if _, ok := child.(*corev1.Service); ok {
					t.Log("drift: a hand edit of an object without a generation (a label of the Service) is reverted")
					expectLabelRepaired(t, child)
				}
			}

			t.Log("drift: a deleted object is recreated")
			victim := w
			if children := kc.children(cr); len(children) > 0 {
				victim = children[0]
			}
			expectRecreated(t, victim)

			t.Log("delete: release uninstalled, nothing left behind")
			objects := append([]client.Object{kc.workload(cr)}, kc.children(cr)...)
			if err := env.Client.Delete(context.Background(), cr); err != nil {
				t.Fatal(err)
			}
			waitGone(t, cr)
			for _, obj := range objects {
				waitGone(t, obj)
			}
			secrets, err := releaseSecrets(context.Background(), ns, cr.GetName())
			if err != nil || len(secrets) != 0 {
				t.Fatalf("release secrets left after uninstall: %d (%v)", len(secrets), err)
			}
		})
	}
}

// waitWorkload waits until the CR's workload wants `want` replicas and has them available
// (kwok makes the pods Ready).
func waitWorkload(t testing.TB, kc kindCase, cr *unstructured.Unstructured, want int64) {
	t.Helper()
	w := kc.workload(cr)
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if err := get(ctx, w); err != nil {
			return err
		}
		desired, available := workloadReplicas(w)
		if int64(desired) != want || int64(available) != want {
			return fmt.Errorf("%T %s: replicas %d, available %d; want %d", w, w.GetName(), desired, available, want)
		}
		return nil
	})
}

// expectReleaseObject checks that obj exists and belongs to cr's Helm release.
func expectReleaseObject(t testing.TB, cr *unstructured.Unstructured, obj client.Object) {
	t.Helper()
	if err := get(context.Background(), obj); err != nil {
		t.Fatalf("%T %s of %s: %v", obj, obj.GetName(), cr.GetName(), err)
	}
	a := obj.GetAnnotations()
	if a["meta.helm.sh/release-name"] != cr.GetName() || a["meta.helm.sh/release-namespace"] != cr.GetNamespace() {
		t.Fatalf("%T %s is not of release %s/%s: annotations %v", obj, obj.GetName(), cr.GetNamespace(), cr.GetName(), a)
	}
}

// expectRecreated deletes obj and waits for the operator to create it again.
func expectRecreated(t testing.TB, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := get(ctx, obj); err != nil {
		t.Fatal(err)
	}
	oldUID := obj.GetUID()
	if err := env.Client.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if err := get(ctx, obj); err != nil {
			return err
		}
		if obj.GetUID() == oldUID {
			return fmt.Errorf("%T %s not yet deleted and recreated", obj, obj.GetName())
		}
		return nil
	})
}

// expectLabelRepaired changes by hand the value of a label that the chart gave obj, an object
// without a generation (its updates cannot be told from status writes by their metadata), and
// waits until the operator sets it back.
func expectLabelRepaired(t testing.TB, obj client.Object) {
	t.Helper()
	ctx := context.Background()
	if err := get(ctx, obj); err != nil {
		t.Fatal(err)
	}
	labels := obj.GetLabels()
	keys := slices.Sorted(maps.Keys(labels))
	if len(keys) == 0 {
		t.Fatalf("%T %s has no label to edit", obj, obj.GetName())
	}
	key, want := keys[0], labels[keys[0]]
	labels[key] = "edited-by-hand"
	obj.SetLabels(labels)
	if err := env.Client.Update(ctx, obj); err != nil {
		t.Fatalf("editing %s by hand: %v", obj.GetName(), err)
	}
	framework.Eventually(t, converge, func(ctx context.Context) error {
		if err := get(ctx, obj); err != nil {
			return err
		}
		if got := obj.GetLabels()[key]; got != want {
			return fmt.Errorf("%T %s: label %s is %q, want %q back", obj, obj.GetName(), key, got, want)
		}
		return nil
	})
}
