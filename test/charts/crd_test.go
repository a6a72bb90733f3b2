package charts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/crdgen"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

// The CRDs in config/crd/bases are exactly what hack/crdgen makes of the charts now, and
// config/crd/kustomization.yaml lists them all.
func TestCRDsUpToDate(t *testing.T) {
	files, err := crdgen.GenerateAll(filepath.Join(root, "watches.yaml"), filepath.Join(root, "helm-charts"))
	if err != nil {
		t.Fatal(err)
	}
	basesDir := filepath.Join(root, "config", "crd", "bases")
	var want []string
	for _, f := range files {
		want = append(want, f.Name)
		onDisk, err := os.ReadFile(filepath.Join(basesDir, f.Name))
		if err != nil {
			t.Errorf("%v: run make manifests", err)
			continue
		}
		if !bytes.Equal(onDisk, f.Data) {
			t.Errorf("config/crd/bases/%s differs from its chart: run make manifests", f.Name)
		}
	}
	entries, err := os.ReadDir(basesDir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("config/crd/bases holds %v, want %v: run make manifests", got, want)
	}

	var kustomization struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(root, "config", "crd", "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &kustomization); err != nil {
		t.Fatal(err)
	}
	listed := append([]string(nil), kustomization.Resources...)
	sort.Strings(listed)
	var wantListed []string
	for _, name := range want {
		wantListed = append(wantListed, "bases/"+name)
	}
	if strings.Join(listed, " ") != strings.Join(wantListed, " ") {
		t.Errorf("config/crd/kustomization.yaml lists %v, want %v", listed, wantListed)
	}
}

// crd is a generated CRD in the apiserver's internal form, with what validates its objects.
type crd struct {
	v1         *apiextv1.CustomResourceDefinition
	internal   *apiextensions.CustomResourceDefinition
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func loadCRD(t *testing.T, w watchfile.Watch) *crd {
	t.Helper()
	v1, err := crdgen.Generate(crdgen.ChartDir(filepath.Join(root, "helm-charts"), w.Chart), w.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	defaulted := v1.DeepCopy()
	apiextv1.SetObjectDefaults_CustomResourceDefinition(defaulted)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(defaulted, internal, nil); err != nil {
		t.Fatal(err)
	}
	internal.Status.StoredVersions = []string{w.Version}

	openAPI := internal.Spec.Validation
	if openAPI == nil {
		openAPI = internal.Spec.Versions[0].Schema
	}
	structural, err := structuralschema.NewStructural(openAPI.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(openAPI.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return &crd{v1: v1, internal: internal, structural: structural, schema: validator,
		cel: cel.NewValidator(structural, true, celconfig.PerCallLimit)}
}

// admit runs a custom resource through what the apiserver does on create (or update, with
// old): prune, default, validate against the schema and the CEL rules.
func (c *crd) admit(obj, old map[string]any) field.ErrorList {
	obj = runtime.DeepCopyJSON(obj)
	pruning.Prune(obj, c.structural, true)
	defaulting.Default(obj, c.structural)
	var errs field.ErrorList
	if old == nil {
		errs = apiservervalidation.ValidateCustomResource(nil, obj, c.schema)
	} else {
		old = runtime.DeepCopyJSON(old)
		defaulting.Default(old, c.structural)
		errs = apiservervalidation.ValidateCustomResourceUpdate(nil, obj, old, c.schema)
	}
	var oldObj any
	if old != nil {
		oldObj = old
	}
	celErrs, _ := c.cel.Validate(context.Background(), nil, c.structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
	return append(errs, celErrs...)
}

func (c *crd) newCR(name string, spec map[string]any) map[string]any {
	obj := map[string]any{
		"apiVersion": c.v1.Spec.Group + "/" + c.v1.Spec.Versions[0].Name,
		"kind":       c.v1.Spec.Names.Kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
	}
	if spec != nil {
		obj["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	return obj
}

// The apiserver would accept every generated CRD: structural schema, defaults that match
// it, CEL rules that compile within their cost, approved groups.
func TestCRDsAreValid(t *testing.T) {
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			c := loadCRD(t, w)
			if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), c.internal); len(errs) > 0 {
				t.Errorf("the apiserver would refuse the CRD: %v", errs.ToAggregate())
			}
		})
	}
}

// Samples pass admission unchanged, and the CRD applies the same defaults as values.yaml.
func TestSamplesAdmitted(t *testing.T) {
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			c := loadCRD(t, w)
			s := loadSample(t, w)
			if errs := c.admit(s.Object, nil); len(errs) > 0 {
				t.Errorf("sample refused: %v", errs.ToAggregate())
			}
			pruned := runtime.DeepCopyJSON(s.Object)
			pruning.Prune(pruned, c.structural, true)
			if !equalJSON(pruned, s.Object) {
				t.Errorf("the apiserver would drop fields of the sample: %v, pruned %v", s.Object, pruned)
			}
		})
	}
}

// The CRD's spec schema and the chart's values.schema.json agree on every case: what the
// apiserver admits, Helm accepts, and the reverse.
func TestCRDAgreesWithChartSchema(t *testing.T) {
	cases := map[string][]struct {
		spec  string
		valid bool
	}{
		"WarpdrivePool": {
			{"capacity: 100Gi", true},
			{"capacity: 1099511627776", true},
			{"capacity: 0", true}, // the chart's fail check refuses it later, at rendering
			{"capacity: 0Gi", true},
			{"capacity: 1.5Gi", true},
			{"capacity: 500m", true},
			{"capacity: 1e3", true},
			{"capacity: '+2Pi'", true},
			{"replicas: 1", false}, // capacity is required
			{"capacity: -1Gi", false},
			{"capacity: -1", false},
			{"capacity: 1.5", false},
			{"capacity: lots", false},
			{"capacity: 10GB", false},
			{"capacity: ''", false},
			{"capacity: true", false},
			{"{capacity: 1Gi, replicas: 1}", true},
			{"{capacity: 1Gi, replicas: 32}", true},
			{"{capacity: 1Gi, replicas: 0}", false},
			{"{capacity: 1Gi, replicas: 33}", false},
			{"{capacity: 1Gi, replicas: '3'}", false},
			{"{capacity: 1Gi, overcommitRatio: 1}", true},
			{"{capacity: 1Gi, overcommitRatio: 2.5}", true},
			{"{capacity: 1Gi, overcommitRatio: 10}", true},
			{"{capacity: 1Gi, overcommitRatio: 0.99}", false},
			{"{capacity: 1Gi, overcommitRatio: 10.5}", false},
			{"{capacity: 1Gi, reclaimPolicy: Retain}", true},
			{"{capacity: 1Gi, reclaimPolicy: Recycle}", false},
			{"{capacity: 1Gi, storageClassName: fast.pool-1}", true},
			{"{capacity: 1Gi, storageClassName: Fast}", false},
			{"{capacity: 1Gi, storageClassName: ''}", false},
			{"{capacity: 1Gi, storageClassName: '" + strings.Repeat("s", 254) + "'}", false},
			{"{capacity: 1Gi, image: 'a: b'}", true},
			{"{capacity: 1Gi, image: ''}", false},
			{"{capacity: 1Gi, image: '" + strings.Repeat("i", 1025) + "'}", false},
			{"{capacity: 1Gi, nodeSelector: {zone: a}}", true},
			{"{capacity: 1Gi, nodeSelector: {zone: 1}}", false},
			{"{capacity: 1Gi, resources: {limits: {cpu: 2, memory: 1Gi}, requests: {cpu: 500m}}}", true},
			{"{capacity: 1Gi, resources: {requests: {cpu: lots}}}", false},
			{"{capacity: 1Gi, resources: {requests: {cpu: -1}}}", false},
			{"{capacity: 1Gi, resources: {limits: []}}", false},
			// The bounds that keep a spec small (see TestSchemasBounded).
			{"capacity: '1" + strings.Repeat("0", 63) + "'", true},
			{"capacity: '1" + strings.Repeat("0", 64) + "'", false},
			{"{capacity: 1Gi, nodeSelector: " + flowMap(32, "zone", "a") + "}", true},
			{"{capacity: 1Gi, nodeSelector: " + flowMap(33, "zone", "a") + "}", false},
			{"{capacity: 1Gi, nodeSelector: {" + strings.Repeat("k", 317) + ": a}}", true},
			{"{capacity: 1Gi, nodeSelector: {" + strings.Repeat("k", 318) + ": a}}", false},
			{"{capacity: 1Gi, nodeSelector: {zone: " + strings.Repeat("v", 63) + "}}", true},
			{"{capacity: 1Gi, nodeSelector: {zone: " + strings.Repeat("v", 64) + "}}", false},
			// 16 with the cpu, memory and ephemeral-storage that values.yaml merges in.
			{"{capacity: 1Gi, resources: {requests: " + flowMap(13, "example.com/r", "1") + "}}", true},
			{"{capacity: 1Gi, resources: {limits: " + flowMap(17, "example.com/r", "1") + "}}", false},
			{"{capacity: 1Gi, resources: {limits: {" + strings.Repeat("r", 318) + ": 1}}}", false},
			{"{capacity: 1Gi, resources: {limits: {memory: '1" + strings.Repeat("0", 64) + "'}}}", false},
		},
		"AppService": {
			{"{deploymentName: x, replicas: 1}", true},
			{"{deploymentName: web-1}", true},
			{"{deploymentName: " + strings.Repeat("d", 63) + "}", true},
			{"{deploymentName: " + strings.Repeat("d", 64) + "}", false},
			{"{deploymentName: Web}", false},
			{"{deploymentName: web.app}", false},
			{"{deploymentName: -web}", false},
			{"{deploymentName: ''}", false},
			{"{replicas: 1}", false},
			{"{deploymentName: x, replicas: 0}", true},
			{"{deploymentName: x, replicas: 100}", true},
			{"{deploymentName: x, replicas: 101}", false},
			{"{deploymentName: x, replicas: -1}", false},
			{"{deploymentName: x, replicas: 1.5}", false},
			{"{deploymentName: x, replicas: three}", false},
		},
		"UnitedDeployment": {
			{"{deploymentName: x, replicas: 2}", true},
			{"{deploymentName: x}", true},
			{"{replicas: 2}", false},
			{"{deploymentName: x, replicas: 1.5}", false},
			{"{deploymentName: x, replicas: 101}", false},
		},
		"Guestbook": {
			{"{}", true},
			{"{foo: bar}", true},
			{"{replicas: 3, serviceType: NodePort, image: 'gb:1'}", true},
			{"{serviceType: LoadBalancer}", true},
			{"{serviceType: ExternalName}", false},
			{"{serviceType: clusterip}", false},
			{"{replicas: -1}", false},
			{"{foo: 1}", false},
			{"{foo: " + strings.Repeat("f", 1024) + "}", true},
			{"{foo: " + strings.Repeat("f", 1025) + "}", false},
		},
		"Memcached": {
			{"{size: 3}", true},
			{"{}", true},
			{"{size: 0}", true},
			{"{size: 100}", true},
			{"{size: 101}", false},
			{"{size: -3}", false},
			{"{size: 2.5}", false},
			{"{size: '3'}", false},
			{"{size: 3, resources: {requests: {memory: 64Mi}}}", true},
			{"{image: '" + strings.Repeat("i", 1024) + "'}", true},
			{"{image: '" + strings.Repeat("i", 1025) + "'}", false}, // a 1 MiB spec stops here
		},
	}
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			kindCases, ok := cases[w.Kind]
			if !ok {
				// A kind added with make add-kind has none until someone writes them; its
				// sample's admission is checked by TestSamplesAdmitted meanwhile.
				t.Skipf("no cases written for kind %s", w.Kind)
			}
			c := loadCRD(t, w)
			chrt := loadChart(t, strings.ToLower(w.Kind))
			for _, tc := range kindCases {
				spec := decodeYAML(t, tc.spec)
				crdErrs := c.admit(c.newCR("x", spec), nil)
				// The operator's path: values.yaml under the spec, then the schema.
				_, helmErr := chartutil.ToRenderValues(chrt, spec, chartutil.ReleaseOptions{Name: "x", Namespace: namespace}, nil)
				if (len(crdErrs) == 0) != tc.valid {
					t.Errorf("%s: CRD admits=%v, want %v (%v)", tc.spec, len(crdErrs) == 0, tc.valid, crdErrs.ToAggregate())
				}
				if (helmErr == nil) != tc.valid {
					t.Errorf("%s: chart schema accepts=%v, want %v (%v)", tc.spec, helmErr == nil, tc.valid, helmErr)
				}
			}
		})
	}
}

// The apiserver names the field it refuses, as the chart schema does.
func TestCRDErrorsNameTheField(t *testing.T) {
	byKind := map[string]watchfile.Watch{}
	for _, w := range watchList(t) {
		byKind[w.Kind] = w
	}
	tests := []struct{ kind, spec, field string }{
		{"AppService", "{deploymentName: Not_A_Name}", "spec.deploymentName"},
		{"AppService", "{replicas: 1}", "spec.deploymentName"},
		{"WarpdrivePool", "{capacity: lots}", "spec.capacity"},
		{"WarpdrivePool", "{capacity: 1Gi, reclaimPolicy: Recycle}", "spec.reclaimPolicy"},
		{"Memcached", "{size: -3}", "spec.size"},
		{"Guestbook", "{serviceType: ExternalName}", "spec.serviceType"},
	}
	for _, tt := range tests {
		c := loadCRD(t, byKind[tt.kind])
		errs := c.admit(c.newCR("x", decodeYAML(t, tt.spec)), nil)
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.field) {
			t.Errorf("%s %s: errors %v, want one naming %s", tt.kind, tt.spec, errs.ToAggregate(), tt.field)
		}
	}
}

// Names longer than Helm's 53-character limit on release names are refused at admission.
func TestCRDNameLengthRule(t *testing.T) {
	for _, w := range watchList(t) {
		t.Run(w.Kind, func(t *testing.T) {
			c := loadCRD(t, w)
			spec := loadSample(t, w).Spec
			if errs := c.admit(c.newCR(strings.Repeat("a", 53), spec), nil); len(errs) > 0 {
				t.Errorf("53 characters refused: %v", errs.ToAggregate())
			}
			errs := c.admit(c.newCR(strings.Repeat("a", 54), spec), nil)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "must be no more than 53 characters") {
				t.Errorf("54 characters: errors %v, want the 53-character rule", errs.ToAggregate())
			}
		})
	}
}

// A pool's reclaimPolicy cannot change: the StorageClass could not follow.
func TestCRDReclaimPolicyImmutable(t *testing.T) {
	var c *crd
	for _, w := range watchList(t) {
		if w.Kind == "WarpdrivePool" {
			c = loadCRD(t, w)
		}
	}
	old := c.newCR("pool", map[string]any{"capacity": "1Gi"}) // defaulted to Delete
	if errs := c.admit(c.newCR("pool", map[string]any{"capacity": "2Gi", "reclaimPolicy": "Delete"}), old); len(errs) > 0 {
		t.Errorf("changing capacity: %v", errs.ToAggregate())
	}
	errs := c.admit(c.newCR("pool", map[string]any{"capacity": "1Gi", "reclaimPolicy": "Retain"}), old)
	if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "reclaimPolicy cannot be changed") {
		t.Errorf("changing reclaimPolicy: errors %v, want the immutability rule", errs.ToAggregate())
	}
}

// flowMap is a YAML flow map of n entries prefix0: value, prefix1: value, ...
func flowMap(n int, prefix, value string) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf("%s%d: %q", prefix, i, value)
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

func equalJSON(a, b map[string]any) bool {
	x, _ := yaml.Marshal(a)
	y, _ := yaml.Marshal(b)
	return bytes.Equal(x, y)
}
