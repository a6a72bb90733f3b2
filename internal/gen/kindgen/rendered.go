package kindgen

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// HelmVerbs are what the operator does with an object a chart renders: Helm reads it before
// an install (it refuses to adopt an object of another release), creates it, patches it on
// upgrade (updates it with the upgrade-force annotation), deletes it, and watches a hook until
// it completes; the helm-operator watches every kind of a release to repair drift; the orphan
// sweep lists and deletes the cluster-scoped objects of a deleted CR.
var HelmVerbs = []string{"get", "list", "watch", "create", "patch", "update", "delete"}

// servedAPIs are the kinds the cluster serves: the built-in ones, the watched kinds' and the
// CustomResourceDefinitions of dirs (relative to root).
func servedAPIs(root string, dirs []string, kinds []Kind) (*chartpolicy.APIs, error) {
	apis := chartpolicy.BuiltinAPIs()
	for _, k := range kinds {
		apis.AddCRD(k.CRD)
	}
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return filepath.SkipDir
				}
				return err
			}
			if d.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
				return nil
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var crd apiextv1.CustomResourceDefinition
			if err := yaml.Unmarshal(data, &crd); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				apis.AddCRD(&crd)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return apis, nil
}

// A renderedRule is the manager role's rule on one resource that charts render.
type renderedRule struct {
	resource schema.GroupResource
	kind     string
	cluster  bool
	rbac     bool // a Role or RoleBinding, which some chart declares
	// by lists, per CR kind, the files of its chart that render the resource.
	by map[string][]string
}

// renderedRules derives the rules on the objects the kinds' charts can render: one per
// resource of every object of a served kind, but of the cluster-scoped and RBAC kinds a chart
// does not declare. notes say what gets no rule and why; warnings are for the administrator.
func renderedRules(kinds []Kind, apis *chartpolicy.APIs, chartPath func(Kind) string) (rules []*renderedRule, notes, warnings []string) {
	byResource := map[schema.GroupResource]*renderedRule{}
	noted := map[string]bool{}
	note := func(s string) {
		if !noted[s] {
			noted[s] = true
			notes = append(notes, s)
		}
	}
	for _, k := range kinds {
		undeclared := map[schema.GroupKind][]string{}
		undeclaredRBAC := map[schema.GroupKind][]string{}
		rendered := map[schema.GroupKind]bool{}
		for _, o := range k.Objects {
			where := k.GVK.Kind + ": " + o.File
			switch {
			case o.HelmTestOnly():
				note(fmt.Sprintf("%s, a helm test hook, which the helm-operator never runs (%s).", o.Kind, where))
				continue
			case o.Kind == "":
				note(fmt.Sprintf("the kind %s computes from the values (%s).", o.Expr, where))
				warnings = append(warnings, fmt.Sprintf("chart %s: %s computes the kind %s from the values: no rule "+
					"is generated for it, so the operator may create it only if the kind the values give is "+
					"granted for another object", chartPath(k), o.Where(), o.Expr))
				continue
			}
			mappings, err := apis.Resolve(o)
			if err != nil {
				note(fmt.Sprintf("%s: %v (%s).", o.Kind, err, where))
			}
			for _, m := range mappings {
				gk := m.GroupVersionKind.GroupKind()
				rendered[gk] = true
				cluster := m.Scope.Name() == meta.RESTScopeNameRoot
				if cluster && !slices.Contains(k.ClusterScoped, gk) {
					undeclared[gk] = append(undeclared[gk], o.Where())
					note(fmt.Sprintf("%s, cluster-scoped and not declared in the chart's %s (%s).",
						kindPhrase(gk), chartpolicy.ClusterScopedKindsAnnotation, where))
					continue
				}
				rbac := !cluster && chartpolicy.IsNamespacedRBAC(gk)
				if rbac && !slices.Contains(k.RBAC, gk) {
					undeclaredRBAC[gk] = append(undeclaredRBAC[gk], o.Where())
					note(fmt.Sprintf("%s, RBAC and not declared in the chart's %s (%s).",
						kindPhrase(gk), chartpolicy.RBACKindsAnnotation, where))
					continue
				}
				gr := m.Resource.GroupResource()
				r := byResource[gr]
				if r == nil {
					r = &renderedRule{resource: gr, kind: gk.Kind, cluster: cluster, rbac: rbac, by: map[string][]string{}}
					byResource[gr] = r
					rules = append(rules, r)
				}
				if !slices.Contains(r.by[k.GVK.Kind], o.File) {
					r.by[k.GVK.Kind] = append(r.by[k.GVK.Kind], o.File)
				}
			}
		}
		warnings = append(warnings, undeclaredWarning(k, chartPath(k), undeclared, clusterDeclaration)...)
		warnings = append(warnings, undeclaredWarning(k, chartPath(k), undeclaredRBAC, rbacDeclaration)...)
		for _, gk := range k.ClusterScoped {
			if !rendered[gk] {
				warnings = append(warnings, fmt.Sprintf("chart %s declares the cluster-scoped %s in %s, but no template "+
					"of it renders a served kind of that name: a stale declaration?", chartPath(k), gk,
					chartpolicy.ClusterScopedKindsAnnotation))
			}
		}
		for _, gk := range k.RBAC {
			if !rendered[gk] {
				warnings = append(warnings, fmt.Sprintf("chart %s declares %s in %s, but no template of it renders one: "+
					"a stale declaration?", chartPath(k), gk, chartpolicy.RBACKindsAnnotation))
			}
		}
	}
	sort.Slice(rules, func(i, j int) bool {
		a, b := rules[i].resource, rules[j].resource
		return a.Group < b.Group || (a.Group == b.Group && a.Resource < b.Resource)
	})
	return rules, notes, warnings
}

// A declaration is one of the annotations by which a chart declares kinds that are the
// administrator's decision, with what undeclaredWarning says of them.
type declaration struct {
	annotation string
	declared   func(Kind) []schema.GroupKind
	// what the chart renders undeclared, what becomes of it, and why declaring it is a
	// decision.
	what, refused, why string
}

var (
	clusterDeclaration = declaration{annotation: chartpolicy.ClusterScopedKindsAnnotation,
		declared: func(k Kind) []schema.GroupKind { return k.ClusterScoped },
		what:     "cluster-scoped kinds", refused: "the manager role gets no rule for them and the operator refuses them",
		why: "which makes creating one a cluster-admin-level right"}
	rbacDeclaration = declaration{annotation: chartpolicy.RBACKindsAnnotation,
		declared: func(k Kind) []schema.GroupKind { return k.RBAC },
		what:     "Roles or RoleBindings",
		// The operator's confinement refuses undeclared cluster-scoped kinds only: the
		// apiserver refuses these for want of a rule, unless another kind's chart declares them.
		refused: "the manager role gets no rule for them, so the apiserver refuses them unless another chart declares them",
		why: "through which the operator grants any right it holds in the namespace, reading its Secrets among them, " +
			"to the subjects the values name: its editor role then leaves edit, to be bound explicitly"}
)

// undeclaredWarning tells the administrator which kinds a chart can render without declaring
// them (by d's annotation), where, and the annotation that would declare them.
func undeclaredWarning(k Kind, chartPath string, undeclared map[schema.GroupKind][]string, d declaration) []string {
	if len(undeclared) == 0 {
		return nil
	}
	all := slices.Clone(d.declared(k))
	var gks []schema.GroupKind
	for gk := range undeclared {
		gks = append(gks, gk)
	}
	sort.Slice(gks, func(i, j int) bool { return gks[i].String() < gks[j].String() })
	all = append(all, gks...)
	names := make([]string, len(all))
	for i, gk := range all {
		names[i] = gk.String()
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "chart %s (kind %s) can render %s its Chart.yaml does not declare; %s:\n",
		chartPath, k.GVK.Kind, d.what, d.refused)
	for _, gk := range gks {
		fmt.Fprintf(&b, "  %s, by %s\n", gk, strings.Join(undeclared[gk], "; "))
	}
	fmt.Fprintf(&b, "  If %s CRs may create them (%s), declare them "+
		"under annotations: in %s/Chart.yaml:\n    %s: %s", k.GVK.Kind, d.why, chartPath,
		d.annotation, strings.Join(names, ","))
	return []string{b.String()}
}

// kindPhrase names a kind with its group, "ConfigMap (core)".
func kindPhrase(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind + " (core)"
	}
	return gk.Kind + " (" + gk.Group + ")"
}

// writeRenderedRules writes the rules on rendered objects, each with a comment that says which
// charts render it, and the notes on what gets no rule.
func writeRenderedRules(b *strings.Builder, rules []*renderedRule, notes []string) {
	writeComment(b, "Objects the charts can render: every template of each chart and of its subcharts, "+
		"whatever the values (internal/chartpolicy.Objects), of the kinds the cluster serves "+
		"(internal/chartpolicy.APIs, and the CRDs of "+ExternalCRDs+"). Cluster-scoped kinds only where the "+
		"chart declares them in Chart.yaml ("+chartpolicy.ClusterScopedKindsAnnotation+"), Roles and RoleBindings "+
		"only where it declares them ("+chartpolicy.RBACKindsAnnotation+"); never bind or escalate. "+
		"Helm reads each object before it installs (to refuse adopting one of another release), creates it, "+
		"patches it on upgrade (updates it with the upgrade-force annotation), deletes it, and watches a hook "+
		"until it completes; the helm-operator watches them to repair drift; the orphan sweep lists and "+
		"deletes a deleted CR's cluster-scoped objects.")
	for _, r := range rules {
		var by []string
		crKinds := make([]string, 0, len(r.by))
		for kind := range r.by {
			crKinds = append(crKinds, kind)
		}
		sort.Strings(crKinds)
		for _, kind := range crKinds {
			files := slices.Sorted(slices.Values(r.by[kind]))
			by = append(by, kind+" ("+strings.Join(files, ", ")+")")
		}
		text := fmt.Sprintf("%s, rendered by %s.", kindPhrase(schema.GroupKind{Group: r.resource.Group, Kind: r.kind}),
			strings.Join(by, ", "))
		switch {
		case r.cluster:
			text = fmt.Sprintf("%s, cluster-scoped, declared by the chart of %s: creating those CRs is a "+
				"cluster-admin-level right (their editor roles are not aggregated to edit).", text[:len(text)-1],
				strings.Join(crKinds, ", "))
		case r.rbac:
			text = fmt.Sprintf("%s, declared by the chart of %s (%s): with Helm's verbs, never bind or escalate, "+
				"the operator grants through them only rights it holds itself, but to the subjects the values name; "+
				"creating those CRs is a right to bind explicitly (their editor roles are not aggregated to edit).",
				text[:len(text)-1], strings.Join(crKinds, ", "), chartpolicy.RBACKindsAnnotation)
		}
		writeComment(b, text)
		writeRule(b, r.resource.Group, r.resource.Resource, HelmVerbs)
	}
	for _, n := range notes {
		writeComment(b, "No rule: "+n)
	}
}

// writeComment writes text as comment lines of at most 96 characters.
func writeComment(b *strings.Builder, text string) {
	line := "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 96 && line != "#" {
			b.WriteString(line + "\n")
			line = "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}
