package crdgen

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// The charts under testdata/charts have the shapes of real charts: webinfo a small web
// service chart without values.schema.json, schemaful a draft-07 schema using what a
// structural schema cannot say, stackapp a Bitnami-style chart with a library chart and an
// aliased subchart vendored under charts/.
var testCharts = []string{"webinfo", "schemaful", "stackapp"}

func testChartGVK(chartName string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "charts.example.com", Version: "v1", Kind: strings.ToUpper(chartName[:1]) + chartName[1:]}
}

// apiserverCRD is a generated CRD as the apiserver holds it: validated, with its spec's
// structural schema and validator.
type apiserverCRD struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
}

func loadAPIServerCRD(t *testing.T, crd *apiextv1.CustomResourceDefinition) *apiserverCRD {
	t.Helper()
	v1 := crd.DeepCopy()
	apiextv1.SetObjectDefaults_CustomResourceDefinition(v1)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, internal, nil); err != nil {
		t.Fatal(err)
	}
	internal.Status.StoredVersions = []string{v1.Spec.Versions[0].Name}
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		t.Fatalf("the apiserver would refuse the CRD: %v", errs.ToAggregate())
	}
	validation := internal.Spec.Validation
	if validation == nil {
		validation = internal.Spec.Versions[0].Schema
	}
	s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return &apiserverCRD{structural: s, validator: validator}
}

// admit runs spec through what the apiserver does to a new custom resource: prune unknown
// fields and nulls, default, validate. It returns the spec stored and the errors.
func (c *apiserverCRD) admit(spec map[string]any) (map[string]any, string) {
	obj := map[string]any{
		"apiVersion": "charts.example.com/v1", "kind": "X",
		"metadata": map[string]any{"name": "x", "namespace": "ns"},
		"spec":     runtime.DeepCopyJSONValue(normalize(spec)),
	}
	pruning.Prune(obj, c.structural, true)
	defaulting.PruneNonNullableNullsWithoutDefaults(obj, c.structural)
	defaulting.Default(obj, c.structural)
	errs := apiservervalidation.ValidateCustomResource(nil, obj, c.validator)
	stored, _ := obj["spec"].(map[string]any)
	if len(errs) == 0 {
		return stored, ""
	}
	return stored, errs.ToAggregate().Error()
}

// normalize turns values as Helm reads them (float64 numbers) into JSON as the apiserver
// decodes it (int64 for integers).
func normalize(v map[string]any) map[string]any {
	data, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(data, &out); err != nil {
		panic(err)
	}
	return runtime.DeepCopyJSON(out)
}

// Every values file a chart ships (values.yaml, values-*.yaml, ci/*.yaml) passes the
// apiserver's admission as a spec, every key of it kept, nulls included.
func TestTestChartsValuesFilesSurviveAdmission(t *testing.T) {
	for _, name := range testCharts {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("testdata", "charts", name)
			crd, err := Generate(dir, testChartGVK(name))
			if err != nil {
				t.Fatal(err)
			}
			c := loadAPIServerCRD(t, crd)
			chrt, err := loader.LoadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			files, err := chartValuesFiles(dir, chrt)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) < 2 {
				t.Fatalf("the test chart ships %d values files, want values.yaml and more", len(files))
			}
			for _, f := range files {
				if chrt.Schema != nil {
					// The test data is right: the chart's own schema accepts the file.
					if err := helmAccepts(chrt, f.values); err != nil {
						t.Errorf("%s: the chart's schema refuses it: %v", f.name, err)
					}
				}
				stored, errs := c.admit(f.values)
				if errs != "" {
					t.Errorf("%s: refused: %s", f.name, errs)
				}
				if want := normalize(f.values); !keeps(stored, want) {
					t.Errorf("%s: the apiserver would change the spec:\n got %v\nwant %v", f.name, stored, want)
				}
			}
		})
	}
}

// helmAccepts tells whether Helm would install the chart with values: merged over
// values.yaml, then validated against the chart's and its subcharts' schemas.
func helmAccepts(chrt *chart.Chart, values map[string]any) error {
	_, err := chartutil.ToRenderValues(chrt, runtime.DeepCopyJSON(values), chartutil.ReleaseOptions{Name: "x", Namespace: "ns"}, nil)
	return err
}

// Specs that the schemaful chart's schema accepts, exercising each construct the CRD keeps
// open, pass admission unchanged; the CRD still refuses what both refuse where it can say so.
func TestSchemafulSpecsAgreeWithHelm(t *testing.T) {
	dir := filepath.Join("testdata", "charts", "schemaful")
	crd, err := Generate(dir, testChartGVK("schemaful"))
	if err != nil {
		t.Fatal(err)
	}
	c := loadAPIServerCRD(t, crd)
	chrt, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	accepted := []string{
		"{image: {repository: x, tag: null}}",
		"{port: 443, timeout: 10}",
		"{port: https, timeout: 250ms}",
		"{env: {A: a, B: 2, C: true}}",
		"{podLabels: {app.kubernetes.io/name: gw}}",
		"{routes: [{path: /a, backend: {service: s, port: 8080}}, {path: /b, redirect: 'https://x'}]}",
		"{tree: {name: r, children: [{name: a, children: [{name: b, children: [{name: c, extra: 1}]}]}]}}",
		"{extra: 5}",
		"{extra: {deep: {list: [1, {a: b}]}}}",
		"{upstream: null, logFormat: text}",
		"{tls: {enabled: true, secretName: s}}",
		"{resources: {limits: {cpu: 2}, requests: {memory: 1Gi}, claims: [{name: gpu}]}}",
		"{apiVersionPin: v2, x-team: edge}",
	}
	for _, spec := range accepted {
		var values map[string]any
		if err := yaml.Unmarshal([]byte(spec), &values); err != nil {
			t.Fatal(err)
		}
		if err := helmAccepts(chrt, values); err != nil {
			t.Errorf("%s: Helm refuses it: %v", spec, err)
			continue
		}
		stored, errs := c.admit(values)
		if errs != "" {
			t.Errorf("%s: refused: %s", spec, errs)
		}
		if want := normalize(values); !keeps(stored, want) {
			t.Errorf("%s: the apiserver would change it to %v", spec, stored)
		}
	}
	for _, spec := range []string{"{replicas: -1}", "{mode: other}", "{image: nginx}", "{port: true}", "{apiVersionPin: v3}"} {
		var values map[string]any
		if err := yaml.Unmarshal([]byte(spec), &values); err != nil {
			t.Fatal(err)
		}
		if helmAccepts(chrt, values) == nil {
			t.Errorf("%s: Helm accepts it", spec)
		}
		if _, errs := c.admit(values); errs == "" {
			t.Errorf("%s: admitted", spec)
		}
	}
}

// keeps tells whether stored holds every value of want, as it is (the defaults of the CRD,
// which agree with values.yaml, may add more).
func keeps(stored, want any) bool {
	wm, isMap := want.(map[string]any)
	if !isMap {
		return reflect.DeepEqual(stored, want)
	}
	sm, ok := stored.(map[string]any)
	if !ok {
		return false
	}
	for k, w := range wm {
		if s, ok := sm[k]; !ok || !keeps(s, w) {
			return false
		}
	}
	return true
}
