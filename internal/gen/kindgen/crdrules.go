package kindgen

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// crdGroup and crdResource name the CustomResourceDefinitions in markers and rules.
const (
	crdGroup    = "apiextensions.k8s.io"
	crdResource = "customresourcedefinitions"
	crdStatus   = crdResource + "/status"
)

// crdRules writes the manager role's rules on CustomResourceDefinitions that the
// +kubebuilder:rbac markers ask for: the sidecar's conversion webhook writes its CA into the
// caBundle of the kinds' CRDs, and the storage migration (internal/storagemigration) prunes
// their status.storedVersions. Reading is granted on every CRD, as list and watch cannot be
// narrowed to names; writing only on the CRDs of watches.yaml's kinds (resourceNames), so
// that the ServiceAccount cannot rewrite, or point at itself, the conversion of another
// project's CRD. Nothing is written when no marker names CRDs.
func crdRules(b *strings.Builder, kinds []Kind, markers []Marker) {
	var reads []string
	writes := map[string][]string{} // by resource: the CRDs, their status
	dirs := map[string]bool{}
	for _, m := range markers {
		if m.Group != crdGroup || (m.Resource != crdResource && m.Resource != crdStatus) {
			continue
		}
		dirs[m.Dir] = true
		switch {
		case m.Resource == crdResource && (m.Verb == "get" || m.Verb == "list" || m.Verb == "watch"):
			if !slices.Contains(reads, m.Verb) {
				reads = append(reads, m.Verb)
			}
		case !slices.Contains(writes[m.Resource], m.Verb):
			writes[m.Resource] = append(writes[m.Resource], m.Verb)
		}
	}
	if len(reads)+len(writes) == 0 {
		return
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	fmt.Fprintf(b, "# CustomResourceDefinitions, for the +kubebuilder:rbac markers in %s:\n"+
		"# read on every CRD (list and watch cannot be narrowed to names), written only on the CRDs\n"+
		"# of the kinds of watches.yaml: their conversion webhook's caBundle, their storedVersions\n"+
		"# once the stored objects are migrated.\n", strings.Join(ds, " and "))
	if len(reads) > 0 {
		sortVerbs(reads)
		writeRule(b, crdGroup, crdResource, reads)
	}
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
		names = append(names, k.Plural+"."+k.GVK.Group)
	}
	sort.Strings(names)
	for _, resource := range []string{crdResource, crdStatus} {
		verbs := writes[resource]
		if len(verbs) == 0 {
			continue
		}
		sortVerbs(verbs)
		fmt.Fprintf(b, "- apiGroups:\n  - %s\n  resources:\n  - %s\n  resourceNames:\n", crdGroup, resource)
		for _, n := range names {
			fmt.Fprintf(b, "  - %s\n", n)
		}
		b.WriteString("  verbs:\n")
		for _, v := range verbs {
			fmt.Fprintf(b, "  - %s\n", v)
		}
	}
}
