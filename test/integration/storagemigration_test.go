package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	svmv1beta1 "k8s.io/api/storagemigration/v1beta1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/storagemigration"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestStorageMigration runs the operator's own migration pass against the apiserver, as after
// make add-version: a kind stored at v1alpha1 gains v1 as its storage version, and its CRD's
// status.storedVersions lists both. The pass rewrites every object still stored at v1alpha1
// (its resourceVersion moves, its spec does not), keeps an edit made at v1, and leaves
// storedVersions [v1], so that make remove-version may drop v1alpha1. The local cluster
// serves StorageVersionMigrations: OwnPassOnly keeps the pass from using them.
func TestStorageMigration(t *testing.T) {
	s := storedAtTwoVersions(t, "migrationtests", "MigrationTest")
	s.edit(t, "b", 2) // at v1 before the pass: its edit must stay
	before := s.resourceVersions(t)
	m := s.migrator()
	m.OwnPassOnly = true
	runCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := m.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	s.checkMigrated(t, before, map[string]int64{"a": 1, "b": 2, "c": 1})
	s.checkEvent(t, m, "3 objects rewritten at v1; status.storedVersions [v1alpha1 v1] is now [v1]")
}

// TestStorageMigrationByAPIServer: where the API server serves StorageVersionMigrations (the local
// cluster, hack/cluster-up.sh), the same migration is the API server's: the manager creates a
// StorageVersionMigration of the resource, which kube-controller-manager's
// storage-version-migrator-controller runs to Succeeded, rewriting the objects (their
// resourceVersions move, their specs do not); an edit made while it runs is kept; then the
// manager prunes storedVersions to [v1], which the controller does not, and says so in an
// Event.
func TestStorageMigrationByAPIServer(t *testing.T) {
	s := storedAtTwoVersions(t, "svmmigrationtests", "SVMMigrationTest")
	before := s.resourceVersions(t)
	m := s.migrator()
	runCtx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- m.Start(runCtx) }()
	s.edit(t, "b", 2) // races the migration: kept whichever comes first
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.checkMigrated(t, before, map[string]int64{"a": 1, "b": 2, "c": 1})

	var svms svmv1beta1.StorageVersionMigrationList
	if err := s.c.List(context.Background(), &svms); err != nil {
		t.Fatal(err)
	}
	var ours []string
	for _, svm := range svms.Items {
		if svm.Spec.Resource != (metav1.GroupResource{Group: s.group, Resource: s.plural}) {
			continue
		}
		ours = append(ours, svm.Name)
		t.Cleanup(func() { _ = s.c.Delete(context.Background(), &svm) })
		if !meta.IsStatusConditionTrue(svm.Status.Conditions, string(svmv1beta1.MigrationSucceeded)) {
			t.Errorf("StorageVersionMigration %s: conditions %v, want Succeeded", svm.Name, svm.Status.Conditions)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("StorageVersionMigrations of %s.%s: %v, want one", s.plural, s.group, ours)
	}
	s.checkEvent(t, m, "objects rewritten at v1 by StorageVersionMigration "+ours[0]+"; status.storedVersions [v1alpha1 v1] is now [v1]")
}

// storedKind is a kind of the test whose objects a, b and c of spec {size: 1} were created at
// v1alpha1, then v1 became its storage version.
type storedKind struct {
	c             client.Client
	crd           *apiextensionsv1.CustomResourceDefinition
	group, plural string
	ns            string
	current       schema.GroupVersionKind
}

// storedAtTwoVersions makes the CRD of plural and kind stored at v1alpha1, its objects, then v1 its
// storage version, and waits until its storedVersions are [v1alpha1 v1].
func storedAtTwoVersions(t *testing.T, plural, kind string) *storedKind {
	t.Helper()
	env := newEnv(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	const group = "migration.integration.warpdrive.transwarp.io"
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1alpha1", true)}},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	s := &storedKind{c: c, crd: crd, group: group, plural: plural, ns: env.Namespace(t),
		current: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}}
	old := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		u := s.object("a", old)
		u.Object["spec"] = map[string]any{"size": int64(1)}
		return c.Create(ctx, u) // fails until the CRD is established
	})
	for _, name := range []string{"b", "c"} {
		u := s.object(name, old)
		u.Object["spec"] = map[string]any{"size": int64(1)}
		if err := c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}

	// make add-version: v1 is served and stored, v1alpha1 served.
	if err := c.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{version("v1alpha1", false), version("v1", true)}
	if err := c.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		if got, err := s.storedVersions(ctx); err != nil || !slices.Equal(got, []string{"v1alpha1", "v1"}) {
			return fmt.Errorf("storedVersions %v (%v), want [v1alpha1 v1]", got, err)
		}
		// v1 is served (the CRD's version list is watched by the API server's handlers).
		return c.Get(ctx, client.ObjectKeyFromObject(s.object("a", s.current)), s.object("a", s.current))
	})
	return s
}

func (s *storedKind) object(name string, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(s.ns)
	u.SetName(name)
	return u
}

func (s *storedKind) storedVersions(ctx context.Context) ([]string, error) {
	got := &apiextensionsv1.CustomResourceDefinition{}
	err := s.c.Get(ctx, client.ObjectKeyFromObject(s.crd), got)
	return got.Status.StoredVersions, err
}

// edit sets name's spec.size at v1.
func (s *storedKind) edit(t *testing.T, name string, size int64) {
	t.Helper()
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		u := s.object(name, s.current)
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		u.Object["spec"] = map[string]any{"size": size}
		return s.c.Update(ctx, u)
	})
}

// resourceVersions are those of a, b and c, read at v1.
func (s *storedKind) resourceVersions(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		u := s.object(name, s.current)
		if err := s.c.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		out[name] = u.GetResourceVersion()
	}
	return out
}

// migrator is the manager's migration of the kind.
func (s *storedKind) migrator() *storagemigration.Migrator {
	return &storagemigration.Migrator{Kinds: []schema.GroupVersionKind{s.current}, Client: s.c, Reader: s.c,
		Mapper: s.c.RESTMapper(), Recorder: record.NewFakeRecorder(10), Log: logr.Discard()}
}

// checkMigrated checks that storedVersions is [v1], that the specs are sizes, and that every
// object but b (edited at v1, so already stored at v1) was rewritten since before.
func (s *storedKind) checkMigrated(t *testing.T, before map[string]string, sizes map[string]int64) {
	t.Helper()
	ctx := context.Background()
	if got, err := s.storedVersions(ctx); err != nil || !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions after the migration: %v (%v), want [v1]", got, err)
	}
	for name, size := range sizes {
		u := s.object(name, s.current)
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		if want := map[string]any{"size": size}; !reflect.DeepEqual(u.Object["spec"], want) {
			t.Errorf("%s's spec after the migration: %v, want %v", name, u.Object["spec"], want)
		}
		if name != "b" && u.GetResourceVersion() == before[name] {
			t.Errorf("%s was not rewritten: resourceVersion %s", name, before[name])
		}
	}
}

// checkEvent checks that m recorded the one Event StorageMigrated, saying message.
func (s *storedKind) checkEvent(t *testing.T, m *storagemigration.Migrator, message string) {
	t.Helper()
	events := m.Recorder.(*record.FakeRecorder).Events
	if len(events) != 1 {
		t.Fatalf("%d Events, want 1 (StorageMigrated)", len(events))
	}
	if e := <-events; e != "Normal StorageMigrated "+message {
		t.Errorf("Event %q, want %q", e, "Normal StorageMigrated "+message)
	}
}
