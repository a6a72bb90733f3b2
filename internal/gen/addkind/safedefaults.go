package addkind

import (
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/releaseutil"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// A cluster-scoped object is the administrator's decision: the operator refuses any a chart
// renders without declaring its kind (chartpolicy.ClusterScopedKindsAnnotation), and declaring
// one (a ClusterRole, say) lets every tenant who may create the kind's CRs have it made. Many
// public charts render some with their defaults, such as a ClusterRole for a sidecar that
// reads every namespace. Rather than a kind whose CRs all fail until someone edits the chart,
// add-kind gives such a chart a safe default: watches.yaml values (overrideValues, which the
// operator sets over every CR's spec) under which the chart renders none of them, found by
// turning the booleans of values.yaml one at a time; the report says what was turned off and
// how to offer it instead.

// The same holds of a Role or RoleBinding the chart does not declare
// (chartpolicy.RBACKindsAnnotation): through it the operator grants what it holds in the
// namespace to the subject the values name. Those are turned off as well, and a boolean a
// CR's spec could turn to render them is pinned to its default; a chart that renders them
// whatever its booleans is refused (refuseUndeclaredRBAC).

// safeDefault is what add-kind found of the undeclared cluster-scoped and RBAC objects a
// chart renders with its defaults, and the values that turn them off.
type safeDefault struct {
	// Undeclared are the objects, "Kind/name", rendered with values.yaml.
	Undeclared []string
	// Overrides are the values that turn them off, and those that keep them off against a
	// spec, for watches.yaml's overrideValues.
	Overrides map[string]string
	// Pinned are the values of Overrides set to their defaults: turned, each would render
	// undeclared RBAC objects.
	Pinned []string
	// Left are the undeclared objects still rendered with Overrides; LeftRBAC those of them
	// that are Roles or RoleBindings.
	Left, LeftRBAC []string
	// DeclaredRBAC are the RBAC kinds the chart declares, and RBAC the objects of them
	// rendered with Overrides.
	DeclaredRBAC []schema.GroupKind
	RBAC         []string
	// RBACTemplates say where the chart's templates can render RBAC kinds it does not declare
	// (whatever the values: chartpolicy.Objects), for the report.
	RBACTemplates []string
	// RenderErr is why the chart did not render with its defaults, if it did not.
	RenderErr error
}

// maxOverrides bounds how many values add-kind turns to reach a safe default.
const maxOverrides = 3

// safeOverrideKey matches the value paths add-kind may set: overrideValues are read as
// helm --set's key=value, where dots separate keys and other punctuation has a meaning.
var safeOverrideKey = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// findSafeDefault renders c with its defaults and, if it renders cluster-scoped or RBAC
// objects it does not declare, looks for boolean values whose opposite renders none: greedily,
// the turn that leaves the fewest undeclared objects, then removes the fewest other objects,
// then renders the most. Then, if the chart's templates can render RBAC kinds it does not
// declare, it pins each boolean whose opposite would render them.
func findSafeDefault(c *chart.Chart) safeDefault {
	var sd safeDefault
	declared, err := chartpolicy.ClusterScopedKinds(c)
	if err != nil {
		sd.RenderErr = err
		return sd
	}
	declaredRBAC, err := chartpolicy.RBACKinds(c)
	if err != nil {
		sd.RenderErr = err
		return sd
	}
	sd.DeclaredRBAC = declaredRBAC
	apis := chartpolicy.BuiltinAPIs()
	undeclaredRBAC := func(gk schema.GroupKind) bool {
		return chartpolicy.IsNamespacedRBAC(gk) && !slices.Contains(declaredRBAC, gk)
	}
	outcome := func(overrides map[string]string) (undeclared, others []string, err error) {
		objs, err := renderObjects(c, nil, overrides)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objs {
			if cluster, ok := apis.ClusterScoped(o.gk); ok && cluster && !slices.Contains(declared, o.gk) || undeclaredRBAC(o.gk) {
				undeclared = append(undeclared, o.key)
			} else {
				others = append(others, o.key)
			}
		}
		return undeclared, others, nil
	}

	undeclared, others, err := outcome(nil)
	if err != nil {
		sd.RenderErr = err
		return sd
	}
	sd.Undeclared, sd.Left = undeclared, undeclared
	bools := map[string]bool{}
	booleanValues("", c.Values, bools)
	overrides := map[string]string{}
	for len(sd.Left) > 0 && len(overrides) < maxOverrides {
		type turn struct {
			path             string
			left, all        []string
			removed, objects int
		}
		var best *turn
		for _, path := range slices.Sorted(maps.Keys(bools)) {
			if _, done := overrides[path]; done {
				continue
			}
			try := maps.Clone(overrides)
			try[path] = strconv.FormatBool(!bools[path])
			left, now, err := outcome(try)
			if err != nil || len(left) >= len(sd.Left) {
				continue
			}
			removed := 0
			for _, key := range others {
				if !slices.Contains(now, key) {
					removed++
				}
			}
			t := &turn{path: path, left: left, all: now, removed: removed, objects: len(now)}
			if best == nil || len(t.left) < len(best.left) ||
				len(t.left) == len(best.left) && (t.removed < best.removed || t.removed == best.removed && t.objects > best.objects) {
				best = t
			}
		}
		if best == nil {
			break
		}
		overrides[best.path] = strconv.FormatBool(!bools[best.path])
		sd.Left, others = best.left, best.all
	}

	sd.RBACTemplates = rbacTemplates(c, declaredRBAC)
	if len(sd.RBACTemplates) > 0 {
		// A spec sets any value overrideValues do not: pin each boolean a tenant could turn to
		// render a Role or RoleBinding (the chart's rbac.namespaced, say).
		for _, path := range slices.Sorted(maps.Keys(bools)) {
			if _, done := overrides[path]; done {
				continue
			}
			try := maps.Clone(overrides)
			try[path] = strconv.FormatBool(!bools[path])
			objs, err := renderObjects(c, nil, try)
			if err == nil && slices.ContainsFunc(objs, func(o renderedObject) bool { return undeclaredRBAC(o.gk) }) {
				overrides[path] = strconv.FormatBool(bools[path])
				sd.Pinned = append(sd.Pinned, path)
			}
		}
	}
	if len(overrides) > 0 {
		sd.Overrides = overrides
	}
	objs, err := renderObjects(c, nil, overrides)
	if err != nil {
		sd.RenderErr = err
		return sd
	}
	for _, o := range objs {
		switch {
		case undeclaredRBAC(o.gk):
			sd.LeftRBAC = append(sd.LeftRBAC, o.key)
		case chartpolicy.IsNamespacedRBAC(o.gk):
			sd.RBAC = append(sd.RBAC, o.key)
		}
	}
	return sd
}

// rbacTemplates says where the templates of c can render RBAC kinds it does not declare,
// whatever the values, but in helm test's hooks, which the operator never runs.
func rbacTemplates(c *chart.Chart, declared []schema.GroupKind) []string {
	objects, err := chartpolicy.Objects(c)
	if err != nil {
		return nil
	}
	var out []string
	for _, o := range objects {
		gk := o.GroupVersionKind().GroupKind()
		if o.APIVersion == "" { // a computed apiVersion: the kind's name decides
			gk.Group = rbacv1.GroupName
		}
		if o.HelmTestOnly() || !chartpolicy.IsNamespacedRBAC(gk) || slices.Contains(declared, gk) {
			continue
		}
		if where := gk.String() + " by " + o.Where(); !slices.Contains(out, where) {
			out = append(out, where)
		}
	}
	return out
}

// refuseUndeclaredRBAC is add-kind's refusal of a chart that renders Roles or RoleBindings
// it does not declare whatever its booleans, or nil.
func refuseUndeclaredRBAC(sd safeDefault, chartDir, kind string) error {
	if len(sd.LeftRBAC) == 0 {
		return nil
	}
	return fmt.Errorf("chart %s renders %s, RBAC it does not declare, and no boolean value of values.yaml turns them off: "+
		"through a Role or RoleBinding the operator grants any right it holds in the namespace (reading its Secrets, among them) "+
		"to the subjects the values name, so that whoever may create %s CRs could grant them to themselves.\n"+
		"If that is your decision (the kind's editor role then leaves edit, to be bound explicitly), declare them under "+
		"annotations: in %s:\n    %s: %s\nand run make add-kind again",
		chartDir, strings.Join(sd.LeftRBAC, ", "), kind, filepath.Join(chartDir, "Chart.yaml"),
		chartpolicy.RBACKindsAnnotation, kindList(chartpolicy.NamespacedRBACKinds))
}

// kindList writes kinds as an annotation lists them.
func kindList(kinds []schema.GroupKind) string {
	names := make([]string, len(kinds))
	for i, gk := range kinds {
		names[i] = gk.String()
	}
	return strings.Join(names, ",")
}

// booleanValues collects the boolean values of a values map by dotted path, outside lists.
func booleanValues(prefix string, values map[string]any, out map[string]bool) {
	for k, v := range values {
		path := prefix + k
		if !safeOverrideKey.MatchString(path) {
			continue
		}
		switch v := v.(type) {
		case bool:
			out[path] = v
		case map[string]any:
			booleanValues(path+".", v, out)
		}
	}
}

// renderedObject is an object of a rendering: its group and kind, and "Kind/name".
type renderedObject struct {
	gk  schema.GroupKind
	key string
}

// renderObjects renders c as renderManifest does and lists its objects.
func renderObjects(c *chart.Chart, spec map[string]any, overrides map[string]string) ([]renderedObject, error) {
	manifest, err := renderManifest(c, spec, overrides)
	if err != nil {
		return nil, err
	}
	manifests := []string{manifest}
	var out []renderedObject
	for _, m := range manifests {
		for _, doc := range releaseutil.SplitManifests(m) {
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
				continue
			}
			gv, err := schema.ParseGroupVersion(head.APIVersion)
			if err != nil {
				continue
			}
			out = append(out, renderedObject{gk: gv.WithKind(head.Kind).GroupKind(), key: head.Kind + "/" + head.Metadata.Name})
		}
	}
	slices.SortFunc(out, func(a, b renderedObject) int { return strings.Compare(a.key, b.key) })
	return out, nil
}

// setPath sets values at the path of keys, making the maps on the way.
func setPath(values map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := values[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			values[k] = next
		}
		values = next
	}
	values[keys[len(keys)-1]] = v
}

// reviewSafeDefault is the report's topics on the cluster-scoped and RBAC objects the chart's
// defaults render and its templates can render, if any.
func (r *Report) reviewSafeDefault(sd safeDefault, chartDir string) {
	if sd.RenderErr != nil {
		r.add("Cluster-scoped and RBAC objects of the chart's defaults", fmt.Sprintf("not checked: the chart does not render with its defaults alone: %v", sd.RenderErr))
		return
	}
	var set []string
	for _, k := range slices.Sorted(maps.Keys(sd.Overrides)) {
		set = append(set, k+"="+sd.Overrides[k])
	}
	if len(sd.Undeclared) > 0 {
		lines := []string{fmt.Sprintf("with its defaults the chart renders %s, which it does not declare (cluster-scoped kinds in %s, "+
			"Roles and RoleBindings in %s): the operator may not create them, so every CR of the kind would fail",
			strings.Join(sd.Undeclared, ", "), chartpolicy.ClusterScopedKindsAnnotation, chartpolicy.RBACKindsAnnotation)}
		if len(sd.Overrides) > 0 {
			lines = append(lines, fmt.Sprintf("safe default: watches.yaml sets overrideValues %s over every CR's spec", strings.Join(set, ", ")))
		}
		if len(sd.Left) > 0 {
			lines = append(lines, fmt.Sprintf("no boolean value of values.yaml turns off %s: set overrideValues in watches.yaml "+
				"that do, or declare the kinds; until then go test ./test/charts fails", strings.Join(sd.Left, ", ")))
		} else {
			lines = append(lines, "under it the chart renders no cluster-scoped or RBAC object it does not declare")
		}
		lines = append(lines, fmt.Sprintf("to offer the cluster-scoped objects instead (the administrator's decision: a ClusterRole's rules hold in every namespace, "+
			"and any tenant who may create the kind's CRs gets them), declare their kinds in %s/Chart.yaml's %s and remove the override",
			chartDir, chartpolicy.ClusterScopedKindsAnnotation))
		r.add("Cluster-scoped and RBAC objects of the chart's defaults: an administrator's decision", lines...)
	}
	if len(sd.RBACTemplates) > 0 {
		lines := []string{"the chart's templates can render, with some values, " + strings.Join(sd.RBACTemplates, "; ")}
		if len(sd.Pinned) > 0 {
			lines = append(lines, fmt.Sprintf("watches.yaml pins %s to the defaults in overrideValues: a spec that turned them would render them",
				strings.Join(sd.Pinned, ", ")))
		}
		lines = append(lines, "with values that render them, the manager role has no rule on them (make manifests), "+
			"so the apiserver refuses them unless another kind's chart declares them",
			fmt.Sprintf("to offer them (the administrator's decision: through them the operator grants any right it holds in the namespace, "+
				"reading its Secrets among them, to the subjects the values name), declare them in %s/Chart.yaml's %s and remove the overrides: "+
				"the kind's editor role then leaves edit, to be bound explicitly", chartDir, chartpolicy.RBACKindsAnnotation))
		r.add("Roles and RoleBindings the chart does not declare", lines...)
	}
	if len(sd.DeclaredRBAC) > 0 {
		lines := []string{fmt.Sprintf("the chart declares the RBAC kinds %v (%s): the manager role gets Helm's verbs on them, never bind or escalate, "+
			"and through them the operator grants any right it holds in the namespace, reading its Secrets among them, to the subjects the values name; "+
			"so its editor role is not aggregated to edit: bind it to those who may have that", sd.DeclaredRBAC, chartpolicy.RBACKindsAnnotation)}
		if len(sd.RBAC) > 0 {
			lines = append(lines, "with its defaults it renders "+strings.Join(sd.RBAC, ", "))
		}
		r.add("Roles and RoleBindings the chart declares: an administrator's decision", lines...)
	}
}
