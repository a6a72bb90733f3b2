package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// ChartKind is a kind that a test binds to a test chart of its own, outside watches.yaml: a
// chart with the shape of a public one, served by a manager the test starts with
// WatchesFile. Its CRD takes any spec, as `operator-sdk --helm-chart` makes for a chart
// without a schema.
type ChartKind struct {
	GVK   schema.GroupVersionKind
	Chart string // the chart's directory
}

// plural is the kind's resource: its lower-case name and an s, as every test kind spells it.
func (k ChartKind) plural() string { return strings.ToLower(k.GVK.Kind) + "s" }

// WatchesFile writes a watches file that lists the kind alone, bound to its chart.
func (k ChartKind) WatchesFile(t testing.TB) string {
	t.Helper()
	entry := []map[string]string{{"group": k.GVK.Group, "version": k.GVK.Version, "kind": k.GVK.Kind,
		"chart": k.Chart}}
	data, err := yaml.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	watches := filepath.Join(t.TempDir(), "watches.yaml")
	if err := os.WriteFile(watches, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return watches
}

// InstallChartKind creates k's CRD (any spec, a status subresource whose conditions are a list
// keyed by type, as in the operator's CRDs, so that each writer's server-side apply replaces
// only the conditions it owns) and, when the operator runs as its ServiceAccount, lets it
// reconcile the kind. All go when the test ends, the CRD waited for until it is gone, so that
// the next test can create it again.
func (e *Env) InstallChartKind(t testing.TB, k ChartKind) {
	t.Helper()
	ctx := context.Background()
	plural := k.plural()
	preserve, listMap := true, "map"
	conditions := apiextensionsv1.JSONSchemaProps{Type: "array", XListType: &listMap, XListMapKeys: []string{"type"},
		Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: &preserve, Required: []string{"type"},
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"type": {Type: "string"}}}}}
	status := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve,
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"conditions": conditions}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + k.GVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: k.GVK.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(k.GVK.Kind),
				Kind: k.GVK.Kind, ListKind: k.GVK.Kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: k.GVK.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve,
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": status}}},
			}},
		},
	}
	if err := e.Client.Create(ctx, crd); err != nil {
		t.Fatalf("creating the CRD of %s: %v", k.GVK.Kind, err)
	}
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), crd)
		_ = Poll(context.Background(), time.Minute, func(ctx context.Context) error {
			err := e.Client.Get(ctx, client.ObjectKeyFromObject(crd), &apiextensionsv1.CustomResourceDefinition{})
			if err == nil {
				return fmt.Errorf("CRD %s still there", crd.Name)
			}
			return client.IgnoreNotFound(err)
		})
	})
	if err := e.WaitCRDEstablished(ctx, crd.Name); err != nil {
		t.Fatal(err)
	}
	if !e.Impersonating() {
		return
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "test-" + crd.Name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{k.GVK.Group}, Resources: []string{plural, plural + "/status", plural + "/finalizers"},
			Verbs: []string{"get", "list", "watch", "update", "patch"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ServiceAccount.Namespace, Name: e.ServiceAccount.Name}}}
	for _, obj := range []client.Object{role, binding} {
		if err := e.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), obj) })
	}
}
