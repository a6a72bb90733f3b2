package trustedconfig

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func testMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(configMapGVK, meta.RESTScopeNamespace)
	m.Add(storageClassGVK, meta.RESTScopeRoot)
	m.Add(clusterRoleGVK, meta.RESTScopeRoot)
	m.Add(roleBindingGVK, meta.RESTScopeNamespace)
	return m
}

// What takeOver accepts of an unsigned record's manifests is what confinedKube would apply.
func TestConfinedManifest(t *testing.T) {
	sc := []schema.GroupKind{storageClassGVK.GroupKind()}
	cm := func(ns string) string {
		s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n"
		if ns != "" {
			s += "  namespace: " + ns + "\n"
		}
		return "---\n" + s
	}
	binding := "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: b\n"
	cases := []struct {
		name, manifest, refuse string
		kinds, rbac            []schema.GroupKind
	}{
		{"no namespace", cm(""), "", nil, nil},
		{"own namespace", cm("t1"), "", nil, nil},
		{"another namespace", cm("t1") + cm("t2"), "outside the release's namespace", nil, nil},
		{"declared StorageClass", "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: s\n", "", sc, nil},
		{"undeclared StorageClass", "---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: s\n", "not a kind this chart renders", nil, nil},
		{"ClusterRole", "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: r\n", "not a kind", sc, nil},
		{"unknown kind", "---\napiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: r\n", "example.com", sc, nil},
		{"undeclared RoleBinding", binding, "does not declare the kind", nil, nil},
		{"declared RoleBinding", binding, "", nil, []schema.GroupKind{roleBindingGVK.GroupKind()}},
	}
	for _, tc := range cases {
		err := confinedManifest(testMapper(), "t1", tc.kinds, tc.rbac, tc.manifest)
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.refuse)
		}
	}
}
