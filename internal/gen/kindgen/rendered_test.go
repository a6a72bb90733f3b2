package kindgen

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
)

// galleryRepo is repo with a third kind, Gallery, whose chart is testdata/gallery with the
// testdata/metrics subchart packaged into its charts/ (a .tgz, as helm dependency build
// leaves it).
func galleryRepo(t *testing.T) string {
	t.Helper()
	root := repo(t)
	dir := filepath.Join(root, "helm-charts", "gallery")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "gallery"))); err != nil {
		t.Fatal(err)
	}
	metrics, err := loader.LoadDir(filepath.Join("testdata", "metrics"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(metrics, filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	watches, err := os.ReadFile(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "watches.yaml"), string(watches)+
		"- group: art.transwarp.io\n  version: v1\n  kind: Gallery\n  chart: helm-charts/gallery\n")
	return root
}

// generateWarn is generate, returning the warnings too.
func generateWarn(t *testing.T, root string) (map[string]string, []string) {
	t.Helper()
	var warnings []string
	o := DefaultOptions(root)
	o.Warn = func(w string) { warnings = append(warnings, w) }
	files, err := Generate(o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		out[f.Path] = string(f.Data)
	}
	return out, warnings
}

// grants are the verbs of the manager role's rules by "group/resource".
func grants(t *testing.T, role string) map[string][]string {
	t.Helper()
	var r rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict([]byte(role), &r); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, rule := range r.Rules {
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				out[g+"/"+res] = append(out[g+"/"+res], rule.Verbs...)
			}
		}
	}
	return out
}

// The objects of the gallery chart, found in its templates whatever the values: through a
// library chart's helpers, behind if, with and range, in a subchart packaged as a .tgz; with
// their guards and hooks.
func TestObjectsOfAChart(t *testing.T) {
	root := galleryRepo(t)
	c, err := loader.LoadDir(filepath.Join(root, "helm-charts", "gallery"))
	if err != nil {
		t.Fatal(err)
	}
	objects, err := chartpolicy.Objects(c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]chartpolicy.Object{}
	for _, o := range objects {
		got[o.APIVersion+" "+o.Kind+" "+o.File] = o
	}
	want := map[string][]string{
		" StatefulSet templates/deployment.yaml":                                nil,
		" Deployment templates/deployment.yaml":                                 nil,
		" PodDisruptionBudget templates/pdb.yaml":                               nil,
		"networking.k8s.io/v1 Ingress templates/ingress.yaml":                   {"if .Values.ingress.enabled", `if .Capabilities.APIVersions.Has "networking.k8s.io/v1/Ingress"`},
		"extensions/v1beta1 Ingress templates/ingress.yaml":                     {"if .Values.ingress.enabled", `not .Capabilities.APIVersions.Has "networking.k8s.io/v1/Ingress"`},
		"autoscaling/v2 HorizontalPodAutoscaler templates/hpa.yaml":             {"with .Values.autoscaling", "if .enabled"},
		"policy/v1beta1 PodSecurityPolicy templates/psp.yaml":                   {`if and .Values.podSecurityPolicy.enabled (.Capabilities.APIVersions.Has "policy/v1beta1/PodSecurityPolicy")`},
		"v1 ServiceAccount templates/rbac.yaml":                                 {"if .Values.rbac.create"},
		"rbac.authorization.k8s.io/v1 ClusterRole templates/rbac.yaml":          {"if .Values.rbac.create"},
		"rbac.authorization.k8s.io/v1 ClusterRoleBinding templates/rbac.yaml":   {"if .Values.rbac.create"},
		"storage.k8s.io/v1 StorageClass templates/storageclass.yaml":            {"with .Values.storageClass"},
		"monitoring.coreos.com/v1 ServiceMonitor templates/servicemonitor.yaml": {"if .Values.serviceMonitor.enabled"},
		"batch/v1 Job templates/migrate-job.yaml":                               {"if .Values.migrate"},
		"v1 Pod templates/tests/test-connection.yaml":                           nil,
		"v1 ConfigMap charts/toolkit/templates/_configmap.tpl":                  nil,
		"v1 Service charts/metrics/templates/service.yaml":                      {"subchart metrics: metrics.enabled"},
		"apiextensions.k8s.io/v1 CustomResourceDefinition crds/frames.yaml":     nil,
	}
	for key, guards := range want {
		o, ok := got[key]
		if !ok {
			t.Errorf("no object %q", key)
			continue
		}
		if !slices.Equal(o.Guards, guards) {
			t.Errorf("%s: guards %q, want %q", key, o.Guards, guards)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			t.Errorf("unexpected object %q (the NOTES, the HPA's scaleTargetRef and the RBAC subjects are none)", key)
		}
	}
	if o := got[" Deployment templates/deployment.yaml"]; o.Expr != `{{ternary "StatefulSet" "Deployment" .Values.persistence.enabled}}` {
		t.Errorf("the Deployment's kind expression is %q", o.Expr)
	}
	if o := got["batch/v1 Job templates/migrate-job.yaml"]; !o.Hook || !slices.Equal(o.Hooks, []string{"pre-install", "pre-upgrade"}) || o.HelmTestOnly() {
		t.Errorf("the migration Job's hooks: %v %q", o.Hook, o.Hooks)
	}
	if o := got["v1 Pod templates/tests/test-connection.yaml"]; !o.HelmTestOnly() {
		t.Errorf("the test Pod is not a test hook: %+v", o)
	}
	if o := got["v1 ConfigMap charts/toolkit/templates/_configmap.tpl"]; o.Define != "toolkit.configmap" {
		t.Errorf("the library's ConfigMap is in helper %q", o.Define)
	}
}

// The manager role grants Helm's verbs on every served kind the gallery chart can render,
// whatever its values, and nothing on the kinds the cluster does not serve, on the test hook,
// or on the cluster-scoped kinds the chart does not declare; make manifests warns of those,
// with the annotation that declares them.
func TestManagerRoleGrantsWhatChartsCanRender(t *testing.T) {
	root := galleryRepo(t)
	files, warnings := generateWarn(t, root)
	role := files[ManagerRole]
	have := grants(t, role)
	helm := strings.Join(HelmVerbs, ",")
	for _, res := range []string{"/configmaps", "/serviceaccounts", "/services", "apps/deployments", "apps/statefulsets",
		"autoscaling/horizontalpodautoscalers", "batch/jobs", "networking.k8s.io/ingresses", "policy/poddisruptionbudgets",
		"storage.k8s.io/storageclasses"} {
		if got := strings.Join(have[res], ","); got != helm {
			t.Errorf("%s: verbs %s, want %s", res, got, helm)
		}
	}
	for _, res := range []string{"/pods", "rbac.authorization.k8s.io/clusterroles", "rbac.authorization.k8s.io/clusterrolebindings",
		"policy/podsecuritypolicies", "monitoring.coreos.com/servicemonitors", "extensions/ingresses",
		"apiextensions.k8s.io/customresourcedefinitions"} {
		if v, ok := have[res]; ok {
			t.Errorf("%s is granted %v", res, v)
		}
	}
	for _, line := range []string{
		"# StatefulSet (apps), rendered by Gallery (templates/deployment.yaml).\n",
		"# ConfigMap (core), rendered by Gallery (charts/toolkit/templates/_configmap.tpl).\n",
		"# Service (core), rendered by Gallery (charts/metrics/templates/service.yaml).\n",
		"# No rule: Pod, a helm test hook, which the helm-operator never runs (Gallery:\n# templates/tests/test-connection.yaml).\n",
		"# No rule: PodSecurityPolicy: policy/v1beta1 PodSecurityPolicy is not served by Kubernetes 1." +
			strconv.Itoa(chartpolicy.KubernetesMinor) + "\n# (Gallery: templates/psp.yaml).\n",
		"# No rule: Ingress: extensions/v1beta1 Ingress is not served since Kubernetes 1.22 (Gallery:\n",
		"# No rule: ServiceMonitor: no CustomResourceDefinition of monitoring.coreos.com/v1\n",
		"# No rule: ClusterRole (rbac.authorization.k8s.io), cluster-scoped and not declared in the\n",
	} {
		if !strings.Contains(role, line) {
			t.Errorf("the manager role lacks\n%s", line)
		}
	}

	var gallery string
	for _, w := range warnings {
		if strings.Contains(w, "helm-charts/gallery (kind Gallery)") {
			gallery = w
		}
	}
	for _, want := range []string{
		"ClusterRole.rbac.authorization.k8s.io, by templates/rbac.yaml when if .Values.rbac.create\n",
		"ClusterRoleBinding.rbac.authorization.k8s.io, by templates/rbac.yaml when if .Values.rbac.create\n",
		"CustomResourceDefinition.apiextensions.k8s.io, by crds/frames.yaml\n",
		"\n    warpdrive.transwarp.io/cluster-scoped-kinds: ClusterRole.rbac.authorization.k8s.io," +
			"ClusterRoleBinding.rbac.authorization.k8s.io,CustomResourceDefinition.apiextensions.k8s.io,StorageClass.storage.k8s.io",
	} {
		if !strings.Contains(gallery, want) {
			t.Errorf("the warning on the gallery chart lacks %q:\n%s", want, gallery)
		}
	}
	if !slices.ContainsFunc(warnings, func(w string) bool {
		return strings.Contains(w, "chart helm-charts/pool declares the cluster-scoped StorageClass.storage.k8s.io")
	}) {
		t.Errorf("no warning on the pool chart's stale declaration: %q", warnings)
	}

	// An administrator declares the ClusterRole, and gives the ServiceMonitor's CRD: both get
	// their rule, and the warning names the ClusterRoleBinding alone.
	chartYAML := filepath.Join(root, "helm-charts", "gallery", "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	write(t, chartYAML, strings.Replace(string(data), "cluster-scoped-kinds: StorageClass.storage.k8s.io",
		"cluster-scoped-kinds: StorageClass.storage.k8s.io,ClusterRole.rbac.authorization.k8s.io", 1))
	write(t, filepath.Join(root, ExternalCRDs, "servicemonitors.yaml"), `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`)
	files, warnings = generateWarn(t, root)
	have = grants(t, files[ManagerRole])
	for _, res := range []string{"rbac.authorization.k8s.io/clusterroles", "monitoring.coreos.com/servicemonitors"} {
		if got := strings.Join(have[res], ","); got != helm {
			t.Errorf("declared or served now, %s: verbs %s, want %s", res, got, helm)
		}
	}
	if !strings.Contains(files[ManagerRole], "# ClusterRole (rbac.authorization.k8s.io), rendered by Gallery (templates/rbac.yaml),\n"+
		"# cluster-scoped, declared by the chart of Gallery:") {
		t.Errorf("the ClusterRole's rule does not say it is declared:\n%s", files[ManagerRole])
	}
	if _, ok := have["rbac.authorization.k8s.io/clusterrolebindings"]; ok {
		t.Error("the undeclared ClusterRoleBinding is granted")
	}
	gallery = ""
	for _, w := range warnings {
		if strings.Contains(w, "helm-charts/gallery (kind Gallery)") {
			gallery = w
		}
	}
	if strings.Contains(gallery, "ClusterRole.rbac.authorization.k8s.io, by") || !strings.Contains(gallery, "ClusterRoleBinding") {
		t.Errorf("the warning on the gallery chart, once it declares the ClusterRole:\n%s", gallery)
	}
}

// The built-in kinds are those of the Kubernetes release of go.mod's k8s.io/api.
func TestKubernetesMinorIsGoMods(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api v0\.(\d+)\.`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod requires no k8s.io/api")
	}
	if minor, _ := strconv.Atoi(string(m[1])); minor != chartpolicy.KubernetesMinor {
		t.Errorf("go.mod requires k8s.io/api 0.%d: set chartpolicy.KubernetesMinor to %d", minor, minor)
	}
}

// A chart's Roles and RoleBindings are the administrator's decision, as its cluster-scoped
// kinds are: undeclared, the manager role gets no rule on them and make manifests warns;
// declared, it gets Helm's verbs, never bind or escalate, and the kind's editor role is kept
// out of "edit", since the chart's values choose the rules and the subject.
func TestManagerRoleGrantsRBACKindsOnlyDeclared(t *testing.T) {
	root := repo(t)
	write(t, filepath.Join(root, "helm-charts", "widget", "templates", "rbac.yaml"), `{{- if .Values.rbac.create }}
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: {{ .Release.Name }}
rules: {{- toYaml .Values.rbac.extraRoleRules | nindent 2 }}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Release.Name }}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: {{ .Release.Name }}}
subjects:
- kind: ServiceAccount
  name: {{ .Values.serviceAccount.name }}
{{- end }}
`)
	write(t, filepath.Join(root, "helm-charts", "widget", "templates", "tests", "test-rolebinding.yaml"), `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: {{ .Release.Name }}-test
  annotations:
    helm.sh/hook: test
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
`)
	files, warnings := generateWarn(t, root)
	have := grants(t, files[ManagerRole])
	for _, res := range []string{"rbac.authorization.k8s.io/roles", "rbac.authorization.k8s.io/rolebindings"} {
		if v, ok := have[res]; ok {
			t.Errorf("undeclared, %s is granted %v", res, v)
		}
	}
	if !strings.Contains(files[ManagerRole], "# No rule: Role (rbac.authorization.k8s.io), RBAC and not declared in the chart's\n") {
		t.Errorf("the manager role does not say why Roles get no rule:\n%s", files[ManagerRole])
	}
	var widget string
	for _, w := range warnings {
		if strings.Contains(w, "helm-charts/widget (kind Widget)") {
			widget = w
		}
	}
	for _, want := range []string{
		"RoleBinding.rbac.authorization.k8s.io, by templates/rbac.yaml when if .Values.rbac.create\n",
		"\n    warpdrive.transwarp.io/rbac-kinds: Role.rbac.authorization.k8s.io,RoleBinding.rbac.authorization.k8s.io",
	} {
		if !strings.Contains(widget, want) {
			t.Errorf("the warning on the widget chart lacks %q:\n%s", want, widget)
		}
	}
	if !strings.Contains(files[RBACDir+"/widget_editor_role.yaml"], "aggregate-to-edit") {
		t.Error("undeclared, the chart's RBAC is refused: its editor role should stay in edit")
	}

	chartYAML := filepath.Join(root, "helm-charts", "widget", "Chart.yaml")
	data, err := os.ReadFile(chartYAML)
	if err != nil {
		t.Fatal(err)
	}
	write(t, chartYAML, string(data)+"  warpdrive.transwarp.io/rbac-kinds: Role.rbac.authorization.k8s.io,RoleBinding.rbac.authorization.k8s.io\n")
	files, warnings = generateWarn(t, root)
	have = grants(t, files[ManagerRole])
	helm := strings.Join(HelmVerbs, ",")
	for _, res := range []string{"rbac.authorization.k8s.io/roles", "rbac.authorization.k8s.io/rolebindings"} {
		if got := strings.Join(have[res], ","); got != helm {
			t.Errorf("declared, %s: verbs %s, want %s", res, got, helm)
		}
	}
	for res, verbs := range have {
		for _, v := range verbs {
			if v == "bind" || v == "escalate" || v == "impersonate" || v == "*" {
				t.Errorf("the manager role grants %s on %s", v, res)
			}
		}
	}
	for _, w := range warnings {
		if strings.Contains(w, "helm-charts/widget") {
			t.Errorf("declared, a warning on the widget chart: %s", w)
		}
	}
	editor := files[RBACDir+"/widget_editor_role.yaml"]
	if strings.Contains(editor, "aggregate-to-edit") || !strings.Contains(editor, "Roles and RoleBindings") {
		t.Errorf("declared, the widget editor role:\n%s", editor)
	}
	if !strings.Contains(files[RBACKustomization], "except the Widget, Pool\n# editors") {
		t.Errorf("config/rbac/kustomization.yaml:\n%s", files[RBACKustomization])
	}
}
