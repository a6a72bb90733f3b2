package conversion

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// pointer is a JSON pointer (RFC 6901) into a CR's spec, split into its reference tokens,
// unescaped. conversions.yaml writes pointers as strings; they are parsed once, with the
// file, so that a conversion never meets a malformed one.
//
// A pointer names keys of objects only: a list on its way is a value in the way, as a
// string would be. Helm values address list items by position, which a new version may
// reorder, so a move into or out of a list would not say what it moves.
type pointer []string

// parsePointer parses a JSON pointer of conversions.yaml. Besides RFC 6901's rules (a
// leading "/", "~" only as "~0" or "~1") it refuses the root pointer "", since moving the
// whole spec is no move, and empty tokens ("//", a trailing "/"): a Helm value is never
// named "", so an empty token is a typo.
func parsePointer(s string) (pointer, error) {
	if s == "" {
		return nil, errors.New("the empty pointer names the whole spec, which cannot be moved")
	}
	if !strings.HasPrefix(s, "/") {
		return nil, fmt.Errorf("%q does not start with /", s)
	}
	tokens := strings.Split(s[1:], "/")
	for i, t := range tokens {
		if t == "" {
			return nil, fmt.Errorf("%q has an empty key", s)
		}
		u, err := unescape(t)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		tokens[i] = u
	}
	return tokens, nil
}

// unescape decodes "~1" to "/" and "~0" to "~", in that order of reading, so that "~01"
// is "~1" and not "/".
func unescape(t string) (string, error) {
	if !strings.Contains(t, "~") {
		return t, nil
	}
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] != '~' {
			b.WriteByte(t[i])
			continue
		}
		if i+1 == len(t) || (t[i+1] != '0' && t[i+1] != '1') {
			return "", errors.New("~ must be followed by 0 (for ~) or 1 (for /)")
		}
		if t[i+1] == '0' {
			b.WriteByte('~')
		} else {
			b.WriteByte('/')
		}
		i++
	}
	return b.String(), nil
}

// escaper escapes a token in one pass, so that the "~0" it writes for "~" is not escaped
// again.
var escaper = strings.NewReplacer("~", "~0", "/", "~1")

// String is p as conversions.yaml and the annotation write it.
func (p pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(escaper.Replace(t))
	}
	return b.String()
}

// inside reports whether p lies strictly inside q: q names an object on p's way.
func (p pointer) inside(q pointer) bool {
	return len(q) < len(p) && slices.Equal(p[:len(q)], q)
}

// The functions below act on a spec, the root object every pointer starts from. A spec's
// objects are map[string]any, as JSON decodes them into an unstructured object; any other
// value, a list or a map of another type included, stands in a pointer's way.

// reach follows p through spec as far as objects exist on its way. It returns the last
// object reached and the number of p's tokens that lead to it (at most len(p)-1: the object
// that would hold p's value), or blocked when a value on the way is not an object, where a
// value at p could not be put.
func reach(spec map[string]any, p pointer) (m map[string]any, depth int, blocked bool) {
	m = spec
	for depth < len(p)-1 {
		v, ok := m[p[depth]]
		if !ok {
			return m, depth, false
		}
		next, ok := v.(map[string]any)
		if !ok || next == nil { // a nil map, which Go code may build, cannot hold a value
			return m, depth, true
		}
		m = next
		depth++
	}
	return m, depth, false
}

// free reports whether nothing is at p and nothing stands in its way: a put there replaces
// no value.
func free(spec map[string]any, p pointer) bool {
	m, depth, blocked := reach(spec, p)
	if blocked {
		return false
	}
	if depth < len(p)-1 {
		return true
	}
	_, taken := m[p[len(p)-1]]
	return !taken
}

// take removes the value at p from spec and returns it, if there is one. The objects on p's
// way that it leaves empty are removed too (spec itself stays): they held nothing else, and
// a put at p on the way back creates them again.
func take(spec map[string]any, p pointer) (any, bool) {
	m, depth, _ := reach(spec, p)
	if depth < len(p)-1 {
		return nil, false
	}
	last := p[len(p)-1]
	v, ok := m[last]
	if !ok {
		return nil, false
	}
	delete(m, last)
	for depth := len(p) - 1; depth > 0 && len(m) == 0; depth-- {
		parent, _, _ := reach(spec, p[:depth])
		delete(parent, p[depth-1])
		m = parent
	}
	return v, true
}

// put sets the value at p, creating the objects missing on its way. It reports false, and
// changes nothing, when a value on the way is not an object: the value has no place there.
// A value already at p is replaced; callers take it first.
func put(spec map[string]any, p pointer, v any) bool {
	m, depth, blocked := reach(spec, p)
	if blocked {
		return false
	}
	for ; depth < len(p)-1; depth++ {
		next := map[string]any{}
		m[p[depth]] = next
		m = next
	}
	m[p[len(p)-1]] = v
	return true
}
