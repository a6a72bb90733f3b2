package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
)

// The RBAC of config/rbac is what the operator really has: the deploy e2e runs the whole
// suite as the manager's ServiceAccount. These tests keep it least privilege without a
// cluster: every permission the code and the charts need is granted, and nothing else.

// permission is one verb on one resource of one API group ("" is core).
type permission struct{ group, resource, verb string }

func (p permission) String() string {
	g := p.group
	if g == "" {
		g = "core"
	}
	return fmt.Sprintf("%s %s/%s", p.verb, g, p.resource)
}

// helmVerbs are what Helm and the helm-operator do with a rendered object: read it before an
// install (Helm refuses to adopt what is not its release's), create, patch or (with the
// upgrade-force annotation) update, delete it, and watch it to repair drift.
var helmVerbs = kindgen.HelmVerbs

// helmOperatorNeeds are the helm-operator's own needs besides the rendered objects and the
// CR kinds (see crNeeds); the sidecar declares its needs with +kubebuilder:rbac markers.
var helmOperatorNeeds = []struct {
	group, resource string
	verbs           []string
}{
	// Release storage: Helm's secrets driver, and the watch on release Secrets.
	{"", "secrets", []string{"create", "delete", "get", "list", "update", "watch"}},
	// The chart rollout's canaries: Namespaces labelled by an administrator.
	{"", "namespaces", []string{"get", "list", "watch"}},
	// Events on the CRs and leader-election events.
	{"", "events", []string{"create", "patch"}},
	// Leader election.
	{"coordination.k8s.io", "leases", []string{"get", "create", "update"}},
	// --metrics-secure: the scraper's token and its right to GET /metrics.
	{"authentication.k8s.io", "tokenreviews", []string{"create"}},
	{"authorization.k8s.io", "subjectaccessreviews", []string{"create"}},
}

// crNeeds are the helm-operator's needs on a CR kind: watch the CRs, add and remove its
// finalizer (update), write status (our manager patches, the stock helm-operator updates),
// and set owner references that block the CR's deletion (finalizers).
func crNeeds(group, plural string) []permission {
	var out []permission
	for _, v := range []string{"get", "list", "watch", "update"} {
		out = append(out, permission{group, plural, v})
	}
	return append(out,
		permission{group, plural + "/status", "patch"},
		permission{group, plural + "/status", "update"},
		permission{group, plural + "/finalizers", "update"})
}

// rbacDoc reads one manifest of config/rbac.
func rbacDoc(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// rbacKind is the kind of a manifest of config/rbac.
func rbacKind(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", name))
	if err != nil {
		t.Fatal(err)
	}
	var head struct{ Kind string }
	if err := yaml.Unmarshal(data, &head); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return head.Kind
}

// rbacFiles lists the manifests config/rbac/kustomization.yaml includes.
func rbacFiles(t *testing.T) []string {
	t.Helper()
	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "rbac", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	return k.Resources
}

// serviceAccountRules are the rules of every Role and ClusterRole bound to the manager's
// ServiceAccount in config/rbac, by role name.
func serviceAccountRules(t *testing.T) map[string][]rbacv1.PolicyRule {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	bound := map[string]bool{}
	for _, f := range rbacFiles(t) {
		switch rbacKind(t, f) {
		case "Role", "ClusterRole":
			var r rbacv1.ClusterRole // a Role has the same fields
			rbacDoc(t, f, &r)
			roles[r.Name] = r.Rules
		case "RoleBinding", "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			rbacDoc(t, f, &b)
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Name == "controller-manager" {
					bound[b.RoleRef.Name] = true
				}
			}
		}
	}
	out := map[string][]rbacv1.PolicyRule{}
	for name := range bound {
		rules, ok := roles[name]
		if !ok {
			t.Fatalf("the ServiceAccount is bound to %s, which config/rbac does not define", name)
		}
		out[name] = rules
	}
	return out
}

func permissions(rules []rbacv1.PolicyRule) map[permission]bool {
	out := map[permission]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out[permission{g, res, v}] = true
				}
			}
		}
	}
	return out
}

// granted is every permission of the manager's ServiceAccount.
func granted(t *testing.T) map[permission]bool {
	t.Helper()
	all := map[permission]bool{}
	for _, rules := range serviceAccountRules(t) {
		for p := range permissions(rules) {
			all[p] = true
		}
	}
	return all
}

// renderCases are the values every chart is rendered with to collect the kinds it renders:
// its sample and edge values, which switch on whatever the templates make optional.
func renderCases(t *testing.T) map[string][]map[string]any {
	t.Helper()
	cases := map[string][]map[string]any{
		"warpdrivepool": {
			{"capacity": "1Gi"},
			decodeYAML(t, "{capacity: 1Ti, replicas: 32, overcommitRatio: 10, reclaimPolicy: Retain, storageClassName: fast, "+
				"nodeSelector: {disktype: ssd}, resources: {limits: {memory: 1Gi}}}"),
		},
		"appservice":       {{"deploymentName": "web", "replicas": int64(0)}, {"deploymentName": "web", "replicas": int64(100)}},
		"uniteddeployment": {{"deploymentName": "web", "replicas": int64(0)}, {"deploymentName": "web", "replicas": int64(100)}},
		"guestbook":        {{}, {"serviceType": "NodePort", "replicas": int64(0)}, {"serviceType": "LoadBalancer"}},
		"memcached":        {{"size": int64(0)}, {"size": int64(100)}},
	}
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		cases[chartName] = append(cases[chartName], loadSample(t, w).Values)
	}
	return cases
}

// renderedKinds are the kinds each chart renders, hooks included, by chart.
func renderedKinds(t *testing.T) map[string]map[schema.GroupVersionKind]bool {
	t.Helper()
	out := map[string]map[schema.GroupVersionKind]bool{}
	for chartName, valuesList := range renderCases(t) {
		out[chartName] = map[schema.GroupVersionKind]bool{}
		for _, values := range valuesList {
			for _, release := range []string{"r", strings.Repeat("r", 53)} {
				for key, obj := range mustInstall(t, chartName, release, values).all {
					gvks, _, err := scheme.Scheme.ObjectKinds(obj)
					if err != nil || len(gvks) != 1 {
						t.Fatalf("%s: kinds %v, %v", key, gvks, err)
					}
					out[chartName][gvks[0]] = true
				}
			}
		}
	}
	return out
}

// renderable is one served kind a chart can render, whatever the values.
type renderable struct {
	gk       schema.GroupKind
	resource schema.GroupResource
	cluster  bool
	where    string
}

// servedAPIs are the kinds the cluster serves, as make manifests knows them: the built-in
// ones, the CR kinds (config/crd/bases) and the CRDs an administrator gave (kindgen.ExternalCRDs).
func servedAPIs(t *testing.T) *chartpolicy.APIs {
	t.Helper()
	apis := chartpolicy.BuiltinAPIs()
	for _, dir := range []string{filepath.Join("config", "crd", "bases"), filepath.FromSlash(kindgen.ExternalCRDs)} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var crd apiextv1.CustomResourceDefinition
			if err := yaml.Unmarshal(data, &crd); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if crd.Kind == "CustomResourceDefinition" {
				apis.AddCRD(&crd)
			}
		}
	}
	return apis
}

// renderableKinds are, by chart, the served kinds its templates and subcharts can render
// whatever the values (chartpolicy.Objects), but helm test hooks, which the helm-operator
// never runs. This is what the manager role must grant, for any chart.
func renderableKinds(t *testing.T) map[string][]renderable {
	t.Helper()
	apis := servedAPIs(t)
	out := map[string][]renderable{}
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		objects, err := chartpolicy.Objects(loadChart(t, chartName))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objects {
			if o.HelmTestOnly() {
				continue
			}
			mappings, _ := apis.Resolve(o) // what no served kind is gets no rule
			for _, m := range mappings {
				out[chartName] = append(out[chartName], renderable{gk: m.GroupVersionKind.GroupKind(),
					resource: m.Resource.GroupResource(), cluster: m.Scope.Name() == meta.RESTScopeNameRoot, where: o.Where()})
			}
		}
	}
	return out
}

// resourceOf is the API resource of a built-in kind, as the apiserver names it.
func resourceOf(gvk schema.GroupVersionKind) string {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural.Resource
}

// crPlurals are the resources of the CR kinds, from their CRDs, by kind.
func crPlurals(t *testing.T) map[string]schema.GroupResource {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schema.GroupResource{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		out[crd.Spec.Names.Kind] = schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
	}
	return out
}

// markerNeeds are the permissions of the +kubebuilder:rbac markers in the operator's code.
func markerNeeds(t *testing.T) map[permission]string {
	t.Helper()
	out := map[permission]string{}
	re := regexp.MustCompile(`//\s*\+kubebuilder:rbac:(\S+)`)
	for _, dir := range []string{"cmd", "internal", "sidecar"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range re.FindAllStringSubmatch(string(data), -1) {
				fields := map[string][]string{}
				for _, kv := range strings.Split(m[1], ",") {
					k, v, _ := strings.Cut(kv, "=")
					fields[k] = strings.Split(strings.Trim(v, `"`), ";")
				}
				for _, g := range fields["groups"] {
					for _, r := range fields["resources"] {
						for _, v := range fields["verbs"] {
							out[permission{strings.Trim(g, `"`), r, v}] = strings.TrimPrefix(path, root+"/")
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatal("no +kubebuilder:rbac markers found: the parser is broken")
	}
	return out
}

// needs is every permission the operator needs, with the reason: Helm's verbs on every kind
// a chart can render, but the cluster-scoped and RBAC kinds it does not declare (the operator
// may not create those), and what the CR kinds, the helm-operator and the markers need.
func needs(t *testing.T) map[permission]string {
	t.Helper()
	out := map[permission]string{}
	declared := declaredByChart(t)
	for chartName, kinds := range renderableKinds(t) {
		for _, r := range kinds {
			if needsDeclaration(r.gk, r.cluster) && !slices.Contains(declared[chartName], r.gk) {
				continue
			}
			for _, v := range helmVerbs {
				out[permission{r.resource.Group, r.resource.Resource, v}] = "chart " + chartName + " can render " + r.gk.Kind + " (" + r.where + ")"
			}
		}
	}
	for kind, gr := range crPlurals(t) {
		for _, p := range crNeeds(gr.Group, gr.Resource) {
			out[p] = "CR kind " + kind
		}
	}
	for _, n := range helmOperatorNeeds {
		for _, v := range n.verbs {
			out[permission{n.group, n.resource, v}] = "helm-operator"
		}
	}
	for p, where := range markerNeeds(t) {
		out[p] = "marker in " + where
	}
	return out
}

// declaredByChart are the cluster-scoped and RBAC kinds each chart declares.
func declaredByChart(t *testing.T) map[string][]schema.GroupKind {
	t.Helper()
	out := map[string][]schema.GroupKind{}
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		out[chartName] = append(declaredKinds(t, loadChart(t, chartName)), declaredRBACKinds(t, chartName)...)
	}
	return out
}

// declaredRBACKinds are the Roles and RoleBindings a chart declares.
func declaredRBACKinds(t *testing.T, chartName string) []schema.GroupKind {
	t.Helper()
	kinds, err := chartpolicy.RBACKinds(loadChart(t, chartName))
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

// needsDeclaration tells whether a chart must declare a kind for the operator to create it:
// a cluster-scoped kind, or a Role or RoleBinding, through which the operator would grant what
// it holds to a subject the values name.
func needsDeclaration(gk schema.GroupKind, cluster bool) bool {
	return cluster || chartpolicy.IsNamespacedRBAC(gk)
}

// Every permission the charts and the code need is granted to the ServiceAccount: a chart
// that can render a kind the role does not grant (make manifests not run) fails here.
func TestServiceAccountHasWhatItNeeds(t *testing.T) {
	have := granted(t)
	var missing []string
	for p, why := range needs(t) {
		if !have[p] {
			missing = append(missing, fmt.Sprintf("%s (%s)", p, why))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("config/rbac does not grant %s", m)
	}

	// What the charts do render, with their samples and the edge values of renderCases, is
	// among what their templates can render: the templates' scan misses nothing these render.
	canRender := renderableKinds(t)
	declared := declaredByChart(t)
	for chartName, gvks := range renderedKinds(t) {
		for gvk := range gvks {
			if !slices.ContainsFunc(canRender[chartName], func(r renderable) bool { return r.gk == gvk.GroupKind() }) {
				t.Errorf("chart %s renders %s, which chartpolicy.Objects does not find in its templates", chartName, gvk)
			}
			if needsDeclaration(gvk.GroupKind(), isClusterScoped(t, gvk.GroupKind())) && !slices.Contains(declared[chartName], gvk.GroupKind()) {
				continue // TestClusterScopedKindsDeclared, TestRBACKindsDeclared
			}
			for _, v := range helmVerbs {
				if p := (permission{gvk.Group, resourceOf(gvk), v}); !have[p] {
					t.Errorf("chart %s renders %s: config/rbac does not grant %s", chartName, gvk.Kind, p)
				}
			}
		}
	}
}

// A cluster-scoped or RBAC kind a chart can render but does not declare gets no rule (make
// manifests warns of it instead), unless another chart declares it or the code needs it: the
// operator may not create what the administrator did not allow.
func TestUndeclaredClusterScopedKindsNotGranted(t *testing.T) {
	have := granted(t)
	need := needs(t)
	declared := declaredByChart(t)
	for chartName, kinds := range renderableKinds(t) {
		for _, r := range kinds {
			if !needsDeclaration(r.gk, r.cluster) || slices.Contains(declared[chartName], r.gk) {
				continue
			}
			p := permission{r.resource.Group, r.resource.Resource, "create"}
			if _, needed := need[p]; have[p] && !needed {
				t.Errorf("chart %s can render the undeclared %s (%s), and config/rbac grants %s", chartName, r.gk, r.where, p)
			}
		}
	}
}

// The ServiceAccount has nothing that no chart and no code needs.
func TestServiceAccountHasNothingElse(t *testing.T) {
	need := needs(t)
	var extra []string
	for p := range granted(t) {
		if _, ok := need[p]; !ok {
			extra = append(extra, p.String())
		}
	}
	sort.Strings(extra)
	for _, e := range extra {
		t.Errorf("config/rbac grants %s, which no chart and no code needs", e)
	}
	// Leases only in the operator's own namespace (a Role), not cluster-wide.
	for name, rules := range serviceAccountRules(t) {
		for p := range permissions(rules) {
			if p.resource == "leases" && name != "leader-election-role" {
				t.Errorf("%s grants %s: leases belong in the namespaced leader-election-role", name, p)
			}
		}
	}
}

// No rule anywhere in config/rbac uses a wildcard.
func TestRBACHasNoWildcards(t *testing.T) {
	for _, f := range rbacFiles(t) {
		if k := rbacKind(t, f); k != "Role" && k != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		rbacDoc(t, f, &r)
		if r.AggregationRule != nil {
			t.Errorf("%s: aggregates other roles, whose rules this test cannot see", f)
		}
		for i, rule := range r.Rules {
			for _, list := range [][]string{rule.APIGroups, rule.Resources, rule.Verbs, rule.ResourceNames, rule.NonResourceURLs} {
				for _, s := range list {
					if strings.Contains(s, "*") {
						t.Errorf("%s: rule %d has the wildcard %q", f, i, s)
					}
				}
			}
			for _, v := range rule.Verbs {
				if v == "bind" || v == "escalate" || v == "impersonate" {
					t.Errorf("%s: rule %d grants %q", f, i, v)
				}
			}
		}
	}
}

// Users' roles: per kind an editor and a viewer ClusterRole. Viewers aggregate to "view".
// Editors aggregate to "edit" (and so to "admin") only when their chart renders nothing
// cluster-scoped and declares no Role or RoleBinding: otherwise a namespace editor could make
// the operator create what the editor may not, so binding that editor role is a
// cluster-admin-level decision.
func TestUserRolesAggregation(t *testing.T) {
	rendered := renderedKinds(t)
	plurals := crPlurals(t)
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		var clusterKinds []string
		for gvk := range rendered[chartName] {
			if clusterScoped[gvk.Kind] {
				clusterKinds = append(clusterKinds, gvk.Kind)
			}
		}
		gr := plurals[w.Kind]
		for _, role := range []string{"editor", "viewer"} {
			var r rbacv1.ClusterRole
			rbacDoc(t, chartName+"_"+role+"_role.yaml", &r)
			have := permissions(r.Rules)
			verbs := []string{"get", "list", "watch"}
			if role == "editor" {
				verbs = append(verbs, "create", "delete", "patch", "update")
			}
			for _, v := range verbs {
				if !have[permission{gr.Group, gr.Resource, v}] {
					t.Errorf("%s %s role lacks %s", w.Kind, role, v)
				}
			}
			labels := r.Labels
			switch {
			case role == "viewer":
				if labels["rbac.authorization.k8s.io/aggregate-to-view"] != "true" {
					t.Errorf("%s viewer role does not aggregate to view", w.Kind)
				}
			case len(clusterKinds) > 0 || len(declaredRBACKinds(t, chartName)) > 0:
				for _, l := range []string{"aggregate-to-edit", "aggregate-to-admin"} {
					if _, ok := labels["rbac.authorization.k8s.io/"+l]; ok {
						t.Errorf("%s renders cluster-scoped %v or declares RBAC kinds, yet its editor role has %s", w.Kind, clusterKinds, l)
					}
				}
			default:
				if labels["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" {
					t.Errorf("%s renders only namespaced objects; its editor role should aggregate to edit", w.Kind)
				}
			}
		}
	}
	// The statement of the README and of warpdrivepool_editor_role.yaml.
	var pool []string
	for gvk := range rendered["warpdrivepool"] {
		if clusterScoped[gvk.Kind] {
			pool = append(pool, gvk.Kind)
		}
	}
	if strings.Join(pool, ",") != "StorageClass" {
		t.Errorf("WarpdrivePool renders cluster-scoped %v, want exactly its StorageClass", pool)
	}
}

// Every Role and RoleBinding a chart renders with its sample or the other values of
// renderCases is declared in its Chart.yaml (chartpolicy.RBACKindsAnnotation): the manager role
// has no rule on the others. Every declared kind can be rendered by the chart's templates, so
// that no stale declaration keeps the rule and the editor role out of edit for nothing.
func TestRBACKindsDeclared(t *testing.T) {
	cases := renderCases(t)
	canRender := renderableKinds(t)
	for _, w := range watchList(t) {
		chartName := strings.ToLower(w.Kind)
		declared := declaredRBACKinds(t, chartName)
		for gk := range kindsRendered(t, chartName, cases[chartName]) {
			if chartpolicy.IsNamespacedRBAC(gk) && !slices.Contains(declared, gk) {
				t.Errorf("chart %s renders %s, which Chart.yaml does not declare in %s", chartName, gk, chartpolicy.RBACKindsAnnotation)
			}
		}
		for _, gk := range declared {
			if !slices.ContainsFunc(canRender[chartName], func(r renderable) bool { return r.gk == gk }) {
				t.Errorf("chart %s declares %s, which no template of it can render: a stale declaration", chartName, gk)
			}
		}
	}
}
