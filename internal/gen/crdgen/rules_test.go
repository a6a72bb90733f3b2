package crdgen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// x-kubernetes-validations in values.schema.json, at the root (the spec) and on a property,
// reach the CRD as they are; Helm's JSON Schema validator ignores the keyword, so the
// chart validates values as before.
func TestValidationRulesReachTheCRDAndHelmIgnoresThem(t *testing.T) {
	const schemaJSON = `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"x-kubernetes-validations": [{"rule": "has(self.size) == has(oldSelf.size)", "message": "size is set at creation"}],
		"properties": {
			"replicas": {"type": "integer", "default": 1},
			"size": {"type": "string", "maxLength": 3,
				"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "size is immutable"}]}}}`
	dir := writeChart(t, filepath.Join(t.TempDir(), "widget"), map[string]string{AnnotationPlural: "widgets"}, schemaJSON)
	crd, err := Generate(dir, widgetGVK)
	if err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if len(spec.XValidations) != 1 || spec.XValidations[0].Rule != "has(self.size) == has(oldSelf.size)" ||
		spec.XValidations[0].Message != "size is set at creation" {
		t.Errorf("spec rules: %+v", spec.XValidations)
	}
	if r := spec.Properties["size"].XValidations; len(r) != 1 || r[0].Rule != "self == oldSelf" || r[0].Message != "size is immutable" {
		t.Errorf("size rules: %+v", r)
	}

	chrt, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := chartutil.ValidateAgainstSchema(chrt, map[string]any{"replicas": 2, "size": "1Gi"}); err != nil {
		t.Errorf("Helm refused values its schema admits: %v", err)
	}
	// The schema is still in force for Helm: only the unknown keyword is skipped.
	if err := chartutil.ValidateAgainstSchema(chrt, map[string]any{"size": "1024Mi"}); err == nil {
		t.Error("Helm accepted a size longer than maxLength")
	}
}

// celValidator evaluates the CEL rules of crd as the apiserver does on create (old nil) or
// update.
type celValidator struct {
	structural *structuralschema.Structural
	validator  *cel.Validator
}

func newCELValidator(t *testing.T, crd *apiextv1.CustomResourceDefinition) *celValidator {
	t.Helper()
	v1 := crd.DeepCopy()
	apiextv1.SetObjectDefaults_CustomResourceDefinition(v1)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, internal, nil); err != nil {
		t.Fatal(err)
	}
	// With one version, the conversion moves its schema to the CRD-wide field.
	validation := internal.Spec.Validation
	if validation == nil {
		validation = internal.Spec.Versions[0].Schema
	}
	s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	return &celValidator{structural: s, validator: cel.NewValidator(s, true, celconfig.PerCallLimit)}
}

// A WarpdrivePool's storageClassName is fixed at creation: changing it would move the
// pool's books to another class and drop the bound claims of its own from them.
func TestPoolStorageClassNameImmutable(t *testing.T) {
	crd, err := Generate(filepath.Join("..", "..", "..", "helm-charts", "warpdrivepool"),
		schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1", Kind: "WarpdrivePool"})
	if err != nil {
		t.Fatal(err)
	}
	c := newCELValidator(t, crd)
	named := map[string]any{"capacity": "1Gi", "storageClassName": "fast"}
	unnamed := map[string]any{"capacity": "1Gi"}
	cases := []struct {
		name      string
		spec, old map[string]any
		want      string // "" admitted; otherwise a part of the error
	}{
		{"created with a class", named, nil, ""},
		{"created without", unnamed, nil, ""},
		{"other fields edited", map[string]any{"capacity": "2Gi", "storageClassName": "fast"}, named, ""},
		{"unset stays unset", map[string]any{"capacity": "2Gi"}, unnamed, ""},
		{"renamed", map[string]any{"capacity": "1Gi", "storageClassName": "slow"}, named, "storageClassName cannot be changed"},
		{"added", named, unnamed, "storageClassName cannot be added or removed after creation"},
		{"removed", unnamed, named, "storageClassName cannot be added or removed after creation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := c.validate(tc.spec, tc.old)
			switch {
			case tc.want == "" && got != "":
				t.Errorf("refused: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("errors %q, want one saying %q", got, tc.want)
			}
		})
	}
}

// validate returns the errors of the CEL rules for a pool of spec, created (oldSpec nil) or
// updated from oldSpec, as one string: "" when the rules admit it.
func (c *celValidator) validate(spec, oldSpec map[string]any) string {
	obj := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "tos.transwarp.io/v1alpha1", "kind": "WarpdrivePool",
			"metadata": map[string]any{"name": "pool", "namespace": "ns"}, "spec": spec}
	}
	var old any
	if oldSpec != nil {
		old = obj(oldSpec)
	}
	errs, _ := c.validator.Validate(context.Background(), nil, c.structural, obj(spec), old, celconfig.RuntimeCELCostBudget)
	if len(errs) == 0 {
		return ""
	}
	return errs.ToAggregate().Error()
}
