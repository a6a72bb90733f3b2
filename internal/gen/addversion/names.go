package addversion

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/version"
)

// versionName is a Kubernetes API version name: v1, v2beta1, v1alpha3. The API server orders
// versions by it (GA, then beta, then alpha), and kubectl picks the first.
var versionName = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// checkNewVersion refuses v unless it names a version after newest, the kind's current one,
// and is none of existing, the kind's versions.
func checkNewVersion(v, newest string, existing []string) error {
	if !versionName.MatchString(v) {
		return fmt.Errorf("version %q is not a Kubernetes version name such as v1, v1beta1 or v2alpha1", v)
	}
	for _, e := range existing {
		if e == v {
			return fmt.Errorf("version %s is already a version of the kind (%v)", v, existing)
		}
	}
	if version.CompareKubeAwareVersionStrings(v, newest) < 0 {
		return fmt.Errorf("version %s comes before %s, the kind's newest version, in Kubernetes' order of versions "+
			"(GA before beta before alpha: v2 > v1 > v2beta1 > v1beta1 > v2alpha1 > v1alpha1): a new version must be the newest", v, newest)
	}
	return nil
}
