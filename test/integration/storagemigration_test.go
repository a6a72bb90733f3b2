package integration

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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

// TestStorageMigration runs the manager's storage migration against the apiserver, as after
// make add-version: a kind stored at v1alpha1 gains v1 as its storage version, and its CRD's
// status.storedVersions lists both. The pass rewrites every object still stored at v1alpha1
// (its resourceVersion moves, its spec does not), keeps an edit made at v1, and leaves
// storedVersions [v1], so that make remove-version may drop v1alpha1.
func TestStorageMigration(t *testing.T) {
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
	const group, plural = "migration.integration.warpdrive.transwarp.io", "migrationtests"
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
				Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names:    apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: "MigrationTest", ListKind: "MigrationTestList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1alpha1", true)}},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), crd) })
	storedVersions := func(ctx context.Context) ([]string, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		err := c.Get(ctx, client.ObjectKeyFromObject(crd), got)
		return got.Status.StoredVersions, err
	}
	old := schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: "MigrationTest"}
	ns := env.Namespace(t)
	object := func(name string, gvk schema.GroupVersionKind) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(name)
		return u
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		u := object("a", old)
		u.Object["spec"] = map[string]any{"size": int64(1)}
		return c.Create(ctx, u) // fails until the CRD is established
	})
	for _, name := range []string{"b", "c"} {
		u := object(name, old)
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
		if got, err := storedVersions(ctx); err != nil || !slices.Equal(got, []string{"v1alpha1", "v1"}) {
			return fmt.Errorf("storedVersions %v (%v), want [v1alpha1 v1]", got, err)
		}
		return nil
	})
	current := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "MigrationTest"}
	// b is edited at v1 before the pass: its edit must stay.
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		b := object("b", current)
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Object["spec"] = map[string]any{"size": int64(2)}
		return c.Update(ctx, b)
	})
	before := map[string]string{}
	for _, name := range []string{"a", "b", "c"} {
		u := object(name, current)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		before[name] = u.GetResourceVersion()
	}

	m := &storagemigration.Migrator{Kinds: []schema.GroupVersionKind{current}, Client: c, Reader: c, Mapper: c.RESTMapper(),
		Recorder: record.NewFakeRecorder(10), Log: logr.Discard()}
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := m.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	if got, err := storedVersions(ctx); err != nil || !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions after the pass: %v (%v), want [v1]", got, err)
	}
	for name, size := range map[string]int64{"a": 1, "b": 2, "c": 1} {
		u := object(name, current)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			t.Fatal(err)
		}
		if want := map[string]any{"size": size}; !reflect.DeepEqual(u.Object["spec"], want) {
			t.Errorf("%s's spec after the pass: %v, want %v", name, u.Object["spec"], want)
		}
		// b's edit stored it at v1 already: rewriting it as it is writes nothing.
		if name != "b" && u.GetResourceVersion() == before[name] {
			t.Errorf("%s was not rewritten: resourceVersion %s", name, before[name])
		}
	}
}
