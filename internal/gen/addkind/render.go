package addkind

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// renderNamespace and renderRelease stand in for a CR's namespace and name.
const (
	renderNamespace = "default"
	renderRelease   = "release"
)

// renderManifest renders c as the operator installs a release of a CR of the spec (nil: an
// empty one), with overrides set over it as watches.yaml's overrideValues are, at the
// Kubernetes version the charts are held to, and returns the YAML of its objects and of its
// hooks but helm test's, which the operator never runs. The safe defaults and the lint
// findings of add-kind's report are both taken from this rendering.
func renderManifest(c *chart.Chart, spec map[string]any, overrides map[string]string) (string, error) {
	values := map[string]any{}
	if spec != nil {
		// A copy, since setPath writes into the maps of the spec.
		data, err := yaml.Marshal(spec)
		if err != nil {
			return "", err
		}
		if err := yaml.Unmarshal(data, &values); err != nil {
			return "", err
		}
	}
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
		return "", err
	}
	manifests := []string{rel.Manifest}
	for _, h := range rel.Hooks {
		if !slices.ContainsFunc(h.Events, func(e release.HookEvent) bool { return e != release.HookTest }) {
			continue
		}
		manifests = append(manifests, h.Manifest)
	}
	return strings.Join(manifests, "\n---\n"), nil
}
