package trustedconfig

import (
	"errors"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
)

func info(gvk schema.GroupVersionKind, scope meta.RESTScope, ns, name string) *resource.Info {
	return &resource.Info{Name: name, Namespace: ns, Mapping: &meta.RESTMapping{GroupVersionKind: gvk, Scope: scope}}
}

var (
	configMapGVK    = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	storageClassGVK = schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}
	clusterRoleGVK  = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}
	roleBindingGVK  = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}
	roleGVK         = schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}
)

// A release touches objects of its namespace and the cluster-scoped kinds its chart
// declares, and nothing else, whatever manifest it is given.
func TestConfinedKubeRefusesWhatTheChartCannotRender(t *testing.T) {
	pool := newConfinedKube(nil, "t1", []schema.GroupKind{storageClassGVK.GroupKind()}, nil, nil)
	app := newConfinedKube(nil, "t1", nil, nil, nil)
	// A chart that declares its RoleBindings (warpdrive.transwarp.io/rbac-kinds), not its Roles.
	binder := newConfinedKube(nil, "t1", nil, []schema.GroupKind{roleBindingGVK.GroupKind()}, nil)
	cases := []struct {
		name   string
		c      *confinedKube
		info   *resource.Info
		refuse string // part of the error, "" for allowed
	}{
		{"own namespace", app, info(configMapGVK, meta.RESTScopeNamespace, "t1", "x"), ""},
		{"another namespace", app, info(configMapGVK, meta.RESTScopeNamespace, "t2", "x"), `ConfigMap t2/x is outside the release's namespace "t1"`},
		{"kube-system", pool, info(configMapGVK, meta.RESTScopeNamespace, "kube-system", "x"), "outside the release's namespace"},
		{"declared cluster-scoped kind", pool, info(storageClassGVK, meta.RESTScopeRoot, "", "fast"), ""},
		{"undeclared cluster-scoped kind", app, info(storageClassGVK, meta.RESTScopeRoot, "", "fast"), "its cluster-scoped kinds: none"},
		{"another cluster-scoped kind", pool, info(clusterRoleGVK, meta.RESTScopeRoot, "", "admin"), "ClusterRole.rbac.authorization.k8s.io"},
		{"no mapping", app, &resource.Info{Name: "x", Namespace: "t1"}, "scope is unknown"},
		{"undeclared RoleBinding in its namespace", app, info(roleBindingGVK, meta.RESTScopeNamespace, "t1", "read-secrets"), "does not declare the kind"},
		{"undeclared Role in its namespace", binder, info(roleGVK, meta.RESTScopeNamespace, "t1", "read-secrets"), "Role.rbac.authorization.k8s.io t1/read-secrets"},
		{"declared RoleBinding", binder, info(roleBindingGVK, meta.RESTScopeNamespace, "t1", "read-secrets"), ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.check(kube.ResourceList{info(configMapGVK, meta.RESTScopeNamespace, "t1", "ok"), tc.info})
			switch {
			case tc.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
				t.Errorf("error %v, want one saying %q", err, tc.refuse)
			}
			// Every call that acts refuses the same lists.
			if tc.refuse != "" {
				if _, err := tc.c.Create(kube.ResourceList{tc.info}); err == nil {
					t.Error("Create went through")
				}
				if _, err := tc.c.Update(kube.ResourceList{tc.info}, nil, false); err == nil {
					t.Error("Update went through with the object in the original list (it would be deleted)")
				}
				if _, errs := tc.c.Delete(kube.ResourceList{tc.info}); len(errs) == 0 {
					t.Error("Delete went through")
				}
				var outside *outsideReleaseError
				if tc.info.Mapping != nil && !errors.As(err, &outside) {
					t.Errorf("error %T, want *outsideReleaseError", err)
				}
			}
		})
	}
}
