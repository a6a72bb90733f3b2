package kindgen

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// userRoles writes per kind an editor and a viewer ClusterRole, for users of the CRDs.
// Viewers aggregate to "view"; editors aggregate to "edit" only when the kind's chart declares
// neither cluster-scoped nor RBAC kinds (see Kind.AggregatesToEdit).
func (g *generator) userRoles() error {
	for _, k := range g.kinds {
		var b strings.Builder
		b.WriteString(Header)
		if k.AggregatesToEdit() {
			fmt.Fprintf(&b, `# Lets its subjects create, change and delete %s. Aggregated to the built-in
# "edit" ClusterRole (and so to "admin"): everything the %s chart renders
# is namespaced and already within what "edit" may create itself.
`, k.pluralKind(), k.GVK.Kind)
		} else {
			fmt.Fprintf(&b, `# Lets its subjects create, change and delete %[1]s.
#
# Deliberately NOT aggregated to the built-in "edit" (nor "admin") ClusterRole: a
# %[2]s makes the operator create %[3]s, which a namespace
# editor could not create directly.%[4]s Creating %[1]s is therefore a cluster-admin-level
# right: bind this role explicitly (ClusterRoleBinding, or RoleBinding for one
# namespace) to the people who may create %[1]s.
`, k.pluralKind(), k.GVK.Kind, notEditProse(k), rbacRisk(k))
		}
		writeUserRole(&b, k, "editor", k.AggregatesToEdit(), "aggregate-to-edit",
			[]string{"create", "delete", "get", "list", "patch", "update", "watch"})
		g.add(RBACDir+"/"+k.Lower()+"_editor_role.yaml", []byte(b.String()))

		b.Reset()
		b.WriteString(Header)
		fmt.Fprintf(&b, `# Read-only access to %s, aggregated to the built-in "view" ClusterRole (and so
# to "edit" and "admin").
`, k.pluralKind())
		writeUserRole(&b, k, "viewer", true, "aggregate-to-view", []string{"get", "list", "watch"})
		g.add(RBACDir+"/"+k.Lower()+"_viewer_role.yaml", []byte(b.String()))
	}
	return nil
}

// notEditProse names what a kind's CR makes the operator create that "edit" may not.
func notEditProse(k Kind) string {
	var parts []string
	if len(k.ClusterScoped) > 0 {
		parts = append(parts, clusterScopedProse(k))
	}
	if len(k.RBAC) > 0 {
		parts = append(parts, rbacProse(k))
	}
	return strings.Join(parts, " and ")
}

// rbacProse names the namespaced RBAC kinds a kind's chart declares, in the plural.
func rbacProse(k Kind) string {
	names := make([]string, len(k.RBAC))
	for i, gk := range k.RBAC {
		names[i] = gk.Kind + "s"
	}
	return strings.Join(names, " and ")
}

// rbacRisk says, when a kind's chart declares RBAC kinds, what their creators could gain.
func rbacRisk(k Kind) string {
	if len(k.RBAC) == 0 {
		return ""
	}
	return `
# Through them the operator grants any right it holds in the namespace (reading its
# Secrets, among them) to the subjects the chart's values name.
#`
}

func clusterScopedProse(k Kind) string {
	names := make([]string, len(k.ClusterScoped))
	for i, gk := range k.ClusterScoped {
		names[i] = gk.Kind
	}
	if len(names) == 1 {
		return "a cluster-scoped " + names[0]
	}
	return "cluster-scoped objects (" + strings.Join(names, ", ") + ")"
}

func writeUserRole(b *strings.Builder, k Kind, role string, aggregate bool, label string, verbs []string) {
	fmt.Fprintf(b, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: %s-%s-role
  labels:
    app.kubernetes.io/name: warpdrive-operator
    app.kubernetes.io/managed-by: kustomize
`, k.Lower(), role)
	if aggregate {
		fmt.Fprintf(b, "    rbac.authorization.k8s.io/%s: \"true\"\n", label)
	}
	b.WriteString("rules:\n")
	writeRule(b, k.GVK.Group, k.Plural, verbs)
	writeRule(b, k.GVK.Group, k.Plural+"/status", []string{"get"})
}

func writeRule(b *strings.Builder, group, resource string, verbs []string) {
	if group == "" {
		group = `""` // the core group
	}
	fmt.Fprintf(b, "- apiGroups:\n  - %s\n  resources:\n  - %s\n  verbs:\n", group, resource)
	for _, v := range verbs {
		fmt.Fprintf(b, "  - %s\n", v)
	}
}

// rbacKustomization lists the users' roles in config/rbac/kustomization.yaml.
func (g *generator) rbacKustomization() error {
	var b strings.Builder
	b.WriteString("# For users of the CRDs, not for the operator: per kind an editor and a viewer role.\n")
	var kinds, files []string
	for _, k := range g.kinds {
		if !k.AggregatesToEdit() {
			kinds = append(kinds, k.GVK.Kind)
			files = append(files, k.Lower()+"_editor_role.yaml")
		}
	}
	switch len(kinds) {
	case 0:
		b.WriteString("# Viewers aggregate to \"view\"; editors aggregate to \"edit\".\n")
	case 1:
		fmt.Fprintf(&b, "# Viewers aggregate to \"view\"; editors aggregate to \"edit\", except the %s\n"+
			"# editor, which must be bound explicitly (see %s).\n", kinds[0], files[0])
	default:
		fmt.Fprintf(&b, "# Viewers aggregate to \"view\"; editors aggregate to \"edit\", except the %s\n"+
			"# editors, which must be bound explicitly (see %s).\n", strings.Join(kinds, ", "), strings.Join(files, ", "))
	}
	for _, k := range g.kinds {
		fmt.Fprintf(&b, "- %s_editor_role.yaml\n- %s_viewer_role.yaml\n", k.Lower(), k.Lower())
	}
	return g.splice(RBACKustomization, "", b.String())
}

// The verbs the helm-operator needs on a kind's custom resources, by subresource: it watches
// the CRs and adds and removes its uninstall finalizer (update), both containers write the
// status (ours patch it, the stock helm-operator updates it), and update on finalizers lets
// it set owner references that block the CR's deletion.
var crVerbs = []struct {
	subresource string
	verbs       []string
}{
	{"", []string{"get", "list", "watch", "update"}},
	{"/status", []string{"patch", "update"}},
	{"/finalizers", []string{"update"}},
}

// verbOrder is the order of verbs in the manager role's rules on the custom resources.
var verbOrder = map[string]int{"get": 1, "list": 2, "watch": 3, "create": 4, "patch": 5, "update": 6, "delete": 7}

func sortVerbs(verbs []string) {
	rank := func(v string) int {
		if r, ok := verbOrder[v]; ok {
			return r
		}
		return len(verbOrder) + 1
	}
	sort.Slice(verbs, func(i, j int) bool {
		if a, b := rank(verbs[i]), rank(verbs[j]); a != b {
			return a < b
		}
		return verbs[i] < verbs[j]
	})
}

// managerRole writes the manager role's rules on each kind's custom resources (the
// helm-operator's needs, crVerbs, and whatever the +kubebuilder:rbac markers of the code add
// on those resources), then the rules on the objects the charts can render (renderedRules).
func (g *generator) managerRole() error {
	var b strings.Builder
	for _, k := range g.kinds {
		verbs := map[string]map[string]bool{}
		var resources []string
		addVerb := func(res, v string) {
			if verbs[res] == nil {
				verbs[res] = map[string]bool{}
				resources = append(resources, res)
			}
			verbs[res][v] = true
		}
		for _, cv := range crVerbs {
			for _, v := range cv.verbs {
				addVerb(k.Plural+cv.subresource, v)
			}
		}
		// What the markers add, by resource, for the comment.
		extra := map[string][]string{}
		var extraRes []string
		dirs := map[string]bool{}
		var other []string // subresources only markers name, sorted after the others
		for _, m := range g.markers {
			if m.Group != k.GVK.Group || (m.Resource != k.Plural && !strings.HasPrefix(m.Resource, k.Plural+"/")) {
				continue
			}
			if verbs[m.Resource][m.Verb] {
				continue
			}
			if verbs[m.Resource] == nil {
				other = append(other, m.Resource)
			}
			if extra[m.Resource] == nil {
				extraRes = append(extraRes, m.Resource)
			}
			extra[m.Resource] = append(extra[m.Resource], m.Verb)
			dirs[m.Dir] = true
			addVerb(m.Resource, m.Verb)
		}
		sort.Strings(other)
		resources = append(resources[:len(crVerbs)], other...)

		fmt.Fprintf(&b, `# %s: the helm-operator watches the CRs and adds and removes its uninstall finalizer
# (update; it never patches them); both containers write .status (the sidecar and our
# helm-operator patch it, the stock helm-operator updates it); update on %s/finalizers
# lets it set blockOwnerDeletion owner references to a CR (on its release Secrets and
# rendered objects) where the OwnerReferencesPermissionEnforcement admission plugin is on.
`, k.GVK.Kind, k.Plural)
		if len(extra) > 0 {
			var parts []string
			sort.Strings(extraRes)
			for _, res := range extraRes {
				vs := extra[res]
				sortVerbs(vs)
				parts = append(parts, strings.Join(vs, ", ")+" on "+res)
			}
			var ds []string
			for d := range dirs {
				ds = append(ds, d)
			}
			sort.Strings(ds)
			fmt.Fprintf(&b, "# The +kubebuilder:rbac markers in %s also ask for %s.\n",
				strings.Join(ds, " and "), strings.Join(parts, "; "))
		}
		for _, res := range resources {
			var vs []string
			for v := range verbs[res] {
				vs = append(vs, v)
			}
			sortVerbs(vs)
			writeRule(&b, k.GVK.Group, res, vs)
		}
	}
	crdRules(&b, g.kinds, g.markers)
	rules, notes, warnings := renderedRules(g.kinds, g.apis, g.chartPath)
	writeRenderedRules(&b, rules, notes)
	for _, w := range warnings {
		g.warn(w)
	}
	return g.splice(ManagerRole, "", b.String())
}

// chartPath is the kind's chart relative to the root, slash-separated.
func (g *generator) chartPath(k Kind) string {
	if rel, err := filepath.Rel(g.root, k.ChartDir); err == nil {
		return filepath.ToSlash(rel)
	}
	return k.ChartDir
}
