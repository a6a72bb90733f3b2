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
// keep the declarations exact: everything cluster-scoped a chart renders is declared, and
// nothing is declared that the chart's sample does not render.

// The scope of the built-in kinds, without a cluster to ask. Rendered objects are decoded
// strictly with client-go's scheme (parseManifest), so only built-in kinds can appear; a
// kind in neither table fails the tests rather than being guessed.
var (
	clusterScopedKinds = []schema.GroupKind{
		{Kind: "Namespace"}, {Kind: "Node"}, {Kind: "PersistentVolume"}, {Kind: "ComponentStatus"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"},
		{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"},
		{Group: "storage.k8s.io", Kind: "StorageClass"},
		{Group: "storage.k8s.io", Kind: "CSIDriver"},
		{Group: "storage.k8s.io", Kind: "CSINode"},
		{Group: "storage.k8s.io", Kind: "VolumeAttachment"},
		{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"},
		{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"},
		{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"},
		{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"},
		{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"},
		{Group: "scheduling.k8s.io", Kind: "PriorityClass"},
		{Group: "node.k8s.io", Kind: "RuntimeClass"},
		{Group: "networking.k8s.io", Kind: "IngressClass"},
		{Group: "networking.k8s.io", Kind: "IPAddress"},
		{Group: "networking.k8s.io", Kind: "ServiceCIDR"},
		{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"},
		{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"},
		{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"},
		{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"},
		{Group: "resource.k8s.io", Kind: "DeviceClass"},
		{Group: "resource.k8s.io", Kind: "ResourceSlice"},
		{Group: "storagemigration.k8s.io", Kind: "StorageVersionMigration"},
		{Group: "internal.apiserver.k8s.io", Kind: "StorageVersion"},
	}
	namespacedKinds = []schema.GroupKind{
		{Kind: "ConfigMap"}, {Kind: "Secret"}, {Kind: "Service"}, {Kind: "ServiceAccount"},
		{Kind: "PersistentVolumeClaim"}, {Kind: "Pod"}, {Kind: "Endpoints"},
		{Group: "apps", Kind: "Deployment"}, {Group: "apps", Kind: "StatefulSet"},
		{Group: "apps", Kind: "DaemonSet"}, {Group: "apps", Kind: "ReplicaSet"},
		{Group: "batch", Kind: "Job"}, {Group: "batch", Kind: "CronJob"},
		{Group: "policy", Kind: "PodDisruptionBudget"},
		{Group: "networking.k8s.io", Kind: "NetworkPolicy"},
		{Group: "networking.k8s.io", Kind: "Ingress"},
		{Group: "rbac.authorization.k8s.io", Kind: "Role"},
		{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"},
		{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"},
	}
)

// clusterScoped are the kinds a chart may render without a namespace (see checkCommon).
var clusterScoped = func() map[string]bool {
	out := map[string]bool{}
	for _, gk := range clusterScopedKinds {
		out[gk.Kind] = true
	}
	return out
}()

// isClusterScoped tells the scope of a built-in kind, failing the test for a kind of
// neither table.
func isClusterScoped(t *testing.T, gk schema.GroupKind) bool {
	t.Helper()
	switch {
	case slices.Contains(clusterScopedKinds, gk):
		return true
	case slices.Contains(namespacedKinds, gk):
		return false
	}
	t.Errorf("the scope of %s is unknown: add it to clusterScopedKinds or namespacedKinds", gk)
	return true // unknown counts as cluster-scoped: it must then be declared
}

// The scope tables name real kinds, so that a typo cannot hide one.
func TestScopeTablesKnown(t *testing.T) {
	known := map[schema.GroupKind]bool{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		known[gvk.GroupKind()] = true
	}
	for _, gk := range slices.Concat(clusterScopedKinds, namespacedKinds) {
		if !known[gk] {
			t.Errorf("%s is not a kind of client-go's scheme", gk)
		}
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

// hasRequired tells whether a chart's values.schema.json requires a value: its defaults
// alone then do not render.
func hasRequired(t *testing.T, chartName string) bool {
	t.Helper()
	required, _ := loadSchema(t, chartName)["required"].([]any)
	return len(required) > 0
}

// Every cluster-scoped kind a chart renders, with its defaults, its sample or the other
// values of renderCases, or names in a template, is declared in its Chart.yaml; and every
// declared kind is cluster-scoped and rendered by the chart's sample, so that no stale
// declaration lets the operator create what the chart no longer does.
func TestClusterScopedKindsDeclared(t *testing.T) {
	cases := renderCases(t) // the samples and edge values
	named := templateKinds(t)
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		t.Run(chartName, func(t *testing.T) {
			declared := declaredKinds(t, loadChart(t, chartName))
			valuesList := cases[chartName]
			if !hasRequired(t, chartName) {
				valuesList = append(valuesList, map[string]any{}) // the defaults of values.yaml
			}
			var found []schema.GroupKind
			for gk := range kindsRendered(t, chartName, valuesList) {
				found = append(found, gk)
			}
			for _, gvk := range named[chartName] {
				found = append(found, gvk.GroupKind())
			}
			for _, gk := range found {
				if isClusterScoped(t, gk) && !slices.Contains(declared, gk) {
					t.Errorf("renders the cluster-scoped %s, which Chart.yaml does not declare in %s",
						gk, chartpolicy.ClusterScopedKindsAnnotation)
				}
			}

			bySample := kindsRendered(t, chartName, []map[string]any{loadSample(t, w).Spec})
			for _, gk := range declared {
				if !isClusterScoped(t, gk) {
					t.Errorf("declares %s, which is namespaced", gk)
				}
				if !bySample[gk] {
					t.Errorf("declares %s, which its sample (%s) does not render: a stale declaration",
						gk, filepath.Base(sampleFile(w)))
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
