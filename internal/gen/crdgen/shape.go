package crdgen

import (
	"errors"
	"fmt"
)

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
