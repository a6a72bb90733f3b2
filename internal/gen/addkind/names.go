package addkind

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// versionPattern is the Kubernetes API version form kubebuilder accepts: v1, v2beta3, v1alpha1.
var versionPattern = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)

// kindPattern is a Go-style exported type name, as kubebuilder requires of a kind.
var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// checkGVK refuses a kind, group or version the apiserver or the repository's generators
// would refuse later, with the reason.
func checkGVK(kind, group, version string) error {
	if !kindPattern.MatchString(kind) {
		return fmt.Errorf("KIND %q: a kind is a capitalised name of letters and digits, such as WebApp", kind)
	}
	// The lower-case kind names the chart directory, the CRD's singular name and the files of
	// config/rbac and config/samples.
	if errs := validation.IsDNS1035Label(strings.ToLower(kind)); len(errs) > 0 {
		return fmt.Errorf("KIND %q: %s", kind, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
		return fmt.Errorf("GROUP %q: %s", group, strings.Join(errs, "; "))
	}
	if !strings.Contains(group, ".") {
		return fmt.Errorf("GROUP %q: a CRD's group must contain a dot, such as apps.example.com", group)
	}
	if !versionPattern.MatchString(version) {
		return fmt.Errorf("VERSION %q: want v<N>, v<N>alpha<M> or v<N>beta<M>, such as v1alpha1", version)
	}
	return nil
}

// Plural is the resource name of kind, made as kubebuilder and operator-sdk make it: the kind
// in lower case, with "es" after s, x, z, ch and sh, "ies" for a y after a consonant, and "s"
// otherwise ("Memcached" → "memcacheds", "Policy" → "policies", "Gateway" → "gateways").
func Plural(kind string) string {
	s := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case len(s) > 1 && s[len(s)-1] == 'y' && !strings.ContainsRune("aeiou", rune(s[len(s)-2])):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}
