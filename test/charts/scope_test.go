package charts

import (
	"fmt"
	"maps"
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

// kindsRendered renders a chart with each set of values and returns the kinds of the objects,
// hooks included.
func kindsRendered(t *testing.T, chartName string, valuesList []map[string]any) map[schema.GroupKind]bool {
	t.Helper()
	out := map[schema.GroupKind]bool{}
	for _, values := range valuesList {
		for key, obj := range mustInstall(t, chartName, "r", values).all {
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

// A chart may have Helm hooks, as public charts do (a migration Job, a helm test Pod). The
// operator runs the hooks of a chart that has hook templates (chartpolicy.HasHooks), and no
// hook of any other chart whatever a release record says; it confines hooks as it confines
// the release's other objects. So hooks are held to the same rules, for any chart: rendered
// with each of the chart's render cases (its sample and edge values), every hook the operator
// runs is in the release's namespace or in none, or of a cluster-scoped kind the chart
// declares, with a valid name and labels. The other tests see hooks too: checkAnyChart and
// checkCommon check them, and the scope and RBAC tests count their kinds among those the
// chart renders. helm test's hooks are left out, as the manager role leaves them out: the
// operator never runs helm test.
func TestHooksFollowTheRules(t *testing.T) {
	apis := servedAPIs(t)
	cases := renderCases(t)
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		t.Run(chartName, func(t *testing.T) {
			c := loadChart(t, chartName)
			declared := declaredKinds(t, c)
			var run, test int
			for _, values := range cases[chartName] {
				r := mustInstall(t, chartName, "r", values)
				for _, p := range hookProblems(r, apis, declared) {
					t.Error(p)
				}
				run, test = run+len(r.hooks), test+len(r.testHooks)
			}
			if run+test > 0 && !chartpolicy.HasHooks(c) {
				t.Error("renders hooks that chartpolicy.HasHooks does not see: the operator would run none of them")
			}
			t.Logf("%d hooks the operator runs, %d helm test hooks it never runs, over %d render cases", run, test, len(cases[chartName]))
		})
	}
}

// hookProblems are the rules that the hooks the operator runs break: those of every object
// (anyChartProblems), and a cluster-scoped kind only if the chart declares it.
func hookProblems(r *rendered, apis *chartpolicy.APIs, declared []schema.GroupKind) []string {
	var problems []string
	for _, key := range slices.Sorted(maps.Keys(r.hooks)) {
		obj := r.hooks[key]
		for _, p := range anyChartProblems(key, obj) {
			problems = append(problems, "hook "+p)
		}
		gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
		cluster, known := apis.ClusterScoped(gk)
		switch {
		case !known:
			problems = append(problems, fmt.Sprintf("hook %s: the cluster serves no kind %s", key, gk))
		case cluster && !slices.Contains(declared, gk):
			problems = append(problems, fmt.Sprintf("hook %s: the cluster-scoped %s, which Chart.yaml does not declare in %s",
				key, gk, chartpolicy.ClusterScopedKindsAnnotation))
		}
	}
	return problems
}

// The hook rules catch a hook in another namespace and one of an undeclared cluster-scoped
// kind, pass what any chart's hooks do, and leave helm test's hooks out.
func TestHookRulesChecker(t *testing.T) {
	hook := func(apiVersion, kind, name, namespace, events string) *chart.File {
		text := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: %s\n", apiVersion, kind, name)
		if namespace != "" {
			text += "  namespace: " + namespace + "\n"
		}
		text += fmt.Sprintf("  annotations:\n    \"helm.sh/hook\": %s\n", events)
		return &chart.File{Name: "templates/" + name + ".yaml", Data: []byte(text)}
	}
	c := &chart.Chart{
		Metadata: &chart.Metadata{APIVersion: "v2", Name: "hooked", Version: "1.0.0"},
		Templates: []*chart.File{
			hook("batch/v1", "Job", "migrate", "{{ .Release.Namespace }}", "pre-install,pre-upgrade"),
			hook("v1", "ConfigMap", "config", "", "post-install"),
			hook("v1", "ConfigMap", "escape", "kube-system", "pre-delete"),
			hook("rbac.authorization.k8s.io/v1", "ClusterRole", "admin", "", "post-install"),
			hook("v1", "Pod", "test", "elsewhere", "test"),
		},
	}
	r, err := installChart(t, c, "r", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(r.hooks)); !slices.Equal(got, []string{"ClusterRole/admin", "ConfigMap/config", "ConfigMap/escape", "Job/migrate"}) {
		t.Errorf("hooks run %v", got)
	}
	if !slices.Equal(r.testHooks, []string{"Pod/test"}) {
		t.Errorf("helm test hooks %v, want Pod/test", r.testHooks)
	}
	problems := strings.Join(hookProblems(r, servedAPIs(t), nil), "\n")
	for _, want := range []string{"hook ConfigMap/escape: namespace \"kube-system\"", "hook ClusterRole/admin: the cluster-scoped ClusterRole"} {
		if !strings.Contains(problems, want) {
			t.Errorf("no problem %q among:\n%s", want, problems)
		}
	}
	if n := strings.Count(problems, "\n") + 1; n != 2 {
		t.Errorf("%d problems, want 2:\n%s", n, problems)
	}
	declared := []schema.GroupKind{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}}
	if problems := hookProblems(r, servedAPIs(t), declared); len(problems) != 1 {
		t.Errorf("with ClusterRole declared: problems %v, want the ConfigMap in kube-system alone", problems)
	}
}
