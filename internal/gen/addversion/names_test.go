package addversion

import (
	"strings"
	"testing"
)

func TestCheckNewVersion(t *testing.T) {
	existing := []string{"v1alpha1", "v1beta1"}
	for _, ok := range []string{"v1beta2", "v2beta1", "v1", "v3"} {
		if err := checkNewVersion(ok, "v1beta1", existing); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for v, want := range map[string]string{
		"1":        "not a Kubernetes version name",
		"v1.2":     "not a Kubernetes version name",
		"v0":       "not a Kubernetes version name",
		"v1gamma1": "not a Kubernetes version name",
		"v1beta":   "not a Kubernetes version name",
		"V1":       "not a Kubernetes version name",
		"v1beta1":  "already a version",
		"v1alpha1": "already a version",
		"v1alpha2": "comes before v1beta1",
		"v2alpha1": "comes before v1beta1",
	} {
		err := checkNewVersion(v, "v1beta1", existing)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", v, err, want)
		}
	}
}
