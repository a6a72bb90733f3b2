package addkind

import (
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
)

// Report is what Add did and what a person should review before committing it.
type Report struct {
	Kind schema.GroupVersionKind
	// ChartDir is where the chart was copied, relative to the root.
	ChartDir string
	// Chart names the chart and its versions.
	Chart string
	// Annotations are the changes to the chart's Chart.yaml.
	Annotations []string
	// Written are the files make manifests and add-kind wrote, relative to the root, but
	// for those of ChartDir.
	Written []string
	// ManifestsOutput is what make manifests printed.
	ManifestsOutput string
	// Review are the topics to review, each with its findings.
	Review []Topic
}

// Topic is one thing to review: a title and its findings, one a line.
type Topic struct {
	Title string
	Lines []string
}

// managerRole is the manager's ClusterRole, which make manifests extends with the rights the
// new chart needs.
const managerRole = "config/rbac/role.yaml"

// maxListed is how many schema paths a topic lists before it counts the rest.
const maxListed = 12

func (r *Report) add(title string, lines ...string) {
	r.Review = append(r.Review, Topic{Title: title, Lines: lines})
}

// review fills r.Review from the chart, its CRD, its safe default and the files before and
// after make manifests.
func (r *Report) review(c *chart.Chart, crd *apiextv1.CustomResourceDefinition, safe safeDefault, before, after map[string][]byte) {
	r.reviewSchema(c, crd)
	r.reviewRBAC(c, before[managerRole], after[managerRole])
	r.reviewSafeDefault(safe, r.ChartDir)
	r.reviewManifestsOutput()

	var hookLines []string
	for _, h := range hooksOf(c) {
		line := fmt.Sprintf("%s: %s", h.template, h.events)
		if h.weight != "" {
			line += ", weight " + h.weight
		}
		if h.deletePolicy != "" {
			line += ", delete policy " + h.deletePolicy
		}
		hookLines = append(hookLines, line)
	}
	if len(hookLines) > 0 {
		r.add("Hooks: the operator runs them, with its own rights, confined as the release's other objects are "+
			"(its namespace, the cluster-scoped kinds the chart declares); test hooks (helm.sh/hook: test) never run, "+
			"since the operator does not run helm test", hookLines...)
	}

	calls, _ := FunctionsCalled(c)
	var callLines []string
	for _, f := range chartpolicy.GuardedFunctions {
		if len(calls[f]) > 0 {
			callLines = append(callLines, fmt.Sprintf("%s: %s", f, strings.Join(calls[f], ", ")))
		}
	}
	if len(callLines) > 0 {
		r.add("Template functions ("+chartpolicy.TemplateFunctionsAnnotation+"): lookup reads the cluster with the operator's rights; "+
			"tpl evaluates strings, values of a spec among them, as templates that may call lookup", callLines...)
	}

	// The operator renders the chart at each reconcile, and upgrades the release when the
	// rendering differs from the deployed one; an upgrade changes objects it watches, which
	// is another reconcile. A value new at each render is then an upgrade loop: seen on the
	// cluster, a chart with a password of randAlphaNum made a new revision five times a second.
	volatile, _ := functionsCalled(c, VolatileFunctions)
	var volatileLines []string
	for _, f := range VolatileFunctions {
		if len(volatile[f]) > 0 {
			volatileLines = append(volatileLines, fmt.Sprintf("%s: %s", f, strings.Join(volatile[f], ", ")))
		}
	}
	if len(volatileLines) > 0 {
		r.add("Values new at each render: unless a template keeps the first value (lookup of the object it rendered, "+
			"as Bitnami's common.secrets.passwords.manage does) or a spec sets it, the release renders differently "+
			"at each reconcile and the operator upgrades it again and again", volatileLines...)
	}

	if deps := dependencyLines(c, c.Name()); len(deps) > 0 {
		r.add("Dependencies, vendored under charts/ (the operator never downloads one)", deps...)
	}
	r.add("Sample", fmt.Sprintf("config/samples/%s_%s_%s.yaml is the chart's values.yaml as a spec, if it was new: "+
		"trim it to what a user sets", r.Kind.Group, r.Kind.Version, strings.ToLower(r.Kind.Kind)))
}

// reviewSchema says where the CRD's spec schema came from and which parts of it are open:
// fields the apiserver keeps without checking them.
func (r *Report) reviewSchema(c *chart.Chart, crd *apiextv1.CustomResourceDefinition) {
	origin := "translated from the chart's values.schema.json"
	if c.Schema == nil {
		origin = "inferred from values.yaml: the chart has no values.schema.json"
	}
	spec, ok := apiextv1.JSONSchemaProps{}, false
	if v := crd.Spec.Versions; len(v) > 0 && v[0].Schema != nil && v[0].Schema.OpenAPIV3Schema != nil {
		spec, ok = v[0].Schema.OpenAPIV3Schema.Properties["spec"]
	}
	lines := []string{fmt.Sprintf("config/crd/bases/%s_%s.yaml: its spec schema is %s", crd.Spec.Group, crd.Spec.Names.Plural, origin)}
	if ok {
		lines = append(lines, fmt.Sprintf("spec has %d top-level fields", len(spec.Properties)))
		var open []string
		openParts("spec", &spec, &open)
		if len(open) == 0 {
			lines = append(lines, "no open part: the apiserver checks every field")
		} else {
			lines = append(lines, fmt.Sprintf("open parts (%d), whose fields the apiserver keeps unchecked (the chart's values.schema.json, if any, still applies):", len(open)))
			for i, p := range open {
				if i == maxListed {
					lines = append(lines, fmt.Sprintf("  ... and %d more", len(open)-maxListed))
					break
				}
				lines = append(lines, "  "+p)
			}
		}
	}
	if c.Metadata.Annotations[crdgen.AnnotationReplicasPath] == "" {
		for _, name := range []string{"replicaCount", "replicas"} {
			switch c.Values[name].(type) {
			case float64, int, int64:
				lines = append(lines, fmt.Sprintf("values.yaml has %s: %s: .spec.%s in Chart.yaml would give the kind kubectl scale and a Desired column",
					name, crdgen.AnnotationReplicasPath, name))
			}
		}
	}
	r.add("CRD spec schema", lines...)
}

// openParts appends the paths under s whose content the apiserver does not check.
func openParts(path string, s *apiextv1.JSONSchemaProps, out *[]string) {
	if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
		*out = append(*out, path+" (x-kubernetes-preserve-unknown-fields)")
	}
	if s.XIntOrString || s.XEmbeddedResource {
		return
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p := s.Properties[name]
		openParts(path+"."+name, &p, out)
	}
	if s.Items != nil && s.Items.Schema != nil {
		openParts(path+"[]", s.Items.Schema, out)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		openParts(path+"{}", s.AdditionalProperties.Schema, out)
	}
}

// reviewRBAC lists the rules make manifests added to the manager's ClusterRole, and the
// cluster-scoped kinds the chart declares.
func (r *Report) reviewRBAC(c *chart.Chart, before, after []byte) {
	var lines []string
	for _, rule := range newRules(before, after) {
		lines = append(lines, fmt.Sprintf("apiGroups %q resources %v verbs %v", rule.APIGroups, rule.Resources, rule.Verbs))
	}
	if len(lines) == 0 {
		lines = append(lines, "no new rule")
	}
	kinds, err := chartpolicy.ClusterScopedKinds(c)
	switch {
	case err != nil:
		lines = append(lines, err.Error())
	case len(kinds) > 0:
		lines = append(lines, fmt.Sprintf("the chart declares the cluster-scoped kinds %v (%s): its editor role is not aggregated to edit",
			kinds, chartpolicy.ClusterScopedKindsAnnotation))
	default:
		lines = append(lines, "the chart declares no cluster-scoped kind ("+chartpolicy.ClusterScopedKindsAnnotation+
			"): the operator refuses any it renders")
	}
	r.add("The manager's new rights ("+managerRole+")", lines...)
}

// newRules are the rules of the ClusterRole after that were not in the one before.
func newRules(before, after []byte) []rbacv1.PolicyRule {
	var b, a rbacv1.ClusterRole
	if yaml.Unmarshal(before, &b) != nil || yaml.Unmarshal(after, &a) != nil {
		return nil
	}
	var out []rbacv1.PolicyRule
	for _, rule := range a.Rules {
		found := false
		for _, old := range b.Rules {
			found = found || reflect.DeepEqual(rule, old)
		}
		if !found {
			out = append(out, rule)
		}
	}
	return out
}

// reviewManifestsOutput passes on what make manifests said besides the files it wrote and
// the commands it ran: warnings, such as a cluster-scoped kind the chart renders undeclared.
func (r *Report) reviewManifestsOutput() {
	var lines []string
	for _, line := range strings.Split(r.ManifestsOutput, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "", strings.HasPrefix(trimmed, "wrote "), strings.HasPrefix(trimmed, "removed "),
			strings.HasPrefix(trimmed, "go run "), strings.HasPrefix(trimmed, "make"):
			continue
		}
		lines = append(lines, trimmed)
	}
	if len(lines) > 0 {
		r.add("What make manifests said", lines...)
	}
}

// dependencyLines describes the subcharts of c, as vendored.
func dependencyLines(c *chart.Chart, path string) []string {
	var lines []string
	for _, dep := range c.Metadata.Dependencies {
		line := fmt.Sprintf("%s → %s %s", path, dep.Name, dep.Version)
		if dep.Condition != "" {
			line += ", if " + dep.Condition
		}
		if dep.Alias != "" {
			line += ", as " + dep.Alias
		}
		lines = append(lines, line)
	}
	for _, d := range c.Dependencies() {
		kind := "application"
		if d.Metadata.Type == "library" {
			kind = "library"
		}
		lines = append(lines, fmt.Sprintf("  %s/charts/%s: %s %s chart", path, d.Name(), kind, d.Metadata.Version))
		lines = append(lines, dependencyLines(d, path+" → "+d.Name())...)
	}
	return lines
}

// Print writes the report for a person.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\nAdded kind %s: chart %s, copied to %s.\n", r.Kind, r.Chart, r.ChartDir)
	if len(r.Annotations) > 0 {
		fmt.Fprintf(w, "\n%s/Chart.yaml annotations set:\n", r.ChartDir)
		for _, a := range r.Annotations {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
	fmt.Fprintf(w, "\nFiles written by add-kind and make manifests (and %s/):\n", r.ChartDir)
	for _, f := range r.Written {
		fmt.Fprintf(w, "  %s\n", f)
	}
	fmt.Fprintln(w, "\nTo review before committing:")
	for _, t := range r.Review {
		fmt.Fprintf(w, "\n- %s\n", t.Title)
		for _, l := range t.Lines {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
	fmt.Fprintln(w, "\nThen run go test ./test/charts.")
}
