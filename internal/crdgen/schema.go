package crdgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TranslateSchema turns a chart's values.schema.json into the structural OpenAPI v3 schema
// of a CRD's spec, without the chart's values.yaml (see translateValuesSchema).
//
// A CRD must never refuse or prune a value the chart accepts, and Helm still validates the
// values against the chart's own schema at install and upgrade: so what a structural schema
// can say with the same meaning is translated, and the rest is left open (looser than the
// chart's schema, never stricter) rather than refused:
//   - "$ref" to "#/definitions/x", "#/$defs/x" or any other pointer into the file is
//     inlined; a $ref that recurses, nests deeper than maxRefDepth or points outside the
//     file is an open node. Beside a $ref, other keywords are ignored under draft-04/06/07
//     (as those drafts say) and apply as in an "allOf" under 2019-09, 2020-12 or no
//     "$schema" (Helm's validator defaults to 2020-12).
//   - "allOf" merges its branches into the node: properties and required add up; where two
//     branches constrain the same keyword the first is kept, which may be looser.
//   - "anyOf"/"oneOf": branches of type "null" make the node nullable; exactly an integer
//     and a string make an int-or-string (a quantity); beside a "type" the branches only
//     narrow the node and are dropped; a single branch is merged in; branches of one type
//     give that type; anything else is an open node.
//   - A list of types: "null" in it makes the node nullable, integer and number are a
//     number, integer and string an int-or-string, other mixes an open node.
//   - Objects: "additionalProperties": false is dropped, since the apiserver prunes unknown
//     fields instead; absent, true, or a schema beside "properties", they keep unknown
//     fields (x-kubernetes-preserve-unknown-fields), as JSON Schema admits them. A schema
//     alone is a map. "patternProperties" keep unknown fields, unless a single pattern with
//     "additionalProperties": false stands alone, which is a map of its schema.
//   - "required" names that values.yaml gives a value are dropped: Helm checks the values
//     merged over values.yaml, while the apiserver checks the spec alone.
//   - "default" is kept only where it equals what values.yaml holds at that path (Helm
//     never applies a schema's defaults, the apiserver would write them into the spec);
//     without values.yaml, scalar defaults of the node's type are kept.
//   - "const" is a one-value enum; an enum or const admitting null makes the node nullable
//     and drops the enum.
//   - draft-04's boolean "exclusiveMinimum"/"exclusiveMaximum" and the numeric ones of
//     later drafts become OpenAPI's flags; with both forms, the stricter bound is kept.
//   - "x-kubernetes-validations" (ignored by JSON Schema) is copied, for what only the
//     apiserver can check, such as immutability.
//   - "propertyNames": {"maxLength": n} on a map becomes the CEL rule
//     self.all(k, size(k) <= n), as structural schemas have no propertyNames; both count
//     characters (code points).
//   - Keywords that only narrow what a node admits and that a structural schema cannot say
//     ("not", "if"/"then"/"else", "dependentRequired", "uniqueItems", "contains",
//     "unevaluatedProperties", other "propertyNames", formats the apiserver would read
//     differently...) are dropped, and annotations ("examples", "$comment", "readOnly",
//     unknown keywords...) ignored. Tuple "items" or "prefixItems", and an array without
//     "items", have open items.
//
// Open nodes carry x-kubernetes-preserve-unknown-fields and nullable and no type, which the
// apiserver accepts as structural. Errors remain for a file that is no schema: not JSON, a
// keyword of the wrong type, a pattern Go cannot compile (Helm's validator cannot either), a
// $ref into the file that points nowhere, a root that is not an object.
func TranslateSchema(schemaJSON []byte) (*apiextv1.JSONSchemaProps, error) {
	return translateValuesSchema(schemaJSON, nil)
}

// translateValuesSchema translates a chart's values.schema.json (see TranslateSchema) given
// the chart's values.yaml, values (nil without one).
func translateValuesSchema(schemaJSON []byte, values map[string]any) (*apiextv1.JSONSchemaProps, error) {
	t, err := newTranslator(ValuesSchemaFile, schemaJSON, false)
	if err != nil {
		return nil, err
	}
	t.values = values
	at := valueAt{}
	if values != nil {
		at = valueAt{tracked: true, value: values, present: true}
	}
	out, err := t.translate(t.doc, "#", at)
	if err != nil {
		return nil, err
	}
	// Helm's values are always a map: an open root is an object that keeps every field.
	switch {
	case out.Type == "" && !out.XIntOrString:
		out.Type = "object"
		out.XPreserveUnknownFields = ptr(true)
		out.Nullable = false
	case out.Type != "object":
		return nil, fmt.Errorf(`%s#: the root must have "type": "object" (it is the spec)`, t.file)
	}
	return out, nil
}

// translateStatusSchema translates a chart's status.schema.json strictly: the file is this
// project's contract with the sidecar, so a construct the CRD cannot say exactly is an
// error there rather than an open node, and objects without "additionalProperties" prune
// unknown fields.
func translateStatusSchema(schemaJSON []byte) (*apiextv1.JSONSchemaProps, error) {
	t, err := newTranslator(StatusSchemaFile, schemaJSON, true)
	if err != nil {
		return nil, err
	}
	if _, ok := t.doc.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: the schema must be a JSON object", t.file)
	}
	out, err := t.translate(t.doc, "#", valueAt{})
	if err != nil {
		return nil, err
	}
	if out.Type != "object" {
		return nil, fmt.Errorf(`%s#: the root must have "type": "object" (it is the status)`, t.file)
	}
	return out, nil
}

// ValuesSchemaFile is the JSON Schema of a chart's values, which Helm validates them against.
const ValuesSchemaFile = "values.schema.json"

// maxRefDepth bounds the $refs inlined within one another, so that a schema of many
// mutually referring definitions stays small; deeper, a node is open.
const maxRefDepth = 8

// translator translates one schema file.
type translator struct {
	file string
	doc  any
	// strict refuses what the CRD cannot say exactly (status.schema.json).
	strict bool
	// refSiblings: keywords beside a $ref apply (2019-09 and later) rather than being
	// ignored (draft-07 and earlier).
	refSiblings bool
	// values is the chart's values.yaml, nil if unknown.
	values map[string]any
	// expanding are the $refs being inlined around the node being translated.
	expanding []string
}

// valueAt is what values.yaml holds at a node of the schema: tracked is false without a
// values.yaml; present is false where it has nothing, or the node is not reached through
// properties alone (items and map values have no default in values.yaml).
type valueAt struct {
	tracked, present bool
	value            any
}

func (at valueAt) child(name string) valueAt {
	m, _ := at.value.(map[string]any)
	v, ok := m[name]
	return valueAt{tracked: at.tracked, present: at.present && ok, value: v}
}

// nested is the valueAt of items and map values.
func (at valueAt) nested() valueAt { return valueAt{tracked: at.tracked} }

// olderDrafts ignore the keywords beside a $ref.
var olderDrafts = []string{"draft-04", "draft-06", "draft-07"}

func newTranslator(file string, schemaJSON []byte, strict bool) (*translator, error) {
	dec := json.NewDecoder(bytes.NewReader(schemaJSON))
	dec.UseNumber() // keep integers exact for defaults and enums
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s: more than one JSON value", file)
	}
	t := &translator{file: file, doc: doc, strict: strict, refSiblings: true}
	root, ok := doc.(map[string]any)
	if !ok {
		if _, isBool := doc.(bool); isBool && !strict {
			return t, nil
		}
		return nil, fmt.Errorf("%s: the schema must be a JSON object", file)
	}
	if dialect, ok := root["$schema"].(string); ok {
		for _, d := range olderDrafts {
			if strings.Contains(dialect, d) {
				t.refSiblings = false
			}
		}
	}
	return t, nil
}

// translate translates the schema v at path (a JSON pointer into the file, for errors).
func (t *translator) translate(v any, path string, at valueAt) (*apiextv1.JSONSchemaProps, error) {
	s, refs, why, err := t.flatten(v, path)
	if err != nil {
		return nil, err
	}
	if why != "" {
		return t.open(s, path, why)
	}
	t.expanding = append(t.expanding, refs...)
	defer func() { t.expanding = t.expanding[:len(t.expanding)-len(refs)] }()
	return t.node(s, path, at)
}

// open is the schema of a node the CRD cannot express, why: one that admits any value,
// documented by s's description. In strict mode it is an error instead.
func (t *translator) open(s map[string]any, path, why string) (*apiextv1.JSONSchemaProps, error) {
	if t.strict {
		return nil, fmt.Errorf("%s%s: %s", t.file, path, why)
	}
	out := openSchema()
	out.Description, _ = s["description"].(string)
	out.Title, _ = s["title"].(string)
	return out, nil
}

// openSchema admits any value, null included, and prunes nothing under it.
func openSchema() *apiextv1.JSONSchemaProps {
	return &apiextv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true), Nullable: true}
}

// isOpen tells whether s admits anything (openSchema, perhaps described).
func isOpen(s *apiextv1.JSONSchemaProps) bool {
	return s.Type == "" && !s.XIntOrString && s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields &&
		s.Properties == nil && s.AdditionalProperties == nil
}

// flatten resolves v into one schema object without "$ref" or "allOf" at its top, and the
// $refs it inlined. A reason (why) instead means the node must stay open: a recursive,
// too deep or remote $ref.
func (t *translator) flatten(v any, path string) (s map[string]any, refs []string, why string, err error) {
	switch v := v.(type) {
	case bool:
		if !v && t.strict {
			return nil, nil, "", fmt.Errorf("%s%s: the schema false admits nothing", t.file, path)
		}
		// true admits anything; false admits nothing, which kept open is never stricter.
		return map[string]any{}, nil, "", nil
	case map[string]any:
		s = v
	default:
		return nil, nil, "", fmt.Errorf("%s%s: a schema must be an object or a boolean", t.file, path)
	}
	if t.strict {
		return s, nil, "", nil // node refuses $ref and allOf
	}
	for _, key := range []string{"$dynamicRef", "$recursiveRef"} {
		if _, ok := s[key]; ok {
			return s, nil, key + " is not supported: kept open", nil
		}
	}
	if raw, ok := s["$ref"]; ok {
		return t.flattenRef(s, raw, path)
	}
	if raw, ok := s["allOf"]; ok {
		branches, isList := raw.([]any)
		if !isList {
			return nil, nil, "", fmt.Errorf("%s%s: %q: must be a list of schemas", t.file, path, "allOf")
		}
		merged := without(s, "allOf")
		for i, b := range branches {
			bs, more, why, err := t.flatten(b, fmt.Sprintf("%s/allOf/%d", path, i))
			if err != nil {
				return nil, nil, "", err
			}
			if why != "" {
				continue // a branch only narrows the node: dropping it is looser
			}
			refs = append(refs, more...)
			merged = mergeSchemas(merged, bs)
		}
		// A branch may bring its own $ref or allOf.
		more, moreRefs, why, err := t.flatten(merged, path)
		return more, append(refs, moreRefs...), why, err
	}
	return s, nil, "", nil
}

// flattenRef flattens s, whose "$ref" is raw.
func (t *translator) flattenRef(s map[string]any, raw any, path string) (map[string]any, []string, string, error) {
	ref, isString := raw.(string)
	if !isString {
		return nil, nil, "", fmt.Errorf("%s%s: %q: must be a string", t.file, path, "$ref")
	}
	if !strings.HasPrefix(ref, "#") {
		return s, nil, fmt.Sprintf("$ref %s is outside the file: kept open", ref), nil
	}
	if contains(t.expanding, ref) || len(t.expanding) >= maxRefDepth {
		return s, nil, fmt.Sprintf("$ref %s recurses: kept open", ref), nil
	}
	target, found := t.pointer(ref)
	if !found {
		return nil, nil, "", fmt.Errorf("%s%s: %q: %s is not in the file", t.file, path, "$ref", ref)
	}
	t.expanding = append(t.expanding, ref)
	resolved, refs, why, err := t.flatten(target, ref)
	t.expanding = t.expanding[:len(t.expanding)-1]
	if err != nil || why != "" {
		return s, nil, why, err
	}
	refs = append([]string{ref}, refs...)
	siblings := without(s, "$ref")
	if !t.refSiblings {
		// The older drafts ignore the siblings; their description still documents the node.
		out := without(resolved)
		for _, k := range []string{"description", "title"} {
			if d, ok := siblings[k]; ok {
				out[k] = d
			}
		}
		return out, refs, "", nil
	}
	rest, restRefs, why, err := t.flatten(siblings, path)
	if err != nil || why != "" {
		return s, nil, why, err
	}
	return mergeSchemas(rest, resolved), append(refs, restRefs...), "", nil
}

// pointer resolves a local $ref such as #/definitions/x or #/$defs/x.
func (t *translator) pointer(ref string) (any, bool) {
	p := strings.TrimPrefix(ref, "#")
	if p == "" {
		return t.doc, true
	}
	if !strings.HasPrefix(p, "/") {
		return nil, false // an anchor ($anchor, $id): not supported
	}
	cur := t.doc
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// mergeSchemas is a schema admitting what both a and b admit, or looser where they
// constrain the same keyword differently (a's is kept).
func mergeSchemas(a, b map[string]any) map[string]any {
	out := without(a)
	for k, bv := range b {
		av, ok := out[k]
		if !ok {
			out[k] = bv
			continue
		}
		switch k {
		case "properties":
			ap, aok := av.(map[string]any)
			bp, bok := bv.(map[string]any)
			if !aok || !bok {
				continue
			}
			props := without(ap)
			for name, sub := range bp {
				if prev, ok := props[name]; ok {
					props[name] = map[string]any{"allOf": []any{prev, sub}}
				} else {
					props[name] = sub
				}
			}
			out[k] = props
		case "required":
			as, _ := asStrings(av)
			bs, _ := asStrings(bv)
			var names []any
			seen := map[string]bool{}
			for _, n := range append(as, bs...) {
				if !seen[n] {
					seen[n] = true
					names = append(names, n)
				}
			}
			out[k] = names
		case "type":
			at, aerr := typeList(av)
			bt, berr := typeList(bv)
			if aerr != nil || berr != nil {
				continue
			}
			var both []any
			for _, x := range at {
				if contains(bt, x) {
					both = append(both, x)
				}
			}
			if len(both) > 0 {
				out[k] = both
			}
		}
	}
	return out
}

// without copies s without the keys.
func without(s map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		if !contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var knownTypes = map[string]bool{
	"object": true, "array": true, "string": true, "integer": true, "number": true, "boolean": true, "null": true,
}

// typeList reads "type", a name or a list of names.
func typeList(v any) ([]string, error) {
	var names []string
	switch v := v.(type) {
	case string:
		names = []string{v}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, errors.New("must be a type name or a list of them")
			}
			names = append(names, s)
		}
	default:
		return nil, errors.New("must be a type name or a list of them")
	}
	for _, n := range names {
		if !knownTypes[n] {
			return nil, fmt.Errorf("unknown type %q", n)
		}
	}
	return names, nil
}

// shape is what "type" and the combinators make of a node.
type shape struct {
	typ         string // "" for none
	intOrString bool
	nullable    bool
	open        string // why the node is open, or ""
}

// shapeOf reads the node's type, folding "anyOf"/"oneOf" into it (see TranslateSchema);
// s is the node with the combinators it consumed removed, or a branch merged in.
func (t *translator) shapeOf(s map[string]any, path string) (shape, map[string]any, []string, error) {
	var sh shape
	var refs []string
	for _, key := range []string{"anyOf", "oneOf"} {
		raw, ok := s[key]
		if !ok {
			continue
		}
		if t.strict {
			if key == "anyOf" && isIntOrString(raw) {
				sh.intOrString = true
				s = without(s, key)
				continue
			}
			return sh, s, refs, fmt.Errorf(`%s%s: %q: only [{"type": "integer"}, {"type": "string"}] (an int-or-string such as a quantity) is supported`, t.file, path, key)
		}
		list, isList := raw.([]any)
		if !isList {
			return sh, s, refs, fmt.Errorf("%s%s: %q: must be a list of schemas", t.file, path, key)
		}
		s = without(s, key)
		var branches []map[string]any
		var branchRefs [][]string
		var types []string
		for i, b := range list {
			bs, more, why, err := t.flatten(b, fmt.Sprintf("%s/%s/%d", path, key, i))
			if err != nil {
				return sh, s, nil, err
			}
			if why != "" {
				sh.open = why
				continue
			}
			bt, _ := typeList(bs["type"])
			if len(bt) == 1 && bt[0] == "null" || isNullOnly(bs) {
				sh.nullable = true
				continue
			}
			branches = append(branches, bs)
			branchRefs = append(branchRefs, more)
			if len(bt) == 1 {
				types = append(types, bt[0])
			} else {
				types = append(types, "")
			}
		}
		switch {
		case len(branches) == 0 && sh.open == "":
		case sh.open != "":
			// A branch that stays open admits anything: so does the node.
		case len(branches) == 2 && (types[0] == "integer" && types[1] == "string" || types[0] == "string" && types[1] == "integer"):
			sh.intOrString = true
		case s["type"] != nil || sh.intOrString:
			// The branches only narrow the node's type.
		case len(branches) == 1:
			s = mergeSchemas(s, branches[0])
			refs = append(refs, branchRefs[0]...)
		case allSame(types) && types[0] != "":
			s["type"] = types[0]
		default:
			sh.open = fmt.Sprintf("%s of different types: kept open", key)
		}
	}
	if sh.open != "" {
		return sh, s, refs, nil
	}

	raw, hasType := s["type"]
	if !hasType {
		if sh.intOrString {
			return sh, s, refs, nil
		}
		if t.strict {
			return sh, s, refs, fmt.Errorf(`%s%s: "type" is required: a CRD schema must be structural`, t.file, path)
		}
		sh.typ = enumType(s)
		return sh, s, refs, nil
	}
	types, err := typeList(raw)
	if err != nil {
		return sh, s, refs, fmt.Errorf("%s%s: %q: %w", t.file, path, "type", err)
	}
	if t.strict {
		if _, isList := raw.([]any); isList {
			return sh, s, refs, fmt.Errorf(`%s%s: "type": a list of types is not supported: CRD schemas have one type per field`, t.file, path)
		}
		if types[0] == "null" {
			return sh, s, refs, fmt.Errorf(`%s%s: "type": unknown type "null"`, t.file, path)
		}
	}
	var kept []string
	for _, ty := range types {
		switch {
		case ty == "null":
			sh.nullable = true
		case ty == "integer" && contains(types, "number"):
			// number admits the integers
		case !contains(kept, ty):
			kept = append(kept, ty)
		}
	}
	switch {
	case len(kept) == 0:
		sh.open = `"type": "null": kept open`
	case sh.intOrString && len(kept) == 1 && (kept[0] == "integer" || kept[0] == "string"):
		// A string (or integer) that is also an int-or-string is that type alone.
		if t.strict {
			return sh, s, refs, fmt.Errorf(`%s%s: "type" cannot stand beside an int-or-string "anyOf"`, t.file, path)
		}
		sh.intOrString = false
		sh.typ = kept[0]
	case sh.intOrString:
		sh.open = "a type beside an int-or-string: kept open"
	case len(kept) == 1:
		sh.typ = kept[0]
	case len(kept) == 2 && contains(kept, "integer") && contains(kept, "string"):
		sh.intOrString = true
	default:
		sh.open = "a list of types: kept open"
	}
	return sh, s, refs, nil
}

// isNullOnly tells whether a branch admits only null ({"const": null}, {"enum": [null]}).
func isNullOnly(s map[string]any) bool {
	if c, ok := s["const"]; ok && c == nil {
		return true
	}
	e, ok := s["enum"].([]any)
	return ok && len(e) == 1 && e[0] == nil
}

func allSame(list []string) bool {
	for _, x := range list {
		if x != list[0] {
			return false
		}
	}
	return len(list) > 0
}

// enumType is the type of a node without "type" whose enum or const values are all
// strings, or all booleans; "" otherwise.
func enumType(s map[string]any) string {
	values, _ := s["enum"].([]any)
	if c, ok := s["const"]; ok {
		values = []any{c}
	}
	typ := ""
	for _, v := range values {
		var vt string
		switch v.(type) {
		case string:
			vt = "string"
		case bool:
			vt = "boolean"
		default:
			return ""
		}
		if typ != "" && vt != typ {
			return ""
		}
		typ = vt
	}
	return typ
}

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

// checkStructural reports what the apiserver would refuse in a CRD, or what would give a
// field a different meaning there than in the chart.
func checkStructural(s *apiextv1.JSONSchemaProps) error {
	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	switch {
	case s.XIntOrString && s.Type != "":
		return errors.New(`"type" cannot stand beside an int-or-string "anyOf"`)
	case s.XIntOrString && preserve:
		return errors.New("an int-or-string cannot keep unknown fields")
	case !s.XIntOrString && s.Type == "" && !preserve:
		return errors.New(`"type" is required: a CRD schema must be structural`)
	case s.Type != "object" && s.Type != "" && (s.Properties != nil || s.AdditionalProperties != nil || s.Required != nil || preserve):
		return errors.New(`"properties", "additionalProperties" and "required" need "type": "object"`)
	case s.Type != "array" && s.Items != nil:
		return errors.New(`"items" needs "type": "array"`)
	case s.Type == "array" && s.Items == nil:
		return errors.New(`"type": "array" needs "items": a CRD schema must be structural`)
	case s.Properties != nil && s.AdditionalProperties != nil:
		return errors.New(`"properties" and an "additionalProperties" schema cannot be combined in a CRD`)
	}
	for _, name := range s.Required {
		if _, ok := s.Properties[name]; !ok && !preserve && s.AdditionalProperties == nil {
			return fmt.Errorf("required property %q is not declared in \"properties\"", name)
		}
	}
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

// asExclusive reads exclusiveMinimum or exclusiveMaximum: a number, or draft-04's flag
// (returned as flag, the bound being minimum or maximum).
func asExclusive(v any) (bound *float64, flag bool, err error) {
	if b, ok := v.(bool); ok {
		return nil, b, nil
	}
	bound, err = asFloat(v)
	return bound, false, err
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
