package conversionwebhook

import (
	"slices"
	"strings"
	"testing"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// crd is the CRD of plural.group with conversion strategy (empty: none set, the API
// server's default None).
func crd(plural, group string, strategy apiextv1.ConversionStrategyType) *apiextv1.CustomResourceDefinition {
	c := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group}}
	switch strategy {
	case apiextv1.WebhookConverter:
		c.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: strategy, Webhook: &apiextv1.WebhookConversion{
			ClientConfig:             &apiextv1.WebhookClientConfig{Service: &apiextv1.ServiceReference{Name: "conv", Namespace: "ops"}},
			ConversionReviewVersions: []string{"v1"},
		}}
	case apiextv1.NoneConverter:
		c.Spec.Conversion = &apiextv1.CustomResourceConversion{Strategy: strategy}
	}
	return c
}

// TestCRDNamesAreTheWebhookCRDsOfTheServedKinds: the rotator is given the CRDs of the served
// kinds whose live strategy is Webhook, by their names <plural>.<group>, and not those of
// strategy None (the kinds of watches.yaml: a conversions.yaml of one schema), whose
// caBundle cert-controller cannot set, stopping the sidecar after its retries.
func TestCRDNamesAreTheWebhookCRDsOfTheServedKinds(t *testing.T) {
	gv := schema.GroupVersion{Group: "cache.example.com", Version: "v1beta1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	for kind, plural := range map[string]string{"Memcached": "memcacheds", "Redis": "redises", "Etcd": "etcds", "Gone": "gones"} {
		mapper.AddSpecific(gv.WithKind(kind), gv.WithResource(plural), gv.WithResource(strings.ToLower(kind)), meta.RESTScopeNamespace)
	}
	scheme := runtime.NewScheme()
	if err := apiextv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		crd("memcacheds", gv.Group, apiextv1.WebhookConverter),
		crd("redises", gv.Group, apiextv1.NoneConverter),
		crd("etcds", gv.Group, ""),
		crd("others", gv.Group, apiextv1.WebhookConverter), // not a served kind's
	).Build()
	kinds := Kinds{testKind: nil, {Group: gv.Group, Kind: "Redis"}: nil, {Group: gv.Group, Kind: "Etcd"}: nil}
	names, err := CRDNames(t.Context(), live, mapper, kinds)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"memcacheds.cache.example.com"}; !slices.Equal(names, want) {
		t.Errorf("CRD names %v, want %v: only the served kinds' CRDs of strategy Webhook", names, want)
	}
	names, err = CRDNames(t.Context(), live, mapper, Kinds{{Group: gv.Group, Kind: "Redis"}: nil})
	if err != nil || len(names) != 0 {
		t.Errorf("CRD names of a kind of strategy None: %v, %v; want none", names, err)
	}
	if _, err := CRDNames(t.Context(), live, mapper, Kinds{{Group: "x.io", Kind: "Gone"}: nil}); err == nil {
		t.Error("a kind the API server does not serve has a CRD name")
	}
	if _, err := CRDNames(t.Context(), live, mapper, Kinds{{Group: gv.Group, Kind: "Gone"}: nil}); err == nil {
		t.Error("a kind whose CRD cannot be read has a CRD name")
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
