package addkind

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
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

// safeDefault is what add-kind found of the undeclared cluster-scoped objects a chart
// renders with its defaults, and the values that turn them off.
type safeDefault struct {
	// Undeclared are the objects, "Kind/name", rendered with values.yaml.
	Undeclared []string
	// Overrides are the values that turn them off, for watches.yaml's overrideValues.
	Overrides map[string]string
	// Left are the undeclared objects still rendered with Overrides.
	Left []string
	// RBAC are the namespaced RBAC objects rendered with Overrides.
	RBAC []string
	// RenderErr is why the chart did not render with its defaults, if it did not.
	RenderErr error
}

// maxOverrides bounds how many values add-kind turns to reach a safe default.
const maxOverrides = 3

// safeOverrideKey matches the value paths add-kind may set: overrideValues are read as
// helm --set's key=value, where dots separate keys and other punctuation has a meaning.
var safeOverrideKey = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

// renderNamespace and renderRelease stand in for a CR's namespace and name.
const (
	renderNamespace = "default"
	renderRelease   = "release"
)

// findSafeDefault renders c with its defaults and, if it renders cluster-scoped objects it
// does not declare, looks for boolean values whose opposite renders none: greedily, the turn
// that leaves the fewest undeclared objects, then removes the fewest other objects, then
// renders the most (rbac.namespaced, a Role instead of a ClusterRole, over rbac.create).
func findSafeDefault(c *chart.Chart) safeDefault {
	var sd safeDefault
	declared, err := chartpolicy.ClusterScopedKinds(c)
	if err != nil {
		sd.RenderErr = err
		return sd
	}
	apis := chartpolicy.BuiltinAPIs()
	outcome := func(overrides map[string]string) (undeclared, others []string, err error) {
		objs, err := renderObjects(c, overrides)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objs {
			if cluster, ok := apis.ClusterScoped(o.gk); ok && cluster && !slices.Contains(declared, o.gk) {
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
	if len(undeclared) == 0 {
		return sd
	}
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
	if len(overrides) > 0 {
		sd.Overrides = overrides
	}
	for _, key := range others {
		if strings.HasPrefix(key, "Role/") || strings.HasPrefix(key, "RoleBinding/") {
			sd.RBAC = append(sd.RBAC, key)
		}
	}
	return sd
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

// renderObjects renders c as the operator installs a release of a CR whose spec is empty,
// with overrides set as watches.yaml's overrideValues are, and lists its objects, hooks but
// helm test's included.
func renderObjects(c *chart.Chart, overrides map[string]string) ([]renderedObject, error) {
	values := map[string]any{}
	for _, path := range slices.Sorted(maps.Keys(overrides)) {
		setPath(values, strings.Split(path, "."), overrides[path] == "true")
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.ClientOnly = true
	inst.ReleaseName = renderRelease
	inst.Namespace = renderNamespace
	inst.KubeVersion = &chartutil.KubeVersion{Version: fmt.Sprintf("v1.%d.0", chartpolicy.KubernetesMinor),
		Major: "1", Minor: strconv.Itoa(chartpolicy.KubernetesMinor)}
	rel, err := inst.Run(c, values)
	if err != nil {
		return nil, err
	}
	manifests := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		if !slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return e != release.HookTest }) {
			continue // helm test's, which the operator never runs
		}
		manifests = append(manifests, h.Manifest)
	}
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

// reviewSafeDefault is the report's topic on the cluster-scoped objects the chart's defaults
// render, if any.
func (r *Report) reviewSafeDefault(sd safeDefault, chartDir string) {
	if sd.RenderErr != nil {
		r.add("Cluster-scoped objects of the chart's defaults", fmt.Sprintf("not checked: the chart does not render with its defaults alone: %v", sd.RenderErr))
		return
	}
	if len(sd.Undeclared) == 0 {
		return
	}
	lines := []string{fmt.Sprintf("with its defaults the chart renders %s, cluster-scoped and not declared (%s): "+
		"the operator would refuse every CR of the kind", strings.Join(sd.Undeclared, ", "), chartpolicy.ClusterScopedKindsAnnotation)}
	if len(sd.Overrides) > 0 {
		var set []string
		for _, k := range slices.Sorted(maps.Keys(sd.Overrides)) {
			set = append(set, k+"="+sd.Overrides[k])
		}
		lines = append(lines, fmt.Sprintf("safe default: watches.yaml sets overrideValues %s over every CR's spec", strings.Join(set, ", ")))
	}
	if len(sd.Left) > 0 {
		lines = append(lines, fmt.Sprintf("no boolean value of values.yaml turns off %s: set overrideValues in watches.yaml "+
			"that do, or declare the kinds; until then go test ./test/charts fails", strings.Join(sd.Left, ", ")))
	} else {
		lines = append(lines, "under it the chart renders no cluster-scoped object it does not declare")
	}
	if len(sd.RBAC) > 0 {
		lines = append(lines, fmt.Sprintf("it renders %s in the CR's namespace: the apiserver lets the operator grant only rights it holds itself",
			strings.Join(sd.RBAC, ", ")))
	}
	lines = append(lines, fmt.Sprintf("to offer the cluster-scoped objects instead (the administrator's decision: a ClusterRole's rules hold in every namespace, "+
		"and any tenant who may create the kind's CRs gets them), declare their kinds in %s/Chart.yaml's %s and remove the override",
		chartDir, chartpolicy.ClusterScopedKindsAnnotation))
	r.add("Cluster-scoped objects of the chart's defaults: an administrator's decision", lines...)
}
