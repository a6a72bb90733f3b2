package storagemigration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
)

var memcached = schema.GroupVersionKind{Group: "cache.example.com", Version: "v1", Kind: "Memcached"}

func cr(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(memcached)
	u.SetNamespace("team-a")
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, int64(2), "spec", "size")
	return u
}

// migrator is the pass over a cluster holding a Memcached CRD that lists stored and the CRs
// names, whose updates go through funcs.
func migrator(t *testing.T, stored []string, funcs interceptor.Funcs, names ...string) (*Migrator, client.Client, *record.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{apiextensionsv1.AddToScheme, svmv1beta1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	scheme.AddKnownTypeWithName(memcached, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(memcached.GroupVersion().WithKind("MemcachedList"), &unstructured.UnstructuredList{})
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(memcached, meta.RESTScopeNamespace)
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "memcacheds.cache.example.com"},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{StoredVersions: stored}}
	objs := []client.Object{crd}
	for _, n := range names {
		objs = append(objs, cr(n))
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).WithObjects(objs...).
		WithStatusSubresource(crd).WithInterceptorFuncs(funcs).Build()
	rec := record.NewFakeRecorder(10)
	return &Migrator{Kinds: []schema.GroupVersionKind{memcached}, Client: c, Reader: c, Mapper: mapper, Recorder: rec,
		Log: logr.Discard()}, c, rec
}

// countUpdates counts the updates of CRs, and makes those of the names in conflicting fail
// as if the object had been edited since it was listed.
func countUpdates(updated *[]string, conflicting ...string) interceptor.Funcs {
	return interceptor.Funcs{Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
		if slices.Contains(conflicting, obj.GetName()) {
			return apierrors.NewConflict(schema.GroupResource{Resource: "memcacheds"}, obj.GetName(), nil)
		}
		*updated = append(*updated, obj.GetName())
		return c.Update(ctx, obj, opts...)
	}}
}

// TestMigrateRewritesThenPrunes: with an old version stored, every object is updated as it
// is (an object edited since it was listed is left, its edit kept), then storedVersions is the
// storage version alone, with an Event; with nothing stale, nothing is written.
func TestMigrateRewritesThenPrunes(t *testing.T) {
	var updated []string
	m, c, rec := migrator(t, []string{"v1alpha1", "v1"}, countUpdates(&updated, "b"), "a", "b", "c")
	if err := m.migrate(context.Background(), memcached); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(updated, []string{"a", "c"}) {
		t.Errorf("updated %v, want [a c] (b was edited since it was listed)", updated)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "memcacheds.cache.example.com"}, crd); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
	if len(rec.Events) != 1 {
		t.Errorf("%d Events, want 1 (StorageMigrated)", len(rec.Events))
	} else if e := <-rec.Events; e != "Normal StorageMigrated 2 objects rewritten at v1; status.storedVersions [v1alpha1 v1] is now [v1]" {
		t.Errorf("Event %q", e)
	}

	updated = nil
	m, _, rec = migrator(t, []string{"v1"}, countUpdates(&updated), "a")
	if err := m.migrate(context.Background(), memcached); err != nil {
		t.Fatal(err)
	}
	if len(updated) > 0 || len(rec.Events) > 0 {
		t.Errorf("nothing stale, yet updated %v and %d Events", updated, len(rec.Events))
	}
}

// TestMigrateFailureKeepsStoredVersions: a rewrite that fails leaves storedVersions as it was,
// for the next try: pruned early, the API server would no longer know of objects stored at it.
func TestMigrateFailureKeepsStoredVersions(t *testing.T) {
	m, c, _ := migrator(t, []string{"v1alpha1", "v1"}, interceptor.Funcs{
		Update: func(context.Context, client.WithWatch, client.Object, ...client.UpdateOption) error {
			return apierrors.NewServiceUnavailable("etcd")
		}}, "a")
	if err := m.migrate(context.Background(), memcached); err == nil {
		t.Fatal("migrate: no error")
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "memcacheds.cache.example.com"}, crd); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1alpha1", "v1"}) {
		t.Errorf("storedVersions %v after a failed pass, want them kept", crd.Status.StoredVersions)
	}
}

var svmKind = svmv1beta1.SchemeGroupVersion.WithKind("StorageVersionMigration")

// withMigrations serves StorageVersionMigrations in m's mapper, whose controller ends each
// with the condition done as it is read.
func withMigrations(m *Migrator, done svmv1beta1.MigrationConditionType) interceptor.Funcs {
	m.Mapper.(*meta.DefaultRESTMapper).Add(svmKind, meta.RESTScopeRoot)
	return interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if svm, ok := obj.(*svmv1beta1.StorageVersionMigration); ok && done != "" {
			meta.SetStatusCondition(&svm.Status.Conditions, metav1.Condition{Type: string(done), Status: metav1.ConditionTrue,
				Reason: "Test", Message: "as the test says"})
		}
		return nil
	}}
}

// TestMigrateByStorageVersionMigration: where the API server serves StorageVersionMigrations,
// the operator creates one for the resource (or finds the one a previous leader created),
// rewrites nothing itself, and prunes storedVersions once it succeeded.
func TestMigrateByStorageVersionMigration(t *testing.T) {
	var updated []string
	m, c, rec := migrator(t, []string{"v1alpha1", "v1"}, interceptor.Funcs{}, "a")
	funcs := withMigrations(m, svmv1beta1.MigrationSucceeded)
	funcs.Update = countUpdates(&updated).Update
	m.Client = interceptor.NewClient(c.(client.WithWatch), funcs)
	m.Reader = m.Client
	if err := m.migrate(context.Background(), memcached); err != nil {
		t.Fatal(err)
	}
	if len(updated) > 0 {
		t.Errorf("the operator updated %v itself", updated)
	}
	svm := &svmv1beta1.StorageVersionMigration{}
	name := "memcacheds.cache.example.com-v1-0"
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, svm); err != nil {
		t.Fatal(err)
	}
	if svm.Spec.Resource != (metav1.GroupResource{Group: "cache.example.com", Resource: "memcacheds"}) {
		t.Errorf("StorageVersionMigration of %v", svm.Spec.Resource)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "memcacheds.cache.example.com"}, crd); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(crd.Status.StoredVersions, []string{"v1"}) {
		t.Errorf("storedVersions %v, want [v1]", crd.Status.StoredVersions)
	}
	if e := <-rec.Events; e != "Normal StorageMigrated objects rewritten at v1 by StorageVersionMigration "+name+
		"; status.storedVersions [v1alpha1 v1] is now [v1]" {
		t.Errorf("Event %q", e)
	}

	// A restarted leader finds the migration it created.
	crd.Status.StoredVersions = []string{"v1alpha1", "v1"}
	if err := c.Status().Update(context.Background(), crd); err != nil {
		t.Fatal(err)
	}
	if err := m.migrate(context.Background(), memcached); err != nil {
		t.Fatal(err)
	}
	if e := <-rec.Events; !strings.Contains(e, "by StorageVersionMigration "+name) {
		t.Errorf("Event %q", e)
	}
}

// TestFailedStorageVersionMigrationFallsBack: a StorageVersionMigration that failed is said in
// a Warning Event, and the operator's own pass rewrites the objects.
func TestFailedStorageVersionMigrationFallsBack(t *testing.T) {
	var updated []string
	m, c, rec := migrator(t, []string{"v1alpha1", "v1"}, interceptor.Funcs{}, "a", "b")
	funcs := withMigrations(m, svmv1beta1.MigrationFailed)
	funcs.Update = countUpdates(&updated).Update
	m.Client = interceptor.NewClient(c.(client.WithWatch), funcs)
	m.Reader = m.Client
	if err := m.migrate(context.Background(), memcached); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(updated, []string{"a", "b"}) {
		t.Errorf("updated %v, want [a b]", updated)
	}
	want := []string{
		"Warning StorageVersionMigrationFailed StorageVersionMigration memcacheds.cache.example.com-v1-0: failed: as the test says; the operator rewrites the objects itself",
		"Normal StorageMigrated 2 objects rewritten at v1; status.storedVersions [v1alpha1 v1] is now [v1]",
	}
	for _, w := range want {
		if e := <-rec.Events; e != w {
			t.Errorf("Event %q, want %q", e, w)
		}
	}
}

// TestUnpickedStorageVersionMigrationFallsBack: a StorageVersionMigration that no controller
// picks up (no status within PickupTimeout: the API is served, the controller does not run)
// is said in a Warning Event, and the operator's own pass rewrites the objects.
func TestUnpickedStorageVersionMigrationFallsBack(t *testing.T) {
	var updated []string
	m, c, rec := migrator(t, []string{"v1alpha1", "v1"}, interceptor.Funcs{}, "a")
	m.PickupTimeout = time.Millisecond
	funcs := withMigrations(m, "")
	funcs.Update = countUpdates(&updated).Update
	m.Client = interceptor.NewClient(c.(client.WithWatch), funcs)
	m.Reader = m.Client
	if err := m.migrate(context.Background(), memcached); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(updated, []string{"a"}) {
		t.Errorf("updated %v, want [a]", updated)
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Warning StorageVersionMigrationFailed ") || !strings.Contains(e, "no status after 1ms") {
		t.Errorf("Event %q, want a Warning StorageVersionMigrationFailed saying it had no status", e)
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Normal StorageMigrated 1 objects rewritten") {
		t.Errorf("Event %q, want StorageMigrated by the operator's pass", e)
	}
}
