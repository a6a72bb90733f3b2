package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/storage/driver"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func poolCR(deleted bool) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("tos.transwarp.io/v1alpha1")
	cr.SetKind("WarpdrivePool")
	cr.SetNamespace("team-a")
	cr.SetName("x")
	if deleted {
		now := metav1.Now()
		cr.SetDeletionTimestamp(&now)
	}
	return cr
}

// sweeping is the orphan sweep over an engine that finds no release, for a chart that
// declares StorageClasses, in a cluster holding objs.
func sweeping(t *testing.T, cr client.Object, funcs interceptor.Funcs, objs ...client.Object) (helmclient.ActionInterface, client.Client, *record.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := storagev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	// As the manager's mapper, this one finds a kind's preferred version.
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{storagev1.SchemeGroupVersion})
	mapper.Add(actiontest.StorageClassGVK, meta.RESTScopeRoot)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).WithInterceptorFuncs(funcs).Build()
	rec := record.NewFakeRecorder(10)
	f := &actiontest.FakeActions{Errs: map[string]error{"uninstall": driver.ErrReleaseNotFound}}
	objects := ClusterObjects{Kinds: []schema.GroupKind{actiontest.StorageClassGVK.GroupKind()}, Mapper: mapper, Reader: c, Writer: c}
	ac, err := withOrphanSweep(actiontest.EngineOf(f), objects, rec).ActionClientFor(context.Background(), cr)
	if err != nil {
		t.Fatal(err)
	}
	return ac, c, rec
}

// A pool deleted after its release Secrets (deleted with its namespace): its StorageClass is
// deleted with an Event, StorageClasses of other owners are left, and the reconciler still
// gets "release not found" (so it removes the finalizer).
func TestSweepDeletesOwnedClusterObjects(t *testing.T) {
	foreign := actiontest.PoolOwner()
	foreign[ownership.OwnerTypeAnnotation] = "AppService.appcontroller.k8s.io"
	c, cl, rec := sweeping(t, poolCR(true), interceptor.Funcs{},
		actiontest.StorageClass("pool-x", actiontest.PoolOwner()), actiontest.StorageClass("foreign", foreign), actiontest.StorageClass("unannotated", nil))

	if _, err := c.Uninstall("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("Uninstall: %v, want release not found", err)
	}
	get := func(name string) error {
		return cl.Get(context.Background(), client.ObjectKey{Name: name}, &storagev1.StorageClass{})
	}
	if err := get("pool-x"); !apierrors.IsNotFound(err) {
		t.Errorf("the pool's StorageClass: %v, want deleted", err)
	}
	for _, name := range []string{"foreign", "unannotated"} {
		if err := get(name); err != nil {
			t.Errorf("StorageClass %s of another owner: %v, want kept", name, err)
		}
	}
	want := "Warning OrphanDeleted release x was already gone (its Secrets deleted, as with its namespace); deleted StorageClass pool-x that it had created"
	if got := actiontest.Events(rec); len(got) != 1 || got[0] != want {
		t.Errorf("events %q, want [%q]", got, want)
	}
}

// Nothing is swept while the CR lives; a failure to sweep keeps the finalizer (an error) so
// that the uninstall is retried.
func TestSweepOnlyWhenReleaseGoneAndCRDeleted(t *testing.T) {
	c, cl, _ := sweeping(t, poolCR(false), interceptor.Funcs{}, actiontest.StorageClass("pool-x", actiontest.PoolOwner()))
	if _, err := c.Uninstall("x"); !errors.Is(err, driver.ErrReleaseNotFound) {
		t.Errorf("CR not deleted: Uninstall: %v, want release not found and no sweep", err)
	}
	if err := cl.Get(context.Background(), client.ObjectKey{Name: "pool-x"}, &storagev1.StorageClass{}); err != nil {
		t.Errorf("CR not deleted: its StorageClass: %v, want kept", err)
	}

	listErr := errors.New("list failed")
	failing := interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return listErr }}
	c, _, _ = sweeping(t, poolCR(true), failing)
	if _, err := c.Uninstall("x"); !errors.Is(err, listErr) || !strings.Contains(err.Error(), "release x is gone") {
		t.Errorf("sweep failure: %v, want an error that keeps the finalizer", err)
	}
}
