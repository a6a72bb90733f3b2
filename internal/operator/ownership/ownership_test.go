package ownership

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// poolOwner are the annotations the helm-operator and Helm put on a cluster-scoped object of
// the WarpdrivePool team-a/x's release.
func poolOwner() map[string]string {
	return map[string]string{
		OwnerNameAnnotation: "team-a/x", OwnerTypeAnnotation: "WarpdrivePool.tos.transwarp.io",
		HelmReleaseNameAnnotation: "x", HelmReleaseNamespaceAnnotation: "team-a",
	}
}

func TestOwnedBy(t *testing.T) {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("tos.transwarp.io/v1alpha1")
	cr.SetKind("WarpdrivePool")
	cr.SetNamespace("team-a")
	cr.SetName("x")
	if !OwnedBy(poolOwner(), cr) {
		t.Error("the CR's own object: not owned")
	}
	with := func(k, v string) map[string]string {
		a := poolOwner()
		if v == "" {
			delete(a, k)
		} else {
			a[k] = v
		}
		return a
	}
	for name, annotations := range map[string]map[string]string{
		"another kind's CR of the same name": with(OwnerTypeAnnotation, "AppService.appcontroller.k8s.io"),
		"another namespace's CR":             with(OwnerNameAnnotation, "team-b/x"),
		"another release":                    with(HelmReleaseNameAnnotation, "y"),
		"another release namespace":          with(HelmReleaseNamespaceAnnotation, "team-b"),
		"no Helm annotations":                with(HelmReleaseNameAnnotation, ""),
		"not the operator's":                 {HelmReleaseNameAnnotation: "x", HelmReleaseNamespaceAnnotation: "team-a"},
		"no annotations":                     nil,
	} {
		if OwnedBy(annotations, cr) {
			t.Errorf("%s: owned", name)
		}
	}
}
