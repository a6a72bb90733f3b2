package crdgen

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		schema: `{"type": "object", "additionalProperties": false, "properties": {"capacity": {"anyOf": [{"type": "string"}, {"type": "integer"}],
			"pattern": "^[0-9]+(Gi)?$", "minimum": 0}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"capacity": {XIntOrString: true, AnyOf: intOrString, Pattern: "^[0-9]+(Gi)?$", Minimum: ptr(0.0)},
		}},
	}, {
		name: "maps, nested objects and lists",
		schema: `{"type": "object", "additionalProperties": false, "properties": {
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
		schema: `{"type": "object", "additionalProperties": false, "properties": {"x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}}}`,
		want: apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"x": {Type: "number", Minimum: ptr(0.0), ExclusiveMinimum: true, Maximum: ptr(1.0), ExclusiveMaximum: true},
		}},
	}, {
		name: "CEL rules are copied, comments and titles handled",
		schema: `{"$comment": "a note", "title": "T", "type": "object", "additionalProperties": false, "properties": {"policy": {"type": "string",
			"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "immutable"}]}}}`,
		want: apiextv1.JSONSchemaProps{Title: "T", Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
			"policy": {Type: "string", XValidations: apiextv1.ValidationRules{{Rule: "self == oldSelf", Message: "immutable"}}},
		}},
	}, {
		name: "propertyNames' maxLength becomes a CEL rule on the keys, after the map's own rules",
		schema: `{"type": "object", "additionalProperties": false, "properties": {"labels": {"type": "object", "maxProperties": 8,
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
		schema: `{"type": "object", "additionalProperties": false, "properties": {"bytes": {"type": "integer", "default": 9007199254740993}}}`,
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

// What a structural schema cannot say is kept open, never stricter than the chart's schema;
// every result is a schema the apiserver accepts.
func TestTranslateSchemaKeepsOpen(t *testing.T) {
	const open = `{"nullable":true,"x-kubernetes-preserve-unknown-fields":true}`
	const intOrString = `"anyOf":[{"type":"integer"},{"type":"string"}],"x-kubernetes-int-or-string":true`
	tests := []struct {
		name, schema string
		want         string // the schema of property a, as JSON
	}{
		{"$ref to definitions is inlined; draft-07 ignores its siblings but the description",
			`{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"n": {"type": "string", "maxLength": 3}},
			"properties": {"a": {"$ref": "#/definitions/n", "description": "A.", "minLength": 1}}}`,
			`{"description":"A.","type":"string","maxLength":3}`},
		{"$ref to $defs: siblings apply under 2020-12",
			`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"n": {"type": "string", "maxLength": 3}},
			"properties": {"a": {"$ref": "#/$defs/n", "minLength": 1}}}`,
			`{"type":"string","maxLength":3,"minLength":1}`},
		{"a recursive $ref is open below its first expansion",
			`{"definitions": {"node": {"type": "object", "additionalProperties": false, "properties": {"next": {"$ref": "#/definitions/node"}}}},
			"properties": {"a": {"$ref": "#/definitions/node"}}}`,
			`{"type":"object","properties":{"next":` + open + `}}`},
		{"a remote $ref is open", `{"properties": {"a": {"$ref": "https://example.com/s.json#/x"}}}`, open},
		{"a type list with null is nullable", `{"properties": {"a": {"type": ["string", "null"]}}}`,
			`{"type":"string","nullable":true}`},
		{"integer and string are an int-or-string", `{"properties": {"a": {"type": ["integer", "string"]}}}`,
			`{` + intOrString + `}`},
		{"integer and number are a number", `{"properties": {"a": {"type": ["integer", "number"]}}}`, `{"type":"number"}`},
		{"other type lists are open", `{"properties": {"a": {"type": ["string", "boolean"], "description": "A."}}}`,
			`{"description":"A.","nullable":true,"x-kubernetes-preserve-unknown-fields":true}`},
		{"anyOf with a null branch", `{"properties": {"a": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}}}`,
			`{"type":"integer","nullable":true,"minimum":1}`},
		{"oneOf of an integer and a string", `{"properties": {"a": {"oneOf": [{"type": "string", "pattern": "^[0-9]+m$"}, {"type": "integer"}]}}}`,
			`{` + intOrString + `}`},
		{"oneOf of other types is open", `{"properties": {"a": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}}}`, open},
		{"oneOf of one type", `{"properties": {"a": {"oneOf": [{"type": "string", "maxLength": 3}, {"type": "string", "pattern": "^x"}]}}}`,
			`{"type":"string"}`},
		{"oneOf beside a type only narrows it", `{"properties": {"a": {"type": "object", "additionalProperties": false,
			"properties": {"b": {"type": "string"}, "c": {"type": "string"}}, "oneOf": [{"required": ["b"]}, {"required": ["c"]}]}}}`,
			`{"type":"object","properties":{"b":{"type":"string"},"c":{"type":"string"}}}`},
		{"allOf merges properties and required", `{"properties": {"a": {"allOf": [
			{"type": "object", "required": ["b"], "properties": {"b": {"type": "string"}}},
			{"required": ["c"], "properties": {"c": {"type": "integer"}, "b": {"maxLength": 2}}}]}}}`,
			`{"type":"object","required":["b","c"],"properties":{"b":{"type":"string","maxLength":2},"c":{"type":"integer"}},"x-kubernetes-preserve-unknown-fields":true}`},
		{"one pattern alone is a map", `{"properties": {"a": {"type": "object", "additionalProperties": false,
			"patternProperties": {"^[a-z]+$": {"type": "integer"}}}}}`,
			`{"type":"object","additionalProperties":{"type":"integer"}}`},
		{"patterns beside properties keep unknown fields", `{"properties": {"a": {"type": "object", "additionalProperties": false,
			"properties": {"b": {"type": "string"}}, "patternProperties": {"^x-": {"type": "string"}}}}}`,
			`{"type":"object","properties":{"b":{"type":"string"}},"x-kubernetes-preserve-unknown-fields":true}`},
		{"additionalProperties true keeps unknown fields", `{"properties": {"a": {"type": "object", "additionalProperties": true}}}`,
			`{"type":"object","x-kubernetes-preserve-unknown-fields":true}`},
		{"an additionalProperties schema beside properties keeps unknown fields", `{"properties": {"a": {"type": "object",
			"properties": {"b": {"type": "string"}}, "additionalProperties": {"type": "integer"}}}}`,
			`{"type":"object","properties":{"b":{"type":"string"}},"x-kubernetes-preserve-unknown-fields":true}`},
		{"const is a one-value enum", `{"properties": {"a": {"type": "string", "const": "v1"}}}`, `{"type":"string","enum":["v1"]}`},
		{"an enum admitting null is dropped", `{"properties": {"a": {"type": ["string", "null"], "enum": ["x", null]}}}`,
			`{"type":"string","nullable":true}`},
		{"an untyped enum of strings is a string", `{"properties": {"a": {"enum": ["x", "y"]}}}`, `{"type":"string","enum":["x","y"]}`},
		{"narrowing keywords and annotations are dropped", `{"properties": {"a": {"type": "string", "format": "email", "not": {"const": ""},
			"if": {"minLength": 3}, "then": {"maxLength": 9}, "else": {"maxLength": 2}, "examples": ["a@b.c"], "readOnly": true,
			"deprecated": false, "x-ui-widget": "email", "$comment": "c"}}}`,
			`{"type":"string"}`},
		{"uniqueItems, tuples and prefixItems", `{"properties": {"a": {"type": "array", "items": [{"type": "string"}], "uniqueItems": true}}}`,
			`{"type":"array","items":` + open + `}`},
		{"an array without items", `{"properties": {"a": {"type": "array", "maxItems": 3}}}`,
			`{"type":"array","maxItems":3,"items":` + open + `}`},
		{"draft-04's boolean exclusive bounds", `{"$schema": "http://json-schema.org/draft-04/schema#",
			"properties": {"a": {"type": "number", "minimum": 0, "exclusiveMinimum": true, "maximum": 1, "exclusiveMaximum": false}}}`,
			`{"type":"number","maximum":1,"minimum":0,"exclusiveMinimum":true}`},
		{"both bound forms: the stricter is kept", `{"properties": {"a": {"type": "integer", "minimum": 1, "exclusiveMinimum": 5,
			"maximum": 10, "exclusiveMaximum": 20}}}`,
			`{"type":"integer","maximum":10,"minimum":5,"exclusiveMinimum":true}`},
		{"no type is open", `{"properties": {"a": {"description": "A.", "minLength": 3}}}`,
			`{"description":"A.","nullable":true,"x-kubernetes-preserve-unknown-fields":true}`},
		{"no type with properties keeps them", `{"properties": {"a": {"properties": {"b": {"type": "string"}}}}}`,
			`{"nullable":true,"properties":{"b":{"type":"string"}},"x-kubernetes-preserve-unknown-fields":true}`},
		{"a required property that would be pruned is kept open", `{"properties": {"a": {"type": "object",
			"additionalProperties": false, "required": ["b"], "properties": {"c": {"type": "string"}}}}}`,
			`{"type":"object","required":["b"],"properties":{"b":` + open + `,"c":{"type":"string"}}}`},
		{"the schema false is open", `{"properties": {"a": false}}`, open},
		{"a default of another type is dropped", `{"properties": {"a": {"type": "integer", "default": "1"}}}`, `{"type":"integer"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := TranslateSchema([]byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			a, ok := got.Properties["a"]
			if !ok {
				t.Fatalf("no property a in %+v", got)
			}
			data, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			var gotJSON, wantJSON any
			if err := json.Unmarshal(data, &gotJSON); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &wantJSON); err != nil {
				t.Fatalf("bad want: %v", err)
			}
			if diff := cmp.Diff(wantJSON, gotJSON); diff != "" {
				t.Errorf("property a (-want +got):\n%s", diff)
			}
			loadAPIServerCRD(t, specCRD(got))
		})
	}
}

// specCRD is a CRD whose spec has the schema spec.
func specCRD(spec *apiextv1.JSONSchemaProps) *apiextv1.CustomResourceDefinition {
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextv1.NamespaceScoped,
			Versions: []apiextv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{"spec": *spec}}}}},
		},
	}
}

// values.yaml relaxes the schema where Helm reads the values merged over it: a required
// property it gives is not required of the spec, and only the defaults it agrees with are
// applied by the CRD.
func TestTranslateValuesSchemaWithValuesYAML(t *testing.T) {
	const schemaJSON = `{"type": "object", "required": ["image", "size"], "properties": {
		"image": {"type": "object", "required": ["repository", "tag"], "properties": {
			"repository": {"type": "string", "default": "example/app"}, "tag": {"type": "string", "default": "1.0"}}},
		"size": {"type": "integer"},
		"mode": {"type": "string", "default": "fast"},
		"items": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string", "default": "x"}}}}}}`
	values := map[string]any{"image": map[string]any{"repository": "example/app", "tag": "2.0"}, "mode": nil}
	got, err := translateValuesSchema([]byte(schemaJSON), values)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Required, ",") != "size" {
		t.Errorf("spec requires %v, want only size (values.yaml gives image)", got.Required)
	}
	image := got.Properties["image"]
	if image.Required != nil {
		t.Errorf("image requires %v: values.yaml gives both", image.Required)
	}
	if d := image.Properties["repository"].Default; d == nil || string(d.Raw) != `"example/app"` {
		t.Errorf("repository default %v, want values.yaml's", d)
	}
	if d := image.Properties["tag"].Default; d != nil {
		t.Errorf("tag default %s: values.yaml says 2.0, so the schema's 1.0 must not be written into specs", d.Raw)
	}
	if d := got.Properties["mode"].Default; d != nil {
		t.Errorf("mode default %s: values.yaml has none", d.Raw)
	}
	item := got.Properties["items"].Items.Schema
	if strings.Join(item.Required, ",") != "name" || item.Properties["name"].Default != nil {
		t.Errorf("an item is no default of values.yaml: %+v", item)
	}
}

// Errors remain for a file that is no schema, which Helm could not use either.
func TestTranslateSchemaRejects(t *testing.T) {
	tests := []struct {
		name, schema, wantErr string
	}{
		{"not JSON", `{"type": `, `values.schema.json: unexpected EOF`},
		{"two values", `{} {}`, `more than one JSON value`},
		{"root not an object", `{"type": "string"}`, `the root must have "type": "object"`},
		{"unknown type", `{"properties": {"a": {"type": "nothing"}}}`, `#/properties/a: "type": unknown type "nothing"`},
		{"negative length", `{"properties": {"a": {"type": "string", "maxLength": -1}}}`, `"maxLength": must be a non-negative integer`},
		{"bad pattern", `{"properties": {"a": {"type": "string", "pattern": "(("}}}`, `#/properties/a: "pattern": error parsing regexp`},
		{"misspelt CEL rule field", `{"properties": {"a": {"type": "string", "x-kubernetes-validations": [{"rule": "true", "mesage": "x"}]}}}`,
			`"x-kubernetes-validations": must be a list of validation rules`},
		{"$ref to nowhere", `{"properties": {"a": {"$ref": "#/definitions/x"}}}`, `#/properties/a: "$ref": #/definitions/x is not in the file`},
		{"property name in the pointer is escaped", `{"properties": {"a/b": {"type": "string", "minLength": "1"}}}`,
			`#/properties/a~1b: "minLength": must be a non-negative integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := TranslateSchema([]byte(tt.schema))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// status.schema.json, the project's own contract with the sidecar, is translated strictly:
// what the CRD cannot say exactly is an error.
func TestStatusSchemaRejects(t *testing.T) {
	tests := []struct {
		name, schema, wantErr string
	}{
		{"unsupported keyword", `{"type": "object", "properties": {"a": {"oneOf": [{"type": "string"}]}}}`,
			`status.schema.json#/properties/a: "oneOf": only [{"type": "integer"}, {"type": "string"}]`},
		{"$ref", `{"type": "object", "properties": {"a": {"$ref": "#/definitions/x", "type": "string"}}}`,
			`#/properties/a: "$ref": keyword not supported`},
		{"format is not carried over", `{"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}`,
			`#/properties/a: "format": keyword not supported`},
		{"list of types", `{"type": "object", "properties": {"a": {"type": ["string", "null"]}}}`,
			`#/properties/a: "type": a list of types is not supported`},
		{"null type", `{"type": "object", "properties": {"a": {"type": "null"}}}`, `#/properties/a: "type": unknown type "null"`},
		{"missing type", `{"type": "object", "properties": {"a": {"description": "x"}}}`, `#/properties/a: "type" is required`},
		{"anyOf other than int-or-string", `{"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "boolean"}]}}}`,
			`#/properties/a: "anyOf": only [{"type": "integer"}, {"type": "string"}]`},
		{"type beside int-or-string", `{"type": "object", "properties": {"a": {"type": "string", "anyOf": [{"type": "integer"}, {"type": "string"}]}}}`,
			`#/properties/a: "type" cannot stand beside`},
		{"additionalProperties true", `{"type": "object", "additionalProperties": true}`, `#: "additionalProperties": true is not supported`},
		{"properties beside a map schema", `{"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}`,
			`cannot be combined`},
		{"uniqueItems", `{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}}`,
			`"uniqueItems": only false is supported`},
		{"tuple items", `{"type": "object", "properties": {"a": {"type": "array", "items": [{"type": "string"}]}}}`,
			`"items": only a single schema is supported`},
		{"array without items", `{"type": "object", "properties": {"a": {"type": "array"}}}`, `#/properties/a: "type": "array" needs "items"`},
		{"properties on a string", `{"type": "object", "properties": {"a": {"type": "string", "properties": {}}}}`,
			`#/properties/a: "properties", "additionalProperties" and "required" need "type": "object"`},
		{"required but undeclared", `{"type": "object", "required": ["b"], "properties": {"a": {"type": "string"}}}`,
			`required property "b" is not declared`},
		{"both minimum forms", `{"type": "object", "properties": {"a": {"type": "integer", "minimum": 1, "exclusiveMinimum": 0}}}`,
			`"exclusiveMinimum": give either the inclusive or the exclusive bound`},
		{"propertyNames with a pattern", `{"type": "object", "properties": {"a": {"type": "object", "additionalProperties": {"type": "string"},
			"propertyNames": {"maxLength": 3, "pattern": "^[a-z]+$"}}}}`, `#/properties/a: "propertyNames": "pattern": only {"maxLength": n} is supported`},
		{"propertyNames without a map", `{"type": "object", "properties": {"a": {"type": "object", "additionalProperties": false,
			"propertyNames": {"maxLength": 3}}}}`, `#/properties/a: "propertyNames": needs an "additionalProperties" schema`},
		{"other draft", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`,
			`"$schema": only JSON Schema draft-07 is supported`},
		{"$schema below the root", `{"type": "object", "properties": {"a": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "string"}}}`,
			`"$schema": allowed only at the root`},
		{"root not an object", `{"type": "string"}`, `the root must have "type": "object" (it is the status)`},
		{"property name in the pointer is escaped", `{"type": "object", "properties": {"a/b": {"type": "string", "not": {}}}}`,
			`#/properties/a~1b: "not": keyword not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := translateStatusSchema([]byte(tt.schema))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
