package operator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// The apply configuration of the helm-operator's status update holds its own conditions and
// deployedRelease, and nothing that belongs to the manager's readiness controller or the
// sidecar: an apply of those would take them over from their writers.
func TestHelmStatusApply(t *testing.T) {
	cases := []struct {
		name   string
		status map[string]any
		want   map[string]any
	}{
		{"own fields", map[string]any{"conditions": []any{map[string]any{"type": "Deployed"}}, "deployedRelease": map[string]any{"name": "m"}},
			map[string]any{"conditions": []any{map[string]any{"type": "Deployed"}}, "deployedRelease": map[string]any{"name": "m"}}},
		{"release gone is left out, so that the apply removes it", map[string]any{"conditions": []any{}},
			map[string]any{"conditions": []any{}}},
		{"others' fields and conditions are never applied", map[string]any{
			"availableReplicas": int64(3), "observedGeneration": int64(2),
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "Reconciling"},
				map[string]any{"type": "Stalled"}, map[string]any{"type": "RolledOut"},
				map[string]any{"type": "Paused", "status": "False"},
			}},
			map[string]any{"conditions": []any{map[string]any{"type": "Paused", "status": "False"}}}},
		{"no status", nil, map[string]any{"conditions": []any{}}},
	}
	for _, tc := range cases {
		got, err := helmStatusApply(actiontest.Memcached(tc.status))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"apiVersion": "cache.example.com/v1alpha1",
			"kind":       "Memcached",
			"metadata":   map[string]any{"name": "m", "namespace": "ns"},
			"status":     tc.want,
		}
		if diff := cmp.Diff(want, got.Object); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A failure that quotes a huge value still leaves a status small enough to store.
func TestHelmStatusApplyBoundsMessages(t *testing.T) {
	huge := strings.Repeat("a", 1<<20)
	got, err := helmStatusApply(actiontest.Memcached(map[string]any{"conditions": []any{
		map[string]any{"type": "ReleaseFailed", "message": "invalid: " + huge},
		map[string]any{"type": "Deployed", "message": "ok"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	kept := refusal.MaxConditionMessage / 2
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	want := []any{
		map[string]any{"type": "ReleaseFailed", "message": "invalid: " + huge[:kept-len("invalid: ")] + " … " + huge[:kept]},
		map[string]any{"type": "Deployed", "message": "ok"},
	}
	if !cmp.Equal(want, conds) {
		t.Errorf("conditions of %d bytes, want the middle of the message cut out", len(conds[0].(map[string]any)["message"].(string)))
	}
}

// deployedRelease is applied as name, revision and chart version: the manifest the reconciler
// puts there is dropped (kept with --status-release-manifest), and the revision is that of the
// release the action clients last handed out with that manifest.
func TestDeployedReleaseShape(t *testing.T) {
	versions := releases.NewVersions()
	rel := &release.Release{Name: "m", Namespace: "ns", Version: 4, Manifest: "kind: Secret\ndata: {password: c2VjcmV0}",
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "memcached", Version: "0.3.0"}}}
	versions.Record(rel)
	status := func(manifest string) map[string]any {
		return map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": manifest}}
	}
	cases := []struct {
		name     string
		keep     bool
		manifest string
		want     map[string]any
	}{
		{"manifest dropped", false, rel.Manifest, map[string]any{"name": "m", "revision": int64(4), "chartVersion": "0.3.0"}},
		{"manifest kept on request", true, rel.Manifest, map[string]any{"name": "m", "revision": int64(4), "chartVersion": "0.3.0", "manifest": rel.Manifest}},
		{"not the release handed out: no revision", false, "kind: ConfigMap", map[string]any{"name": "m"}},
	}
	for _, tc := range cases {
		c := statusKeepingClient{versions: versions, releaseManifest: tc.keep}
		apply, err := helmStatusApply(actiontest.Memcached(status(tc.manifest)))
		if err != nil {
			t.Fatal(err)
		}
		c.shapeDeployedRelease(apply)
		got, _, _ := unstructured.NestedMap(apply.Object, "status", "deployedRelease")
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	versions.Forget("ns", "m")
	if _, ok := versions.Lookup("ns", "m", rel.Manifest); ok {
		t.Error("a forgotten release is still known")
	}
}

// A status update that would apply what the CR already has is not sent; one that changes
// anything of the helm-operator's part is.
func TestStatusUpdateSkipsNoChange(t *testing.T) {
	have := actiontest.Memcached(map[string]any{
		"conditions":      []any{map[string]any{"type": "Deployed", "status": "True"}, map[string]any{"type": "Ready", "status": "True"}},
		"deployedRelease": map[string]any{"name": "m", "revision": int64(2)},
	})
	for _, tc := range []struct {
		name   string
		status map[string]any
		sent   bool
	}{
		{"the same, without another writer's condition", map[string]any{
			"conditions":      []any{map[string]any{"type": "Deployed", "status": "True"}},
			"deployedRelease": map[string]any{"name": "m", "revision": int64(2)}}, false},
		{"a condition changed", map[string]any{
			"conditions":      []any{map[string]any{"type": "Deployed", "status": "False"}},
			"deployedRelease": map[string]any{"name": "m", "revision": int64(2)}}, true},
		{"another revision", map[string]any{
			"conditions":      []any{map[string]any{"type": "Deployed", "status": "True"}},
			"deployedRelease": map[string]any{"name": "m", "revision": int64(3)}}, true},
	} {
		writes := 0
		cl := fake.NewClientBuilder().WithObjects(have.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				writes++
				return nil
			},
		}).Build()
		c := statusKeepingClient{Client: cl, current: cl}
		if err := c.Status().Update(context.Background(), actiontest.Memcached(tc.status)); err != nil {
			t.Fatal(err)
		}
		if sent := writes > 0; sent != tc.sent {
			t.Errorf("%s: sent %v, want %v", tc.name, sent, tc.sent)
		}
	}
}

// The status the reconciler writes once it has uninstalled the release of a CR being deleted
// is not sent when the finalizer it removes next is the CR's last: the CR goes with it. Any
// other status of a CR being deleted is.
func TestStatusUpdateSkipsTheUninstalledCRsLastStatus(t *testing.T) {
	uninstalled := map[string]any{"conditions": []any{
		map[string]any{"type": "ReleaseFailed", "status": "False"},
		map[string]any{"type": "Deployed", "status": "False", "reason": "UninstallSuccessful"},
	}}
	failed := map[string]any{"conditions": []any{
		map[string]any{"type": "ReleaseFailed", "status": "True", "reason": "UninstallError"},
		map[string]any{"type": "Deployed", "status": "True", "reason": "UpgradeSuccessful"},
	}}
	now := metav1.Now()
	for _, tc := range []struct {
		name       string
		deleting   bool
		finalizers []string
		status     map[string]any
		sent       bool
	}{
		{"uninstalled, only the uninstall finalizer left", true, []string{uninstallFinalizer}, uninstalled, false},
		{"uninstalled, another finalizer keeps the CR", true, []string{"example.com/keep", uninstallFinalizer}, uninstalled, true},
		{"the uninstall failed", true, []string{uninstallFinalizer}, failed, true},
		{"not being deleted", false, []string{uninstallFinalizer}, uninstalled, true},
	} {
		writes := 0
		cl := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
				writes++
				return nil
			},
		}).Build()
		cr := actiontest.Memcached(tc.status)
		cr.SetFinalizers(tc.finalizers)
		if tc.deleting {
			cr.SetDeletionTimestamp(&now)
		}
		if err := (statusKeepingClient{Client: cl, current: cl}).Status().Update(context.Background(), cr); err != nil {
			t.Fatal(err)
		}
		if sent := writes > 0; sent != tc.sent {
			t.Errorf("%s: sent %v, want %v", tc.name, sent, tc.sent)
		}
	}
}

// The reconciler's wait for a CR it uninstalled ends when that CR is gone, even if a new CR
// of the same name exists by then, and the object it holds stays the old CR's (its status is
// not written into the new one). A Get into an empty object, or into the same CR, reads it.
func TestGetTellsARecreatedCRFromTheOneHeld(t *testing.T) {
	scheme := runtime.NewScheme()
	gvk := actiontest.Memcached(nil).GroupVersionKind()
	scheme.AddKnownTypeWithName(gvk, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(gvk.GroupVersion().WithKind("MemcachedList"), &unstructured.UnstructuredList{})
	recreated := actiontest.Memcached(nil)
	recreated.SetUID("new")
	cl := statusKeepingClient{Client: fake.NewClientBuilder().WithScheme(scheme).WithObjects(recreated).Build()}
	ctx := context.Background()

	held := actiontest.Memcached(nil)
	held.SetUID("old")
	held.SetFinalizers([]string{uninstallFinalizer})
	if err := waitForDeletion(ctx, cl, held); err != nil {
		t.Fatalf("waiting for the deletion of the old CR: %v, want it seen gone", err)
	}
	if held.GetUID() != "old" || len(held.GetFinalizers()) != 1 {
		t.Errorf("the held object became %s (finalizers %v), want the old CR's, unchanged", held.GetUID(), held.GetFinalizers())
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(held), held); !apierrors.IsNotFound(err) {
		t.Errorf("Get into the old CR: %v, want not found", err)
	}

	for name, into := range map[string]*unstructured.Unstructured{"empty": actiontest.Memcached(nil), "same CR": actiontest.Memcached(nil)} {
		into.Object = map[string]any{"apiVersion": into.GetAPIVersion(), "kind": into.GetKind()}
		if name == "same CR" {
			into.SetUID("new")
		}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(recreated), into); err != nil || into.GetUID() != "new" || into.GetResourceVersion() == "" {
			t.Errorf("Get into the %s object: %v, UID %q, resourceVersion %q; want the CR read", name, err, into.GetUID(), into.GetResourceVersion())
		}
	}
}

// waitForDeletion waits as helm-operator-plugins' reconciler waits for a CR it uninstalled
// (its internal controllerutil.WaitForDeletion): it gets the CR into o until "not found".
func waitForDeletion(ctx context.Context, cl client.Reader, o client.Object) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := cl.Get(ctx, client.ObjectKeyFromObject(o), o)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
