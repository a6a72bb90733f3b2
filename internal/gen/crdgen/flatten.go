package crdgen

import (
	"fmt"
	"strings"
)

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
