package chartpolicy

import (
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TemplateFunctions reads the declaration as make add-kind writes it and as a person may
// edit it, and refuses a name that is not a guarded function.
func TestTemplateFunctions(t *testing.T) {
	withAnnotation := func(v string) *chart.Chart {
		return &chart.Chart{Metadata: &chart.Metadata{Name: "c", Annotations: map[string]string{TemplateFunctionsAnnotation: v}}}
	}
	for v, want := range map[string][]string{
		"":                nil,
		"tpl":             {"tpl"},
		"lookup,tpl":      {"lookup", "tpl"},
		" tpl , lookup, ": {"lookup", "tpl"},
		"tpl,tpl":         {"tpl"},
	} {
		got, err := TemplateFunctions(withAnnotation(v))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	if got, err := TemplateFunctions(&chart.Chart{Metadata: &chart.Metadata{Name: "c"}}); err != nil || got != nil {
		t.Errorf("no annotation: %v, %v", got, err)
	}
	if _, err := TemplateFunctions(withAnnotation("tpl,env")); err == nil || !strings.Contains(err.Error(), `"env"`) {
		t.Errorf("an unguarded function: error %v", err)
	}
}

// HasHooks sees a hook in a chart and in a subchart, and none in a chart without one.
func TestHasHooks(t *testing.T) {
	hook := &chart.File{Name: "templates/migrate.yaml", Data: []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    "helm.sh/hook": pre-install,pre-upgrade
`)}
	plain := &chart.File{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")}
	withHook := &chart.Chart{Metadata: &chart.Metadata{Name: "hooked"}, Templates: []*chart.File{plain, hook}}
	if !HasHooks(withHook) {
		t.Error("HasHooks missed a hook template")
	}
	parent := &chart.Chart{Metadata: &chart.Metadata{Name: "parent"}, Templates: []*chart.File{plain}}
	if HasHooks(parent) {
		t.Error("HasHooks found a hook in a chart without one")
	}
	parent.AddDependency(withHook)
	if !HasHooks(parent) {
		t.Error("HasHooks missed a hook template of a subchart")
	}
}

// InstallsCRDs sees CRDs in a subchart's crds/ directory and a declared CRD kind, and none in
// a chart with neither.
func TestInstallsCRDs(t *testing.T) {
	plain := &chart.Chart{Metadata: &chart.Metadata{Name: "plain"}}
	if InstallsCRDs(plain, []schema.GroupKind{{Group: "storage.k8s.io", Kind: "StorageClass"}}) {
		t.Error("a chart without CRDs installs some")
	}
	if !InstallsCRDs(plain, []schema.GroupKind{{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}}) {
		t.Error("a chart that declares the CRD kind installs none")
	}
	sub := &chart.Chart{Metadata: &chart.Metadata{Name: "sub"},
		Files: []*chart.File{{Name: "crds/widgets.yaml", Data: []byte("kind: CustomResourceDefinition\n")}}}
	parent := &chart.Chart{Metadata: &chart.Metadata{Name: "parent"}}
	parent.AddDependency(sub)
	if !InstallsCRDs(parent, nil) {
		t.Error("a chart whose subchart has crds/ installs none")
	}
}

// RBACKinds reads the namespaced RBAC kinds a chart declares, and refuses any other kind:
// ClusterRoles are declared as cluster-scoped kinds.
func TestRBACKinds(t *testing.T) {
	withAnnotation := func(v string) *chart.Chart {
		return &chart.Chart{Metadata: &chart.Metadata{Name: "c", Annotations: map[string]string{RBACKindsAnnotation: v}}}
	}
	role := schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "Role"}
	binding := schema.GroupKind{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}
	for v, want := range map[string][]schema.GroupKind{
		"": nil,
		"RoleBinding.rbac.authorization.k8s.io, Role.rbac.authorization.k8s.io": {role, binding},
		"Role.rbac.authorization.k8s.io":                                        {role},
	} {
		got, err := RBACKinds(withAnnotation(v))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v, %v; want %v", v, got, err, want)
		}
	}
	for _, v := range []string{"ClusterRole.rbac.authorization.k8s.io", "Role", "ConfigMap", "Role.rbac.authorization.k8s.io,x y"} {
		if _, err := RBACKinds(withAnnotation(v)); err == nil || !strings.Contains(err.Error(), RBACKindsAnnotation) {
			t.Errorf("%q: error %v, want one naming %s", v, err, RBACKindsAnnotation)
		}
	}
	for gk, want := range map[schema.GroupKind]bool{role: true, binding: true,
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}: false, {Kind: "ServiceAccount"}: false} {
		if got := IsNamespacedRBAC(gk); got != want {
			t.Errorf("IsNamespacedRBAC(%v) = %v", gk, got)
		}
	}
}
