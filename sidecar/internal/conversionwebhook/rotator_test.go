package conversionwebhook

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestCRDNamesAreThePluralsOfTheServedKinds(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: "cache.example.com", Version: "v1beta1"}})
	mapper.AddSpecific(schema.GroupVersionKind{Group: "cache.example.com", Version: "v1beta1", Kind: "Memcached"},
		schema.GroupVersionResource{Group: "cache.example.com", Version: "v1beta1", Resource: "memcacheds"},
		schema.GroupVersionResource{Group: "cache.example.com", Version: "v1beta1", Resource: "memcached"}, meta.RESTScopeNamespace)
	names, err := CRDNames(mapper, Kinds{testKind: nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 || names[0] != "memcacheds.cache.example.com" {
		t.Errorf("CRD names %v, want [memcacheds.cache.example.com]", names)
	}
	if _, err := CRDNames(mapper, Kinds{{Group: "x.io", Kind: "Gone"}: nil}); err == nil {
		t.Error("a kind without a CRD has a name")
	}
}

func TestSecretKey(t *testing.T) {
	t.Setenv(namespaceEnv, "ops")
	for _, tc := range []struct{ flag, fallback, want string }{
		{"conv-cert", "", "ops/conv-cert"},
		{"other/conv-cert", "", "other/conv-cert"},
	} {
		got, err := SecretKey(tc.flag, tc.fallback)
		if err != nil || got.String() != tc.want {
			t.Errorf("SecretKey(%q) = %v, %v; want %s", tc.flag, got, err, tc.want)
		}
	}
	t.Setenv(namespaceEnv, "")
	got, err := SecretKey("conv-cert", "lease-ns")
	// In a pod the service account's namespace file wins over the fallback.
	if err != nil || (got != types.NamespacedName{Namespace: "lease-ns", Name: "conv-cert"} && got.Namespace == "") {
		t.Errorf("SecretKey without POD_NAMESPACE = %v, %v", got, err)
	}
}
