package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The cache keeps no managed fields and no last-applied copy, of CRs and of Secrets.
func TestCacheTransformsDropWhatIsNotRead(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(3)}}}
	cr.SetAnnotations(map[string]string{lastApplied: `{"spec":{"size":3}}`, "keep": "me"})
	cr.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	if _, err := stripUnread(cr); err != nil {
		t.Fatal(err)
	}
	if got := cr.GetAnnotations(); got[lastApplied] != "" || got["keep"] != "me" {
		t.Errorf("annotations after the transform: %v", got)
	}
	if cr.GetManagedFields() != nil {
		t.Error("managed fields kept")
	}
	if _, found, _ := unstructured.NestedInt64(cr.Object, "spec", "size"); !found {
		t.Error("the spec, which the reconciler reads, was dropped")
	}

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{lastApplied: "{}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm"}}}, Data: map[string][]byte{"release": []byte("x")}}
	if _, err := dropSecretData(s); err != nil {
		t.Fatal(err)
	}
	if s.Data != nil || s.ManagedFields != nil || s.Annotations[lastApplied] != "" {
		t.Errorf("secret after the transform: %+v", s)
	}
}

// Release objects lose their status in the cache; CRs keep theirs (the readiness controller
// and the drift filter read it).
func TestCacheDropsReleaseObjectStatus(t *testing.T) {
	transform := withoutReleaseObjectStatus([]schema.GroupVersionKind{memcachedGVK})
	cr := memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "revision": int64(1)}})
	d := liveDeployment(3, "m")
	d.Object["status"] = map[string]any{"replicas": int64(3)}
	for _, obj := range []any{cr, d} {
		if _, err := transform(obj); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := cr.Object["status"]; !ok {
		t.Error("the CR's status was dropped")
	}
	if _, ok := d.Object["status"]; ok {
		t.Error("the Deployment's status was kept")
	}
	if r, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas"); r != 3 {
		t.Error("the Deployment's spec, which the drift filter compares, was dropped")
	}
}
