package charts

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// A chart declares in its Chart.yaml the cluster-scoped kinds it renders
// (chartpolicy.ClusterScopedKindsAnnotation), and the operator refuses any other. These tests
// keep the declarations exact: everything cluster-scoped a chart's sample renders is declared,
// and nothing is declared that the chart's templates cannot render.

// scopes are the served kinds, with their scope, from the one source make manifests uses:
// client-go's typed clients (chartpolicy.BuiltinAPIs). Rendered objects are decoded strictly
// with client-go's scheme (parseManifest), so only built-in kinds can appear.
var scopes = chartpolicy.BuiltinAPIs()

// clusterScoped are the names of the cluster-scoped built-in kinds (see checkCommon).
var clusterScoped = func() map[string]bool {
	out := map[string]bool{}
	for _, gk := range scopes.Kinds() {
		if cluster, _ := scopes.ClusterScoped(gk); cluster {
			out[gk.Kind] = true
		}
	}
	return out
}()

// isClusterScoped tells the scope of a built-in kind, failing the test for a kind not served.
func isClusterScoped(t *testing.T, gk schema.GroupKind) bool {
	t.Helper()
	cluster, ok := scopes.ClusterScoped(gk)
	if !ok {
		t.Errorf("the scope of %s is unknown: Kubernetes 1.%d does not serve it", gk, chartpolicy.KubernetesMinor)
		return true // unknown counts as cluster-scoped: it must then be declared
	}
	return cluster
}

// The scopes are the apiserver's, for kinds whose scope everyone knows; and a kind name is
// cluster-scoped in every group that has it or in none, so that clusterScoped, by name, holds.
func TestScopes(t *testing.T) {
	for gk, want := range map[schema.GroupKind]bool{
		{Kind: "Namespace"}: true, {Kind: "Node"}: true, {Kind: "PersistentVolume"}: true,
		{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 true,
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       true,
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                true,
		{Group: "networking.k8s.io", Kind: "IngressClass"}:                              true,
		{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             true,
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: true,
		{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:               true,
		{Kind: "ConfigMap"}: false, {Kind: "Secret"}: false, {Kind: "Service"}: false, {Kind: "Pod"}: false,
		{Kind: "ServiceAccount"}: false, {Kind: "PersistentVolumeClaim"}: false, {Kind: "Event"}: false,
		{Group: "apps", Kind: "Deployment"}: false, {Group: "apps", Kind: "StatefulSet"}: false,
		{Group: "batch", Kind: "Job"}: false, {Group: "policy", Kind: "PodDisruptionBudget"}: false,
		{Group: "networking.k8s.io", Kind: "Ingress"}: false, {Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}: false,
		{Group: "rbac.authorization.k8s.io", Kind: "Role"}: false, {Group: "coordination.k8s.io", Kind: "Lease"}: false,
	} {
		if got, ok := scopes.ClusterScoped(gk); !ok || got != want {
			t.Errorf("%s: cluster-scoped %v (known %v), want %v", gk, got, ok, want)
		}
	}
	byName := map[string]bool{}
	for _, gk := range scopes.Kinds() {
		cluster, _ := scopes.ClusterScoped(gk)
		if prev, ok := byName[gk.Kind]; ok && prev != cluster {
			t.Errorf("the kind name %s is cluster-scoped in one group and namespaced in another", gk.Kind)
		}
		byName[gk.Kind] = cluster
	}
	if len(byName) < 50 {
		t.Errorf("only %d built-in kinds are known: the typed clients were not read", len(byName))
	}
}

// declaredKinds parses a chart's ClusterScopedKindsAnnotation.
func declaredKinds(t *testing.T, c *chart.Chart) []schema.GroupKind {
	t.Helper()
	kinds, err := chartpolicy.ClusterScopedKinds(c)
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// kindsRendered renders a chart with each set of values and returns the kinds of the objects.
func kindsRendered(t *testing.T, chartName string, valuesList []map[string]any) map[schema.GroupKind]bool {
	t.Helper()
	out := map[schema.GroupKind]bool{}
	for _, values := range valuesList {
		for key, obj := range mustInstall(t, chartName, "r", values).objects {
			gvks, _, err := scheme.Scheme.ObjectKinds(obj)
			if err != nil || len(gvks) != 1 {
				t.Fatalf("%s: kinds %v, %v", key, gvks, err)
			}
			out[gvks[0].GroupKind()] = true
		}
	}
	return out
}

// Every cluster-scoped kind a chart renders with its sample or the other values of
// renderCases is declared in its Chart.yaml (the operator would refuse the sample otherwise);
// and every declared kind is cluster-scoped and can be rendered by the chart's templates
// (chartpolicy.Objects), so that no stale declaration lets the operator create what the chart
// no longer does. A kind the templates can render but the chart does not declare gets no rule
// (TestUndeclaredClusterScopedKindsNotGranted): that is an administrator's choice, as for a
// public chart's optional ClusterRole.
func TestClusterScopedKindsDeclared(t *testing.T) {
	cases := renderCases(t) // the samples and edge values
	canRender := renderableKinds(t)
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		t.Run(chartName, func(t *testing.T) {
			declared := declaredKinds(t, loadChart(t, chartName))
			for gk := range kindsRendered(t, chartName, cases[chartName]) {
				if isClusterScoped(t, gk) && !slices.Contains(declared, gk) {
					t.Errorf("renders the cluster-scoped %s, which Chart.yaml does not declare in %s",
						gk, chartpolicy.ClusterScopedKindsAnnotation)
				}
			}
			for _, gk := range declared {
				if !isClusterScoped(t, gk) {
					t.Errorf("declares %s, which is namespaced", gk)
				}
				if !slices.ContainsFunc(canRender[chartName], func(r renderable) bool { return r.gk == gk }) {
					t.Errorf("declares %s, which no template of the chart can render: a stale declaration", gk)
				}
			}
		})
	}

	// The statement of the README: a WarpdrivePool's StorageClass is the only one.
	want := []schema.GroupKind{{Group: "storage.k8s.io", Kind: "StorageClass"}}
	if got := declaredKinds(t, loadChart(t, "warpdrivepool")); !slices.Equal(got, want) {
		t.Errorf("warpdrivepool declares %v, want %v", got, want)
	}
}

// No chart has Helm hooks: the operator runs hooks only of charts that have them, and
// hooks run outside the release's checks (see chartpolicy.HasHooks).
func TestNoChartHasHooks(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(root, "helm-charts", "*", "Chart.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no charts found: %v", err)
	}
	for _, d := range dirs {
		chartName := filepath.Base(filepath.Dir(d))
		if chartpolicy.HasHooks(loadChart(t, chartName)) {
			t.Errorf("chart %s has a hook template", chartName)
		}
	}

	// HasHooks sees a hook in a chart and in a subchart.
	hook := &chart.File{Name: "templates/migrate.yaml", Data: []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  annotations:
    "helm.sh/hook": pre-install,pre-upgrade
`)}
	plain := &chart.File{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")}
	withHook := &chart.Chart{Metadata: &chart.Metadata{Name: "hooked"}, Templates: []*chart.File{plain, hook}}
	if !chartpolicy.HasHooks(withHook) {
		t.Error("HasHooks missed a hook template")
	}
	parent := &chart.Chart{Metadata: &chart.Metadata{Name: "parent"}, Templates: []*chart.File{plain}}
	if chartpolicy.HasHooks(parent) {
		t.Error("HasHooks found a hook in a chart without one")
	}
	parent.AddDependency(withHook)
	if !chartpolicy.HasHooks(parent) {
		t.Error("HasHooks missed a hook template of a subchart")
	}
}
