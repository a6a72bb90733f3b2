package crdgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// node translates the flattened schema s.
func (t *translator) node(s map[string]any, path string, at valueAt) (*apiextv1.JSONSchemaProps, error) {
	isRoot := path == "#"
	sh, s, refs, err := t.shapeOf(s, path)
	if err != nil {
		return nil, err
	}
	t.expanding = append(t.expanding, refs...)
	defer func() { t.expanding = t.expanding[:len(t.expanding)-len(refs)] }()
	if sh.open != "" {
		return t.open(s, path, sh.open)
	}
	_, hasProperties := s["properties"]
	if sh.typ == "" && !sh.intOrString && !hasProperties {
		if t.strict {
			return nil, fmt.Errorf(`%s%s: "type" is required: a CRD schema must be structural`, t.file, path)
		}
		return t.open(s, path, "no type: kept open")
	}

	out := &apiextv1.JSONSchemaProps{Type: sh.typ, Nullable: sh.nullable}
	if sh.intOrString {
		out.XIntOrString = true
		out.AnyOf = []apiextv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}
	}
	if sh.typ == "" && !sh.intOrString {
		// An untyped node with properties: JSON Schema admits any type there, so does the
		// CRD, and still documents and checks the properties of an object.
		out.XPreserveUnknownFields = ptr(true)
		out.Nullable = true
	}
	fail := func(key string, err error) error {
		return fmt.Errorf("%s%s: %q: %w", t.file, path, key, err)
	}
	var minimum, exclusiveMinimum, maximum, exclusiveMaximum *float64
	var minimumFlag, maximumFlag bool
	var keyRule *apiextv1.ValidationRule
	var def any
	var hasDefault bool

	// Sorted, so that the first error reported is the same from run to run.
	for _, key := range sortedKeys(s) {
		v := s[key]
		var err error
		switch key {
		case "type", "anyOf", "oneOf":
			// read by shapeOf
		case "$schema":
			if t.strict {
				if !isRoot {
					err = errors.New("allowed only at the root")
				} else if str, _ := v.(string); str != "http://json-schema.org/draft-07/schema#" && str != "http://json-schema.org/draft-07/schema" {
					err = fmt.Errorf("only JSON Schema draft-07 is supported, got %v", v)
				}
			}
		case "title":
			out.Title, err = asString(v)
		case "description":
			out.Description, err = asString(v)
		case "default":
			def, hasDefault = v, true
		case "const":
			if t.strict {
				err = errors.New("keyword not supported by hack/crdgen")
				break
			}
			if v == nil {
				out.Nullable = true
				break
			}
			var raw *apiextv1.JSON
			if raw, err = asJSON(v); err == nil {
				out.Enum = []apiextv1.JSON{*raw}
			}
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				err = errors.New("must be a non-empty list")
			}
			for _, e := range list {
				if e == nil && !t.strict {
					// A nullable enum would still refuse null: the enum is dropped.
					out.Nullable = true
					out.Enum = nil
					break
				}
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
			exclusiveMinimum, minimumFlag, err = asExclusive(v)
		case "exclusiveMaximum":
			exclusiveMaximum, maximumFlag, err = asExclusive(v)
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
			out.Properties, err = t.properties(v, path, at)
		case "additionalProperties", "patternProperties", "propertyNames", "items", "prefixItems":
			// read below, together
		case "uniqueItems":
			if b, ok := v.(bool); t.strict && (!ok || b) {
				err = errors.New("only false is supported: CRD schemas forbid uniqueItems")
			}
		case "x-kubernetes-validations":
			out.XValidations, err = asValidationRules(v)
		case "$comment":
			// A note to the schema's readers: no meaning to keep.
		default:
			// Outside strict mode: an annotation ("examples", "readOnly", "$defs"...), an
			// assertion that only narrows the node ("not", "if", "format"...), or a keyword
			// unknown to JSON Schema, which ignores it too.
			if t.strict {
				err = errors.New("keyword not supported by hack/crdgen")
			}
		}
		if err != nil {
			return nil, fail(key, err)
		}
	}
	if out.Type == "" && !out.XIntOrString {
		out.Enum = nil // an untyped node admits anything
	}

	if minimumFlag { // draft-04: a flag on minimum
		exclusiveMinimum, minimum = minimum, nil
	}
	if maximumFlag {
		exclusiveMaximum, maximum = maximum, nil
	}
	if out.Minimum, out.ExclusiveMinimum, err = t.bound(minimum, exclusiveMinimum, false); err != nil {
		return nil, fail("exclusiveMinimum", err)
	}
	if out.Maximum, out.ExclusiveMaximum, err = t.bound(maximum, exclusiveMaximum, true); err != nil {
		return nil, fail("exclusiveMaximum", err)
	}

	if err := t.objectKeywords(out, s, path, at, &keyRule); err != nil {
		return nil, err
	}
	if err := t.arrayKeywords(out, s, path); err != nil {
		return nil, err
	}
	if keyRule != nil {
		out.XValidations = append(out.XValidations, *keyRule)
	}
	if hasDefault {
		if out.Default, err = t.keepDefault(out, def, at); err != nil {
			return nil, fail("default", err)
		}
	}
	if err := checkStructural(out); err != nil {
		return nil, fmt.Errorf("%s%s: %w", t.file, path, err)
	}
	return out, nil
}

// bound combines an inclusive and an exclusive bound into OpenAPI's bound and flag. Both
// apply in JSON Schema (draft-06 and later): the stricter one is kept; the strict mode
// refuses the pair, as before.
func (t *translator) bound(inclusive, exclusive *float64, upper bool) (*float64, bool, error) {
	switch {
	case inclusive != nil && exclusive != nil:
		if t.strict {
			return nil, false, errors.New("give either the inclusive or the exclusive bound, not both")
		}
		if upper == (*exclusive <= *inclusive) {
			return exclusive, true, nil
		}
		return inclusive, false, nil
	case exclusive != nil:
		return exclusive, true, nil
	default:
		return inclusive, false, nil
	}
}

func (t *translator) properties(v any, path string, at valueAt) (map[string]apiextv1.JSONSchemaProps, error) {
	props, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s%s: %q: must be an object", t.file, path, "properties")
	}
	out := make(map[string]apiextv1.JSONSchemaProps, len(props))
	for _, name := range sortedKeys(props) {
		sub := props[name]
		if _, isMap := sub.(map[string]any); !isMap && t.strict {
			return nil, fmt.Errorf("%s%s: %q: property %q: only a schema object is supported", t.file, path, "properties", name)
		}
		prop, err := t.translate(sub, path+"/properties/"+escapePointer(name), at.child(name))
		if err != nil {
			return nil, err
		}
		out[name] = *prop
	}
	return out, nil
}

// objectKeywords translates properties' companions: additionalProperties,
// patternProperties, propertyNames and required.
func (t *translator) objectKeywords(out *apiextv1.JSONSchemaProps, s map[string]any, path string, at valueAt, keyRule **apiextv1.ValidationRule) error {
	fail := func(key string, err error) error { return fmt.Errorf("%s%s: %q: %w", t.file, path, key, err) }
	addl, hasAddl := s["additionalProperties"]
	patterns, hasPatterns := s["patternProperties"]
	if t.strict && hasPatterns {
		return fail("patternProperties", errors.New("keyword not supported by hack/crdgen"))
	}
	// Outside strict mode an object keeps the fields it does not declare, unless
	// "additionalProperties" is false or a map's schema.
	keepUnknown := !t.strict && out.Type == "object"
	switch a := addl.(type) {
	case nil:
		if hasAddl {
			return fail("additionalProperties", errors.New("must be a boolean or a schema object"))
		}
	case bool:
		if a && t.strict {
			return fail("additionalProperties", errors.New("true is not supported: declare the properties, or give a schema for the values of a map"))
		}
		// false: unknown fields are pruned by the apiserver, which is what false means to
		// a user.
		keepUnknown = keepUnknown && (a || hasPatterns)
	case map[string]any:
		sub, err := t.translate(a, path+"/additionalProperties", at.nested())
		if err != nil {
			return err
		}
		switch {
		case isOpen(sub):
		case out.Properties == nil && !hasPatterns:
			out.AdditionalProperties = &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: sub}
			keepUnknown = false
		case t.strict:
			return fmt.Errorf(`%s%s: "properties" and an "additionalProperties" schema cannot be combined in a CRD`, t.file, path)
		}
	default:
		return fail("additionalProperties", errors.New("must be a boolean or a schema object"))
	}
	if hasPatterns {
		m, ok := patterns.(map[string]any)
		if !ok {
			return fail("patternProperties", errors.New("must be an object"))
		}
		if len(m) == 1 && out.Properties == nil && addl == false {
			for pattern, sub := range m {
				value, err := t.translate(sub, path+"/patternProperties/"+escapePointer(pattern), at.nested())
				if err != nil {
					return err
				}
				if !isOpen(value) {
					// Keys the pattern does not match are admitted too: looser.
					out.AdditionalProperties = &apiextv1.JSONSchemaPropsOrBool{Allows: true, Schema: value}
					keepUnknown = false
				}
			}
		}
	}
	if keepUnknown {
		out.XPreserveUnknownFields = ptr(true)
	}

	if names, ok := s["propertyNames"]; ok {
		rule, err := translatePropertyNames(names)
		isMap := out.AdditionalProperties != nil && out.AdditionalProperties.Schema != nil
		switch {
		case err != nil && t.strict:
			return fail("propertyNames", err)
		case err == nil && !isMap && t.strict:
			return fail("propertyNames", errors.New(`needs an "additionalProperties" schema: only a map has free keys`))
		case err == nil && isMap:
			*keyRule = rule
		}
	}

	if out.Required == nil || t.strict {
		return nil
	}
	if out.Type != "object" && out.Type != "" {
		out.Required = nil // required constrains objects only
		return nil
	}
	var kept []string
	for _, name := range out.Required {
		if d := at.child(name); d.present && d.value != nil {
			continue // values.yaml gives it
		}
		kept = append(kept, name)
		_, declared := out.Properties[name]
		if !declared && out.XPreserveUnknownFields == nil && out.AdditionalProperties == nil {
			// Required but pruned: JSON Schema admits no value; the CRD keeps any.
			if out.Properties == nil {
				out.Properties = map[string]apiextv1.JSONSchemaProps{}
			}
			out.Properties[name] = *openSchema()
		}
	}
	out.Required = kept
	return nil
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

// arrayKeywords translates items; outside strict mode, tuple items, prefixItems and an
// array without items give open items.
func (t *translator) arrayKeywords(out *apiextv1.JSONSchemaProps, s map[string]any, path string) error {
	items, hasItems := s["items"]
	_, hasPrefix := s["prefixItems"]
	_, single := items.(map[string]any)
	if t.strict {
		switch {
		case hasPrefix:
			return fmt.Errorf("%s%s: %q: keyword not supported by hack/crdgen", t.file, path, "prefixItems")
		case hasItems && !single:
			return fmt.Errorf("%s%s: %q: only a single schema is supported (not a list or a boolean)", t.file, path, "items")
		case hasItems && out.Type != "array":
			return fmt.Errorf(`%s%s: "items" needs "type": "array"`, t.file, path)
		case !hasItems:
			return nil // checkStructural refuses an array without items
		}
	}
	if out.Type != "array" {
		return nil
	}
	item := openSchema()
	if single && !hasPrefix {
		var err error
		if item, err = t.translate(items, path+"/items", valueAt{tracked: t.values != nil}); err != nil {
			return err
		}
	}
	out.Items = &apiextv1.JSONSchemaPropsOrArray{Schema: item}
	return nil
}

// keepDefault is the default of node out, or nil where the CRD should not apply it (see
// TranslateSchema).
func (t *translator) keepDefault(out *apiextv1.JSONSchemaProps, def any, at valueAt) (*apiextv1.JSON, error) {
	if t.strict {
		return asJSON(def)
	}
	if def == nil {
		return nil, nil
	}
	if !scalarOfType(def, out) || at.tracked && (!at.present || !sameJSON(def, at.value)) {
		return nil, nil
	}
	return asJSON(def)
}

// scalarOfType tells whether v is a scalar the node's type (and enum) admits.
func scalarOfType(v any, s *apiextv1.JSONSchemaProps) bool {
	var ok bool
	switch v := v.(type) {
	case string:
		ok = s.Type == "string" || s.XIntOrString
	case bool:
		ok = s.Type == "boolean"
	case json.Number:
		_, isInt := v.Int64()
		ok = s.Type == "number" || (s.Type == "integer" || s.XIntOrString) && isInt == nil
	}
	if !ok || s.Enum == nil {
		return ok
	}
	for _, e := range s.Enum {
		if sameJSON(json.RawMessage(e.Raw), v) {
			return true
		}
	}
	return false
}

// sameJSON compares two values as JSON (a json.Number and a float64 alike).
func sameJSON(a, b any) bool {
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			return nil
		}
		var out any
		if err := json.Unmarshal(data, &out); err != nil {
			return nil
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
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
