package crdgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TranslateSchema turns a chart's values.schema.json (JSON Schema draft-07) into the
// structural OpenAPI v3 schema of a CRD's spec.
//
// It supports the subset of draft-07 that has the same meaning in both places, so that the
// chart and the apiserver accept the same values. Anything else is an error naming where
// it stands, rather than a schema that silently means something else in the CRD:
//   - "additionalProperties": false is dropped: the apiserver prunes unknown fields instead.
//   - "anyOf": [{"type": "integer"}, {"type": "string"}] (a quantity) becomes
//     x-kubernetes-int-or-string; "pattern", "minimum" and the like beside it apply to the
//     string or the integer alone in both worlds.
//   - "x-kubernetes-validations" (ignored by JSON Schema) is copied, for what only the
//     apiserver can check, such as immutability.
//   - "propertyNames": {"maxLength": n} on a map becomes the CEL rule
//     self.all(k, size(k) <= n), as structural schemas have no propertyNames; both count
//     characters (code points). Only maxLength is supported: a pattern on every key would
//     cost the apiserver's CEL budget more than it allows.
func TranslateSchema(schemaJSON []byte) (*apiextv1.JSONSchemaProps, error) {
	return translateFile("values.schema.json", "the spec", schemaJSON)
}

// translateFile translates the schema file name, the schema of what, naming the file in errors.
func translateFile(name, what string, schemaJSON []byte) (*apiextv1.JSONSchemaProps, error) {
	dec := json.NewDecoder(bytes.NewReader(schemaJSON))
	dec.UseNumber() // keep integers exact for defaults and enums
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", name)
	}
	root, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the schema must be a JSON object", name)
	}
	out, err := translate(root, name+"#", true)
	if err != nil {
		return nil, err
	}
	if out.Type != "object" {
		return nil, fmt.Errorf(`%s#: the root must have "type": "object" (it is %s)`, name, what)
	}
	return out, nil
}

// draft07 are the spellings of the one dialect this translator understands.
var draft07 = map[string]bool{
	"http://json-schema.org/draft-07/schema#": true,
	"http://json-schema.org/draft-07/schema":  true,
}

var knownTypes = map[string]bool{
	"object": true, "array": true, "string": true, "integer": true, "number": true, "boolean": true,
}

func translate(in map[string]any, path string, isRoot bool) (*apiextv1.JSONSchemaProps, error) {
	out := &apiextv1.JSONSchemaProps{}
	fail := func(key string, err error) error {
		return fmt.Errorf("%s: %q: %w", path, key, err)
	}
	var minimum, exclusiveMinimum, maximum, exclusiveMaximum *float64
	var keyRule *apiextv1.ValidationRule

	// Sorted, so that the first error reported is the same from run to run.
	for _, key := range sortedKeys(in) {
		v := in[key]
		var err error
		switch key {
		case "$schema":
			if !isRoot {
				err = errors.New("allowed only at the root")
			} else if s, _ := v.(string); !draft07[s] {
				err = fmt.Errorf("only JSON Schema draft-07 is supported, got %v", v)
			}
		case "$comment":
			// A note to the schema's readers: no meaning to keep.
		case "title":
			out.Title, err = asString(v)
		case "description":
			out.Description, err = asString(v)
		case "type":
			out.Type, err = asString(v)
			if err == nil && !knownTypes[out.Type] {
				err = fmt.Errorf("unknown type %q", out.Type)
			}
			if _, isList := v.([]any); isList {
				err = errors.New("a list of types is not supported: CRD schemas have one type per field")
			}
		case "default":
			out.Default, err = asJSON(v)
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				err = errors.New("must be a non-empty list")
			}
			for _, e := range list {
				raw, jerr := asJSON(e)
				if jerr != nil {
					err = jerr
					break
				}
				out.Enum = append(out.Enum, *raw)
			}
		case "minimum":
			minimum, err = asFloat(v)
		case "maximum":
			maximum, err = asFloat(v)
		case "exclusiveMinimum":
			exclusiveMinimum, err = asFloat(v)
		case "exclusiveMaximum":
			exclusiveMaximum, err = asFloat(v)
		case "multipleOf":
			out.MultipleOf, err = asFloat(v)
		case "minLength":
			out.MinLength, err = asCount(v)
		case "maxLength":
			out.MaxLength, err = asCount(v)
		case "minItems":
			out.MinItems, err = asCount(v)
		case "maxItems":
			out.MaxItems, err = asCount(v)
		case "minProperties":
			out.MinProperties, err = asCount(v)
		case "maxProperties":
			out.MaxProperties, err = asCount(v)
		case "pattern":
			out.Pattern, err = asString(v)
			if err == nil {
				// Both Helm's validator and the apiserver use Go's regexp syntax.
				_, err = regexp.Compile(out.Pattern)
			}
		case "required":
			out.Required, err = asStrings(v)
		case "properties":
			out.Properties, err = translateProperties(v, path)
		case "additionalProperties":
			out.AdditionalProperties, err = translateAdditional(v, path)
		case "items":
			sub, ok := v.(map[string]any)
			if !ok {
				err = errors.New("only a single schema is supported (not a list or a boolean)")
				break
			}
			var item *apiextv1.JSONSchemaProps
			if item, err = translate(sub, path+"/items", false); err == nil {
				out.Items = &apiextv1.JSONSchemaPropsOrArray{Schema: item}
			}
		case "uniqueItems":
			if b, ok := v.(bool); !ok || b {
				err = errors.New("only false is supported: CRD schemas forbid uniqueItems")
			}
		case "anyOf":
			if !isIntOrString(v) {
				err = errors.New(`only [{"type": "integer"}, {"type": "string"}] (an int-or-string such as a quantity) is supported`)
				break
			}
			out.XIntOrString = true
			out.AnyOf = []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}
		case "propertyNames":
			keyRule, err = translatePropertyNames(v)
		case "x-kubernetes-validations":
			out.XValidations, err = asValidationRules(v)
		default:
			err = errors.New("keyword not supported by hack/crdgen")
		}
		if err != nil {
			return nil, fail(key, err)
		}
	}

	// Draft-07's exclusive bounds are numbers; OpenAPI v3's are flags on minimum/maximum.
	var err error
	if out.Minimum, out.ExclusiveMinimum, err = bound(minimum, exclusiveMinimum); err != nil {
		return nil, fail("exclusiveMinimum", err)
	}
	if out.Maximum, out.ExclusiveMaximum, err = bound(maximum, exclusiveMaximum); err != nil {
		return nil, fail("exclusiveMaximum", err)
	}
	if keyRule != nil {
		if out.AdditionalProperties == nil || out.AdditionalProperties.Schema == nil {
			return nil, fail("propertyNames", errors.New(`needs an "additionalProperties" schema: only a map has free keys`))
		}
		out.XValidations = append(out.XValidations, *keyRule)
	}
	if err := checkStructural(out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// checkStructural reports what the apiserver would refuse in a CRD, or what would give a
// field a different meaning there than in the chart.
func checkStructural(s *apiextv1.JSONSchemaProps) error {
	switch {
	case s.XIntOrString && s.Type != "":
		return errors.New(`"type" cannot stand beside an int-or-string "anyOf"`)
	case !s.XIntOrString && s.Type == "":
		return errors.New(`"type" is required: a CRD schema must be structural`)
	case s.Type != "object" && (s.Properties != nil || s.AdditionalProperties != nil || s.Required != nil):
		return errors.New(`"properties", "additionalProperties" and "required" need "type": "object"`)
	case s.Type != "array" && s.Items != nil:
		return errors.New(`"items" needs "type": "array"`)
	case s.Type == "array" && s.Items == nil:
		return errors.New(`"type": "array" needs "items": a CRD schema must be structural`)
	case s.Properties != nil && s.AdditionalProperties != nil:
		return errors.New(`"properties" and an "additionalProperties" schema cannot be combined in a CRD`)
	}
	for _, name := range s.Required {
		if _, ok := s.Properties[name]; !ok {
			return fmt.Errorf("required property %q is not declared in \"properties\"", name)
		}
	}
	return nil
}

func translateProperties(v any, path string) (map[string]apiextv1.JSONSchemaProps, error) {
	props, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("must be an object")
	}
	out := make(map[string]apiextv1.JSONSchemaProps, len(props))
	for _, name := range sortedKeys(props) {
		sub, ok := props[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("property %q: only a schema object is supported", name)
		}
		prop, err := translate(sub, path+"/properties/"+escapePointer(name), false)
		if err != nil {
			return nil, err
		}
		out[name] = *prop
	}
	return out, nil
}

func translateAdditional(v any, path string) (*apiextv1.JSONSchemaPropsOrBool, error) {
	switch a := v.(type) {
	case bool:
		if a {
			return nil, errors.New("true is not supported: declare the properties, or give a schema for the values of a map")
		}
		// Unknown fields are pruned by the apiserver, which is what false means to a user.
		return nil, nil
	case map[string]any:
		sub, err := translate(a, path+"/additionalProperties", false)
		if err != nil {
			return nil, err
		}
		return &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: sub}, nil
	default:
		return nil, errors.New("must be false or a schema object")
	}
}

// translatePropertyNames turns {"maxLength": n} into the CEL rule that bounds a map's keys.
func translatePropertyNames(v any) (*apiextv1.ValidationRule, error) {
	names, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New(`only {"maxLength": n} is supported`)
	}
	var maxLength *int64
	for key, value := range names {
		switch key {
		case "description", "$comment":
		case "maxLength":
			var err error
			if maxLength, err = asCount(value); err != nil {
				return nil, fmt.Errorf("maxLength: %w", err)
			}
		default:
			return nil, fmt.Errorf(`%q: only {"maxLength": n} is supported`, key)
		}
	}
	if maxLength == nil {
		return nil, errors.New(`only {"maxLength": n} is supported`)
	}
	return &apiextv1.ValidationRule{
		Rule:    fmt.Sprintf("self.all(k, size(k) <= %d)", *maxLength),
		Message: fmt.Sprintf("keys must be no more than %d characters", *maxLength),
	}, nil
}

// isIntOrString tells whether an anyOf is exactly an integer or a string, in either order,
// with nothing else in the branches (a structural schema allows nothing else there).
func isIntOrString(v any) bool {
	list, ok := v.([]any)
	if !ok || len(list) != 2 {
		return false
	}
	seen := map[string]bool{}
	for _, branch := range list {
		b, ok := branch.(map[string]any)
		if !ok || len(b) != 1 {
			return false
		}
		t, _ := b["type"].(string)
		seen[t] = true
	}
	return seen["integer"] && seen["string"]
}

func bound(inclusive, exclusive *float64) (*float64, bool, error) {
	switch {
	case inclusive != nil && exclusive != nil:
		return nil, false, errors.New("give either the inclusive or the exclusive bound, not both")
	case exclusive != nil:
		return exclusive, true, nil
	default:
		return inclusive, false, nil
	}
}

func asString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", errors.New("must be a string")
	}
	return s, nil
}

func asStrings(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("must be a list of strings")
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, errors.New("must be a list of strings")
		}
		out = append(out, s)
	}
	return out, nil
}

func asFloat(v any) (*float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, errors.New("must be a number")
	}
	f, err := n.Float64()
	if err != nil {
		return nil, err
	}
	return &f, nil
}

func asCount(v any) (*int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, errors.New("must be a non-negative integer")
	}
	i, err := n.Int64()
	if err != nil || i < 0 {
		return nil, errors.New("must be a non-negative integer")
	}
	return &i, nil
}

func asJSON(v any) (*apiextv1.JSON, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return &apiextv1.JSON{Raw: raw}, nil
}

func asValidationRules(v any) (apiextv1.ValidationRules, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields() // a misspelt "mesage" must not vanish
	var rules apiextv1.ValidationRules
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("must be a list of validation rules: %w", err)
	}
	for i, r := range rules {
		if r.Rule == "" {
			return nil, fmt.Errorf("rule %d has no \"rule\"", i)
		}
	}
	return rules, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// escapePointer escapes a property name for a JSON pointer in error messages.
func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}
