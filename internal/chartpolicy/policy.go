// Package chartpolicy reads what a chart declares it may do with the operator's rights, beyond
// rendering namespaced objects into its release's namespace: which cluster-scoped kinds it
// renders, whether it has Helm hooks, which template functions that reach beyond its values
// it calls, and which namespaced RBAC kinds it renders. The operator enforces the first two
// on every release operation (see internal/operator's confinement), whatever a release record
// says, so a record forged or replayed by a namespace editor can reach nothing the chart
// itself could not; the chart tests (test/charts) hold every chart to the third; make
// manifests grants the manager the RBAC kinds of the charts that declare them only, and keeps
// those charts' editor roles out of "edit".
//
// It also reads which objects a chart can render whatever its values (Objects, from its
// templates), and which kinds a cluster serves and their scope (APIs, from client-go's typed
// clients): make manifests (internal/gen/kindgen) derives the operator's RBAC from both.
package chartpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ClusterScopedKindsAnnotation lists, in a chart's Chart.yaml, the cluster-scoped kinds its
// templates render, comma-separated as Kind.group ("StorageClass.storage.k8s.io"; a kind of
// the core group has no group part). A chart that renders none leaves it out.
const ClusterScopedKindsAnnotation = "warpdrive.transwarp.io/cluster-scoped-kinds"

// RBACKindsAnnotation lists, in a chart's Chart.yaml, the namespaced RBAC kinds its templates
// render (NamespacedRBACKinds), comma-separated as Kind.group
// ("Role.rbac.authorization.k8s.io,RoleBinding.rbac.authorization.k8s.io"). A chart that
// renders none leaves it out. It is the administrator's decision, as a cluster-scoped kind
// is: the apiserver lets the operator grant any right it holds in the namespace (reading its
// Secrets, among them), and a chart's values commonly choose both a Role's rules and the
// ServiceAccount a RoleBinding names, so whoever may create the kind's CRs could grant
// themselves what the operator holds. ClusterRoles and ClusterRoleBindings are cluster-scoped:
// ClusterScopedKindsAnnotation declares them.
const RBACKindsAnnotation = "warpdrive.transwarp.io/rbac-kinds"

// NamespacedRBACKinds are the kinds RBACKindsAnnotation may declare: the namespaced kinds of
// the RBAC API, whose objects grant rights in a namespace.
var NamespacedRBACKinds = []schema.GroupKind{
	{Group: rbacv1.GroupName, Kind: "Role"},
	{Group: rbacv1.GroupName, Kind: "RoleBinding"},
}

// IsNamespacedRBAC tells whether gk is one of NamespacedRBACKinds.
func IsNamespacedRBAC(gk schema.GroupKind) bool { return slices.Contains(NamespacedRBACKinds, gk) }

// TemplateFunctionsAnnotation lists, in a chart's Chart.yaml, the functions of
// GuardedFunctions its templates or its subcharts' call, comma-separated and sorted
// ("lookup,tpl"). make add-kind writes it; the chart tests hold every chart to it, so that a
// chart which starts to call one of them says so where a reviewer sees it.
const TemplateFunctionsAnnotation = "warpdrive.transwarp.io/template-functions"

// GuardedFunctions are the Helm template functions that reach beyond the values and the
// chart: lookup reads the cluster with the operator's rights, and tpl evaluates a string as a
// template, so that a value a namespace editor wrote in a spec can itself call lookup.
var GuardedFunctions = []string{"lookup", "tpl"}

// hookAnnotation marks a template as a Helm hook.
const hookAnnotation = "helm.sh/hook"

// ClusterScopedKinds returns the cluster-scoped kinds c declares (ClusterScopedKindsAnnotation).
func ClusterScopedKinds(c *chart.Chart) ([]schema.GroupKind, error) {
	return declaredKinds(c, ClusterScopedKindsAnnotation)
}

// RBACKinds returns the namespaced RBAC kinds c declares (RBACKindsAnnotation); it fails on a
// kind that is not one of NamespacedRBACKinds.
func RBACKinds(c *chart.Chart) ([]schema.GroupKind, error) {
	kinds, err := declaredKinds(c, RBACKindsAnnotation)
	if err != nil {
		return nil, err
	}
	for _, gk := range kinds {
		if !IsNamespacedRBAC(gk) {
			return nil, fmt.Errorf("chart %s: %s: %s is not Role.%s or RoleBinding.%s (cluster-scoped kinds are declared in %s)",
				c.Name(), RBACKindsAnnotation, gk, rbacv1.GroupName, rbacv1.GroupName, ClusterScopedKindsAnnotation)
		}
	}
	return kinds, nil
}

// declaredKinds reads the kinds an annotation of c lists as Kind.group, sorted.
func declaredKinds(c *chart.Chart, annotation string) ([]schema.GroupKind, error) {
	if c == nil || c.Metadata == nil {
		return nil, nil
	}
	v := strings.TrimSpace(c.Metadata.Annotations[annotation])
	if v == "" {
		return nil, nil
	}
	var kinds []schema.GroupKind
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		gk := schema.ParseGroupKind(s)
		if gk.Kind == "" || strings.ContainsAny(gk.Kind, " /") {
			return nil, fmt.Errorf("chart %s: %s: %q is not Kind.group", c.Name(), annotation, s)
		}
		kinds = append(kinds, gk)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	return slices.Compact(kinds), nil
}

// TemplateFunctions returns the functions of GuardedFunctions that c declares its templates
// call (TemplateFunctionsAnnotation), sorted; it fails on a name that is not one of them.
func TemplateFunctions(c *chart.Chart) ([]string, error) {
	if c == nil || c.Metadata == nil {
		return nil, nil
	}
	var funcs []string
	for _, f := range strings.Split(c.Metadata.Annotations[TemplateFunctionsAnnotation], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(GuardedFunctions, f) {
			return nil, fmt.Errorf("chart %s: %s: %q is not one of %s",
				c.Name(), TemplateFunctionsAnnotation, f, strings.Join(GuardedFunctions, ", "))
		}
		funcs = append(funcs, f)
	}
	sort.Strings(funcs)
	return slices.Compact(funcs), nil
}

// HasHooks reports whether any template of c (or of its dependencies) is a Helm hook. The
// operator runs hooks only for such charts: a release record's hooks are otherwise refused
// whatever the record says, since only the chart the operator ships is trusted.
func HasHooks(c *chart.Chart) bool {
	if c == nil {
		return false
	}
	for _, t := range c.Templates {
		if strings.Contains(string(t.Data), hookAnnotation) {
			return true
		}
	}
	for _, d := range c.Dependencies() {
		if HasHooks(d) {
			return true
		}
	}
	return false
}

// crdKind is the kind of a CustomResourceDefinition.
var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// InstallsCRDs reports whether c (or one of its dependencies) installs
// CustomResourceDefinitions: from its crds/ directories, or from templates, which must then
// declare the kind among clusterKinds (ClusterScopedKinds). Its templates may ask
// .Capabilities for an API its own release has just added.
func InstallsCRDs(c *chart.Chart, clusterKinds []schema.GroupKind) bool {
	return c != nil && (len(c.CRDObjects()) > 0 || slices.Contains(clusterKinds, crdKind))
}
