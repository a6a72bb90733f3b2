// Package charts tests the charts in helm-charts/ the way the helm-operator uses them (a
// client-only Helm install whose values are a custom resource's spec) and the CRDs that
// hack/crdgen generates from them. No cluster is needed.
package charts

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/kubernetes/scheme"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// root is the repository root, from this package's directory. $WARPDRIVE_CHARTS_ROOT points
// the tests at another tree: TestAddingAKind runs them on a copy with a sixth kind.
var root = cmp.Or(os.Getenv(rootEnv), "../..")

const rootEnv = "WARPDRIVE_CHARTS_ROOT"

// namespace of every test release: all namespaced objects must land in it.
const namespace = "team-a"

func chartDir(name string) string { return filepath.Join(root, "helm-charts", name) }

func loadChart(t *testing.T, name string) *chart.Chart {
	t.Helper()
	c, err := loader.LoadDir(chartDir(name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// watchList returns the entries of watches.yaml.
func watchList(t *testing.T) []watchfile.Watch {
	t.Helper()
	w, err := watchfile.Load(filepath.Join(root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sampleFile is operator-sdk's name for a kind's sample in config/samples.
func sampleFile(w watchfile.Watch) string {
	return filepath.Join(root, "config", "samples",
		fmt.Sprintf("%s_%s_%s.yaml", w.Group, w.Version, strings.ToLower(w.Kind)))
}

// sample is a sample custom resource, decoded as the apiserver hands it out (integers as
// int64), which is what the helm-operator passes to Helm.
type sample struct {
	Object map[string]any
	Name   string
	Spec   map[string]any
	// Values are what the chart is rendered with: Spec with the kind's overrideValues of
	// watches.yaml set over it, as the operator sets them.
	Values map[string]any
}

func loadSample(t *testing.T, w watchfile.Watch) sample {
	t.Helper()
	data, err := os.ReadFile(sampleFile(w))
	if err != nil {
		t.Fatal(err)
	}
	obj := decodeYAML(t, string(data))
	metadata, _ := obj["metadata"].(map[string]any)
	spec, _ := obj["spec"].(map[string]any)
	name, _ := metadata["name"].(string)
	values := decodeYAML(t, string(data))["spec"].(map[string]any) // a copy, for the overrides
	for _, k := range slices.Sorted(maps.Keys(w.OverrideValues)) {
		if err := strvals.ParseInto(k+"="+os.ExpandEnv(w.OverrideValues[k]), values); err != nil {
			t.Fatalf("watches.yaml, %s: overrideValues %s: %v", w.Kind, k, err)
		}
	}
	return sample{Object: obj, Name: name, Spec: spec, Values: values}
}

// decodeYAML decodes YAML like the apiserver decodes JSON: whole numbers become int64.
func decodeYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := utiljson.Unmarshal(j, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// houseCharts are the charts written for this project, which the tests hold to its own rules
// as well (checkCommon, bounded schemas, every value in the schema, the schema's defaults
// those of values.yaml, the template functions each declares). Every other chart, such as one
// added with make add-kind, is held to what Helm and the operator's safety need, which any
// chart can meet; where a rule is relaxed for it, the test logs what and why.
var houseCharts = []string{"appservice", "guestbook", "memcached", "uniteddeployment", "warpdrivepool"}

func isHouseChart(chartName string) bool { return slices.Contains(houseCharts, chartName) }

// kubeModFile pins the local cluster's control plane (make cluster-up builds kube-apiserver
// from it). It is read from this repository, not from $WARPDRIVE_CHARTS_ROOT's copy.
const kubeModFile = "../../hack/tools/kube/go.mod"

// clusterVersion is the Kubernetes version of the local cluster: the version of
// k8s.io/kubernetes that kubeModFile requires.
var clusterVersion = sync.OnceValues(func() (*chartutil.KubeVersion, error) {
	data, err := os.ReadFile(kubeModFile)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			v, err := utilversion.ParseSemantic(f[1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", kubeModFile, err)
			}
			return &chartutil.KubeVersion{Version: f[1], Major: strconv.FormatUint(uint64(v.Major()), 10), Minor: strconv.FormatUint(uint64(v.Minor()), 10)}, nil
		}
	}
	return nil, fmt.Errorf("%s requires no k8s.io/kubernetes", kubeModFile)
})

// lifecycle is what the generated code of k8s.io/api says of a beta or alpha API's releases.
type lifecycle interface {
	APILifecycleIntroduced() (major, minor int)
	APILifecycleRemoved() (major, minor int)
}

// clusterAPIVersions are the API versions and kinds the local cluster serves, as Helm's
// .Capabilities.APIVersions lists them ("apps/v1", "apps/v1/Deployment"): those of client-go's
// scheme (the client-go go.mod pins) that a kube-apiserver of clusterVersion serves by default.
// Not served are a version removed by then, an alpha version, and a beta version introduced
// since 1.24, when new beta APIs stopped being on by default.
func clusterAPIVersions(v *chartutil.KubeVersion) chartutil.VersionSet {
	major, _ := strconv.Atoi(v.Major)
	minor, _ := strconv.Atoi(v.Minor)
	before := func(maj, min int) bool { return maj < major || maj == major && min <= minor }
	set := map[string]bool{}
	for gvk := range scheme.Scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if obj, err := scheme.Scheme.New(gvk); err == nil {
			if l, ok := obj.(lifecycle); ok {
				introMaj, introMin := l.APILifecycleIntroduced()
				if rm, rn := l.APILifecycleRemoved(); (rm != 0 || rn != 0) && before(rm, rn) ||
					strings.Contains(gvk.Version, "alpha") ||
					strings.Contains(gvk.Version, "beta") && !before(introMaj, introMin) && (introMaj > 1 || introMin >= 24) {
					continue
				}
			}
		}
		set[gvk.GroupVersion().String()] = true
		set[gvk.GroupVersion().String()+"/"+gvk.Kind] = true
	}
	out := make(chartutil.VersionSet, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// install renders a chart like the helm-operator installs a release: values are the spec,
// merged over values.yaml and checked against values.schema.json, for the Kubernetes version
// and API versions of the local cluster; nothing reaches a cluster. The release's hooks are
// rendered too: the operator runs those of a chart that has them.
func install(t *testing.T, chartName, release string, values map[string]any) (*rendered, error) {
	t.Helper()
	return installChart(t, loadChart(t, chartName), release, values)
}

// installChart is install for a chart already loaded.
func installChart(t *testing.T, c *chart.Chart, release string, values map[string]any) (*rendered, error) {
	t.Helper()
	version, err := clusterVersion()
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun = true
	inst.ClientOnly = true
	inst.ReleaseName = release
	inst.Namespace = namespace
	inst.KubeVersion = version
	inst.APIVersions = clusterAPIVersions(version)
	rel, err := inst.Run(c, values)
	if err != nil {
		return nil, err
	}
	r := parseManifest(t, rel.Manifest)
	r.manifest = rel.Manifest
	for _, h := range rel.Hooks {
		if testOnly(h) {
			r.testHooks = append(r.testHooks, h.Kind+"/"+h.Name)
			continue
		}
		r.manifest += "\n---\n" + h.Manifest
		hooks := parseManifest(t, h.Manifest)
		for key, obj := range hooks.objects {
			if _, dup := r.hooks[key]; dup {
				t.Fatalf("hook %s rendered twice", key)
			}
			r.hooks[key] = obj
		}
	}
	return r, nil
}

// testOnly tells whether a hook is helm test's alone (Helm reads "test-success" as "test"):
// the helm-operator never runs helm test, so it never creates such a hook, and the manager
// role grants nothing for one (chartpolicy's Object says the same of a template's hooks).
func testOnly(h *release.Hook) bool {
	for _, e := range h.Events {
		if e != release.HookTest {
			return false
		}
	}
	return len(h.Events) > 0
}

// mustInstall is install for values that must render.
func mustInstall(t *testing.T, chartName, release string, values map[string]any) *rendered {
	t.Helper()
	r, err := install(t, chartName, release, values)
	if err != nil {
		t.Fatalf("rendering %s with %v: %v", chartName, values, err)
	}
	return r
}

// rendered holds the objects of a release by "Kind/name": those of its manifest, and apart
// its hooks, which Helm creates around an install, upgrade, rollback or uninstall.
type rendered struct {
	objects map[string]runtime.Object
	// hooks are the hooks the operator runs: all but helm test's, listed in testHooks.
	hooks     map[string]runtime.Object
	testHooks []string
	// manifest is the YAML of the objects and hooks, as the operator applies them.
	manifest string
}

// all calls yield with every object the operator creates for the release: its manifest's
// objects, then its hooks. A hook is held to the rules of the other objects.
func (r *rendered) all(yield func(key string, obj runtime.Object) bool) {
	for _, objs := range []map[string]runtime.Object{r.objects, r.hooks} {
		for _, key := range slices.Sorted(maps.Keys(objs)) {
			if !yield(key, objs[key]) {
				return
			}
		}
	}
}

// strict decoding fails on fields the API types do not have: a typo in a template fails
// the tests rather than being dropped by the apiserver. An object of a kind client-go does not
// know (a custom resource, such as a ServiceMonitor) is kept unstructured.
var decoder = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

func parseManifest(t *testing.T, manifest string) *rendered {
	t.Helper()
	r := &rendered{objects: map[string]runtime.Object{}, hooks: map[string]runtime.Object{}}
	for _, doc := range releaseutil.SplitManifests(manifest) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		obj, gvk, err := decoder.Decode([]byte(doc), nil, nil)
		if runtime.IsNotRegisteredError(err) {
			u := &unstructured.Unstructured{}
			obj, gvk, err = unstructured.UnstructuredJSONScheme.Decode(mustJSON(t, doc), nil, u)
		}
		if err != nil {
			t.Fatalf("decoding rendered object: %v\n%s", err, doc)
		}
		name, err := meta.NewAccessor().Name(obj)
		if err != nil {
			t.Fatal(err)
		}
		key := gvk.Kind + "/" + name
		if _, dup := r.objects[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		r.objects[key] = obj
	}
	return r
}

func mustJSON(t *testing.T, doc string) []byte {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("rendered object: %v\n%s", err, doc)
	}
	return j
}

// keys lists the objects as "Kind/name", sorted.
func (r *rendered) keys() []string {
	var keys []string
	for k := range r.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// get returns the object "Kind/name" as a T, failing the test if it is missing.
func get[T runtime.Object](t *testing.T, r *rendered, key string) T {
	t.Helper()
	obj, ok := r.objects[key]
	if !ok {
		t.Fatalf("no %s among %v", key, r.keys())
	}
	typed, ok := obj.(T)
	if !ok {
		t.Fatalf("%s is a %T", key, obj)
	}
	return typed
}

// checkCommon reports every object of a release, hooks included, that breaks a rule all house
// charts follow: namespace, names, labels, and for workloads the pod's security and requests.
func checkCommon(t *testing.T, r *rendered, chartName, release string) {
	t.Helper()
	for key, obj := range r.all {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		kind := strings.Split(key, "/")[0]
		if clusterScoped[kind] {
			if m.GetNamespace() != "" {
				t.Errorf("%s: cluster-scoped object has namespace %q", key, m.GetNamespace())
			}
		} else if m.GetNamespace() != namespace {
			t.Errorf("%s: namespace %q, want the release namespace %q", key, m.GetNamespace(), namespace)
		}
		if errs := validation.IsDNS1123Subdomain(m.GetName()); len(errs) > 0 {
			t.Errorf("%s: bad name: %v", key, errs)
		}
		if kind == "Service" || kind == "StatefulSet" || kind == "Deployment" {
			if errs := validation.IsDNS1123Label(m.GetName()); len(errs) > 0 {
				t.Errorf("%s: bad name: %v", key, errs)
			}
		}
		checkLabels(t, key, m.GetLabels(), chartName, release)
		if spec := podTemplate(obj); spec != nil {
			checkLabels(t, key+" pod template", spec.Labels, chartName, release)
			checkPod(t, key, spec)
		}
	}
}

// checkAnyChart reports every object of a release, hooks included, that breaks a rule any
// chart meets (anyChartProblems).
func checkAnyChart(t *testing.T, r *rendered) {
	t.Helper()
	for key, obj := range r.all {
		for _, p := range anyChartProblems(key, obj) {
			t.Error(p)
		}
	}
}

// anyChartProblems are the rules any chart meets on an object it renders, "Kind/name": a
// namespaced object is in the release's namespace or in none (Helm puts it in the release's),
// a cluster-scoped one has none, and names and label values are valid.
func anyChartProblems(key string, obj runtime.Object) []string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", key, err)}
	}
	var problems []string
	kind := strings.Split(key, "/")[0]
	if clusterScoped[kind] {
		if m.GetNamespace() != "" {
			problems = append(problems, fmt.Sprintf("%s: cluster-scoped object has namespace %q", key, m.GetNamespace()))
		}
	} else if ns := m.GetNamespace(); ns != "" && ns != namespace {
		problems = append(problems, fmt.Sprintf("%s: namespace %q, not the release namespace %q", key, ns, namespace))
	}
	if errs := validation.IsDNS1123Subdomain(m.GetName()); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("%s: bad name: %v", key, errs))
	}
	for k, v := range m.GetLabels() {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			problems = append(problems, fmt.Sprintf("%s: label %s: %v", key, k, errs))
		}
	}
	return problems
}

func checkLabels(t *testing.T, where string, labels map[string]string, chartName, release string) {
	t.Helper()
	want := map[string]string{
		"app.kubernetes.io/name":       chartName,
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/managed-by": "Helm",
	}
	for k, v := range want {
		if labels[k] != v {
			t.Errorf("%s: label %s=%q, want %q", where, k, labels[k], v)
		}
	}
	for k, v := range labels {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			t.Errorf("%s: label %s: %v", where, k, errs)
		}
	}
}

// restricted is the strictest Pod Security Standard, at the newest version the library knows.
var restricted = psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}

var podSecurity = func() psapolicy.Evaluator {
	e, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		panic(err)
	}
	return e
}()

// checkPod checks a pod template against the restricted Pod Security Standard and requires
// CPU and memory requests of every container.
func checkPod(t *testing.T, where string, tmpl *corev1.PodTemplateSpec) {
	t.Helper()
	for _, res := range podSecurity.EvaluatePod(restricted, &tmpl.ObjectMeta, &tmpl.Spec) {
		if !res.Allowed {
			t.Errorf("%s: violates the restricted Pod Security Standard: %s: %s", where, res.ForbiddenReason, res.ForbiddenDetail)
		}
	}
	for _, c := range tmpl.Spec.Containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[name]; !ok || q.IsZero() {
				t.Errorf("%s: container %s has no %s request", where, c.Name, name)
			}
		}
	}
}

// podTemplate returns the pod template of a workload, or nil.
func podTemplate(obj runtime.Object) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	}
	return nil
}

// with returns a copy of values with the given keys set.
func with(values map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range values {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}
