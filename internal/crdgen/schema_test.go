package crdgen

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func raw(s string) *apiextv1.JSON { return &apiextv1.JSON{Raw: []byte(s)} }

func TestTranslateSchema(t *testing.T) {
	intOrString := []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}
	tests := []struct {
		name   string
		schema string
		want   apiextv1.JSONSchemaProps
	}{{
		name: "scalars keep description, default, bounds and enum",
		schema: `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": false, "required": ["name"], "properties": {
			"name": {"type": "string", "description": "The name.", "minLength": 1, "maxLength": 63, "pattern": "^[a-z]+$"},
			"replicas": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
			"ratio": {"type": "number", "minimum": 1, "maximum": 10, "default": 1.5, "multipleOf": 0.5},
			"mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
			"on": {"type": "boolean", "default": true}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Required: []string{"name"}, Properties: map[string]apiextv1.JSONSchemaProps{
			"name":     {Type: "string", Description: "The name.", MinLength: ptr[int64](1), MaxLength: ptr[int64](63), Pattern: "^[a-z]+$"},
			"replicas": {Type: "integer", Minimum: ptr(0.0), Maximum: ptr(100.0), Default: raw("1")},
			"ratio":    {Type: "number", Minimum: ptr(1.0), Maximum: ptr(10.0), Default: raw("1.5"), MultipleOf: ptr(0.5)},
			"mode":     {Type: "string", Enum: []apiextv1.JSON{*raw(`"A"`), *raw(`"B"`)}, Default: raw(`"A"`)},
			"on":       {Type: "boolean", Default: raw("true")},
		}},
	}, {
		name: "a quantity becomes int-or-string, its pattern and minimum kept",
		schema: `{"type": "object", "properties": {"capacity": {"anyOf": [{"type": "string"}, {"type": "integer"}],
			"pattern": "^[0-9]+(Gi)?$", "minimum": 0}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"capacity": {XIntOrString: true, AnyOf: intOrString, Pattern: "^[0-9]+(Gi)?$", Minimum: ptr(0.0)},
		}},
	}, {
		name: "maps, nested objects and lists",
		schema: `{"type": "object", "properties": {
			"nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
			"resources": {"type": "object", "additionalProperties": false, "properties": {
				"limits": {"type": "object", "additionalProperties": {"anyOf": [{"type": "integer"}, {"type": "string"}]}}}},
			"tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5, "uniqueItems": false}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"nodeSelector": {Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextv1.JSONSchemaProps{Type: "string"}}},
			"resources": {Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
				"limits": {Type: "object", AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextv1.JSONSchemaProps{XIntOrString: true, AnyOf: intOrString}}},
			}},
			"tags": {Type: "array", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{Type: "string"}}, MinItems: ptr[int64](1), MaxItems: ptr[int64](5)},
		}},
	}, {
		name:   "draft-07 exclusive bounds become OpenAPI flags",
		schema: `{"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"x": {Type: "number", Minimum: ptr(0.0), ExclusiveMinimum: true, Maximum: ptr(1.0), ExclusiveMaximum: true},
		}},
	}, {
		name: "CEL rules are copied, comments and titles handled",
		schema: `{"$comment": "a note", "title": "T", "type": "object", "properties": {"policy": {"type": "string",
			"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}`,
		want: apiextv1.JSONSchemaProps{Title: "T", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"policy": {Type: "string", XValidations: apiextv1.ValidationRules{{Rule: "self == oldSelf", Message: "immutable"}}},
		}},
	}, {
		name: "propertyNames' maxLength becomes a CEL rule on the keys, after the map's own rules",
		schema: `{"type": "object", "properties": {"labels": {"type": "object", "maxProperties": 8,
			"propertyNames": {"maxLength": 63, "$comment": "a label name"}, "additionalProperties": {"type": "string", "maxLength": 63},
			"x-kubernetes-validations": [{"rule": "size(self) > 0"}]}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"labels": {Type: "object", MaxProperties: ptr[int64](8),
				AdditionalProperties: &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: &apiextv1.JSONSchemaProps{Type: "string", MaxLength: ptr[int64](63)}},
				XValidations: apiextv1.ValidationRules{
					{Rule: "size(self) > 0"},
					{Rule: "self.all(k, size(k) <= 63)", Message: "keys must be no more than 63 characters"},
				}},
		}},
	}, {
		name:   "an exact large integer default stays exact",
		schema: `{"type": "object", "properties": {"bytes": {"type": "integer", "default": 9007199254740993}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"bytes": {Type: "integer", Default: raw("9007199254740993")},
		}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TranslateSchema([]byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("schema (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTranslateSchemaRejects(t *testing.T) {
	tests := []struct {
		name, schema, wantErr string
	}{
		{"unsupported keyword", `{"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}`,
			`values.schema.json#/properties/a: "oneOf": keyword not supported`},
		{"$ref", `{"type": "object", "properties": {"a": {"$ref": "#/definitions/x"}}}`,
			`#/properties/a: "$ref": keyword not supported`},
		{"format is not carried over", `{"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}`,
			`#/properties/a: "format": keyword not supported`},
		{"list of types", `{"type": "object", "properties": {"a": {"type": ["string", "null"]}}}`,
			`#/properties/a: "type": a list of types is not supported`},
		{"unknown type", `{"type": "object", "properties": {"a": {"type": "null"}}}`,
			`#/properties/a: "type": unknown type "null"`},
		{"missing type", `{"type": "object", "properties": {"a": {"description": "x"}}}`,
			`#/properties/a: "type" is required`},
		{"anyOf other than int-or-string", `{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}}}`,
			`#/properties/a: "anyOf": only [{"type": "integer"}, {"type": "string"}]`},
		{"anyOf with more in a branch", `{"type": "object", "properties": {"a": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "string"}]}}}`,
			`#/properties/a: "anyOf"`},
		{"type beside int-or-string", `{"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "integer"}, {"type": "string"}]}}}`,
			`#/properties/a: "type" cannot stand beside`},
		{"additionalProperties true", `{"type": "object", "additionalProperties": true}`,
			`#: "additionalProperties": true is not supported`},
		{"properties beside a map schema", `{"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}`,
			`cannot be combined`},
		{"uniqueItems", `{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}`,
			`"uniqueItems": only false is supported`},
		{"tuple items", `{"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}`,
			`"items": only a single schema is supported`},
		{"array without items", `{"type": "object", "properties": {"a": {"type": "array"}}}`,
			`#/properties/a: "type": "array" needs "items"`},
		{"properties on a string", `{"type": "object", "properties": {"a": {"type": "string", "properties": {}}}}`,
			`#/properties/a: "properties", "additionalProperties" and "required" need "type": "object"`},
		{"required but undeclared", `{"type": "object", "required": ["b"], "properties": {"a": {"type": "string"}}}`,
			`required property "b" is not declared`},
		{"both minimum forms", `{"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "exclusiveMinimum": 0}}}`,
			`"exclusiveMinimum": give either the inclusive or the exclusive bound`},
		{"negative length", `{"type": "object", "properties": {"a": {"type": "string", "maxLength": -1}}}`,
			`"maxLength": must be a non-negative integer`},
		{"bad pattern", `{"type": "object", "properties": {"a": {"type": "string", "pattern": "(("}}}`,
			`#/properties/a: "pattern": error parsing regexp`},
		{"misspelt CEL rule field", `{"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-validations": [{"rule": "true", "mesage": "x"}]}}}`,
			`"x-kubernetes-validations": must be a list of validation rules`},
		{"propertyNames with a pattern", `{"type": "object", "properties": {"a": {"type": "object", "additionalProperties": {"type": "string"},
			"propertyNames": {"maxLength": 3, "pattern": "^[a-z]+$"}}}}`, `#/properties/a: "propertyNames": "pattern": only {"maxLength": n} is supported`},
		{"propertyNames without maxLength", `{"type": "object", "properties": {"a": {"type": "object", "additionalProperties": {"type": "string"},
			"propertyNames": {}}}}`, `"propertyNames": only {"maxLength": n} is supported`},
		{"propertyNames without a map", `{"type": "object", "properties": {"a": {"type": "object", "additionalProperties": false,
			"propertyNames": {"maxLength": 3}}}}`, `#/properties/a: "propertyNames": needs an "additionalProperties" schema`},
		{"other draft", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`,
			`"$schema": only JSON Schema draft-07 is supported`},
		{"$schema below the root", `{"type": "object", "properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}}}`,
			`"$schema": allowed only at the root`},
		{"root not an object", `{"type": "string"}`, `the root must have "type": "object"`},
		{"not JSON", `{"type": `, `values.schema.json: unexpected EOF`},
		{"property name in the pointer is escaped", `{"type": "object", "properties": {"a/b": {"not": {}}}}`,
			`#/properties/a~1b: "not": keyword not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := TranslateSchema([]byte(tt.schema))
			if err == nil {
				t.Fatalf("want an error containing %q, got none", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}
