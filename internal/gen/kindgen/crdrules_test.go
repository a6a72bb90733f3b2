package kindgen

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func TestCRDRulesWriteOnlyTheKindsCRDs(t *testing.T) {
	kinds := []Kind{
		{GVK: schema.GroupVersionKind{Group: "pools.transwarp.io", Version: "v1", Kind: "Pool"}, Plural: "pools"},
		{GVK: schema.GroupVersionKind{Group: "example.transwarp.io", Version: "v1", Kind: "Widget"}, Plural: "widgets"},
	}
	markers := []Marker{
		{Group: crdGroup, Resource: crdResource, Verb: "watch", Dir: "sidecar/hook"},
		{Group: crdGroup, Resource: crdResource, Verb: "update", Dir: "sidecar/hook"},
		{Group: crdGroup, Resource: crdResource, Verb: "get", Dir: "sidecar/hook"},
		{Group: crdGroup, Resource: crdResource, Verb: "get", Dir: "sidecar/other"},
		{Group: "", Resource: "secrets", Verb: "update", Dir: "sidecar/hook"},
	}
	var b strings.Builder
	crdRules(&b, kinds, markers)
	var role rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte("rules:\n"+b.String()), &role); err != nil {
		t.Fatalf("%v in\n%s", err, b.String())
	}
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{crdGroup}, Resources: []string{crdResource}, Verbs: []string{"get", "watch"}},
		{APIGroups: []string{crdGroup}, Resources: []string{crdResource}, Verbs: []string{"update"},
			ResourceNames: []string{"pools.pools.transwarp.io", "widgets.example.transwarp.io"}},
	}
	if !reflect.DeepEqual(role.Rules, want) {
		t.Errorf("rules\n%+v\nwant\n%+v", role.Rules, want)
	}
	if !strings.Contains(b.String(), "markers in sidecar/hook and sidecar/other") {
		t.Errorf("the rules do not say which markers ask for them:\n%s", b.String())
	}

	b.Reset()
	crdRules(&b, kinds, markers[4:])
	if b.Len() != 0 {
		t.Errorf("rules on CRDs without a marker asking for them:\n%s", b.String())
	}
}
