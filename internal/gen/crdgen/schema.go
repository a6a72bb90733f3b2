package crdgen

import (
	"bytes"
	"encoding/json"
	"fmt"
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
