package informers

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
)

// The cache keeps no managed fields and no last-applied copy, of CRs and of Secrets.
func TestCacheTransformsDropWhatIsNotRead(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(3)}}}
	cr.SetAnnotations(map[string]string{lastApplied: `{"spec":{"size":3}}`, "keep": "me"})
	cr.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
	if _, err := StripUnread(cr); err != nil {
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

	// Of a Secret labelled as a record, only what the manager reads of a record: Helm's labels
	// and the signature's annotations, none longer than a real one.
	padded := strings.Repeat("p", 256<<10)
	s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Labels: map[string]string{"owner": "helm", "name": "x", "status": "deployed", "version": "1", "extra": "y"},
		Annotations: map[string]string{releasesign.SignatureAnnotation: "0123456789ab.mac", releasesign.DigestAnnotation: padded,
			"padding": padded}}}
	if _, err := dropSecretData(s); err != nil {
		t.Fatal(err)
	}
	if len(s.Labels) != 4 || s.Labels["name"] != "x" || s.Labels["extra"] != "" {
		t.Errorf("labels after the transform: %v", s.Labels)
	}
	if len(s.Annotations) != 2 || s.Annotations[releasesign.SignatureAnnotation] != "0123456789ab.mac" ||
		s.Annotations[releasesign.DigestAnnotation] != "" {
		t.Errorf("annotations after the transform: %d, signature %q, digest of %d bytes", len(s.Annotations),
			s.Annotations[releasesign.SignatureAnnotation], len(s.Annotations[releasesign.DigestAnnotation]))
	}
}

// The manager's cache interns what it keeps: two CRs' equal label values share their bytes.
// Each label value is built at run time, as a decoder builds it; a constant would share its
// bytes already and the test could not fail.
func TestCacheTransformInterns(t *testing.T) {
	crs := make([]*unstructured.Unstructured, 2)
	for i := range crs {
		crs[i] = &unstructured.Unstructured{Object: map[string]any{}}
		crs[i].SetLabels(map[string]string{"team": strings.Repeat("x", 3) + "-payments"})
		if _, err := StripUnread(crs[i]); err != nil {
			t.Fatal(err)
		}
	}
	a, b := crs[0].GetLabels()["team"], crs[1].GetLabels()["team"]
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("equal label values of two cached CRs do not share their bytes")
	}
}

// Of an object cached as metadata (a release object's kind, any namespace's), the cache keeps
// the annotations that tie it to a CR and a release, and a digest in place of the others and
// of labels past their bound: a namespace editor's 256 KiB of annotations per ConfigMap cost
// the cache a few bytes, and a change of them still shows.
func TestCacheBoundsMetadataOnlyObjects(t *testing.T) {
	padded := strings.Repeat("p", 256<<10)
	tied := map[string]string{ownership.OwnerNameAnnotation: "ns/m", ownership.OwnerTypeAnnotation: "cache.example.com/Memcached",
		ownership.HelmReleaseNameAnnotation: "m", ownership.HelmReleaseNamespaceAnnotation: "ns"}
	object := func(annotations, labels map[string]string) *metav1.PartialObjectMetadata {
		m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c",
			Annotations: maps.Clone(annotations), Labels: maps.Clone(labels)}}
		if _, err := CacheOptions(nil).DefaultTransform(m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	size := func(m *metav1.PartialObjectMetadata) (n int) {
		for k, v := range m.Annotations {
			n += len(k) + len(v)
		}
		for k, v := range m.Labels {
			n += len(k) + len(v)
		}
		return n
	}

	withPadding := maps.Clone(tied)
	withPadding["padding"] = padded
	withPadding["deployment.kubernetes.io/revision"] = "3"
	bigLabels := map[string]string{}
	for i := range 2000 {
		bigLabels[fmt.Sprintf("example.com/label-%d", i)] = strings.Repeat("v", 63)
	}
	m := object(withPadding, bigLabels)
	for k, v := range tied {
		if m.Annotations[k] != v {
			t.Errorf("annotation %s: %q kept, want %q", k, m.Annotations[k], v)
		}
	}
	if got := size(m); got > 1024 {
		t.Errorf("an object with 256 KiB of annotations and %d KiB of labels keeps %d bytes of them in the cache, want at most 1 KiB",
			len(bigLabels)*80>>10, got)
	}

	// Changes show in the digests; the deployment controller's annotations do not.
	changed := maps.Clone(withPadding)
	changed["padding"] = padded[1:]
	revised := maps.Clone(withPadding)
	revised["deployment.kubernetes.io/revision"] = "4"
	relabelled := maps.Clone(bigLabels)
	relabelled["example.com/label-0"] = "w"
	for _, tc := range []struct {
		name   string
		a, b   *metav1.PartialObjectMetadata
		differ bool
	}{
		{"an annotation changed", m, object(changed, bigLabels), true},
		{"the revision annotation changed", m, object(revised, bigLabels), false},
		{"a label changed", m, object(withPadding, relabelled), true},
		{"the same", m, object(withPadding, bigLabels), false},
	} {
		same := maps.Equal(tc.a.Annotations, tc.b.Annotations) && maps.Equal(tc.a.Labels, tc.b.Labels)
		if same == tc.differ {
			t.Errorf("%s: cached metadata differs %v, want %v", tc.name, !same, tc.differ)
		}
	}

	// Small labels are kept as they are, for the selectors of cached objects.
	if m := object(nil, map[string]string{"canary": "true"}); m.Labels["canary"] != "true" || m.Annotations != nil {
		t.Errorf("an object with one label and no annotations cached as %v, %v", m.Labels, m.Annotations)
	}
}
