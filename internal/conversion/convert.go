package conversion

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Convert returns obj converted to version of its kind; obj is not modified. See
// ConvertMap.
func (c *Chain) Convert(obj *unstructured.Unstructured, version string) (*unstructured.Unstructured, error) {
	if obj == nil {
		return nil, errors.New("no object to convert")
	}
	out, err := c.ConvertMap(obj.Object, version)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// ConvertMap returns the unstructured object obj, of one of the chain's versions, converted
// to version; obj is not modified. The steps of the chain between the two versions apply to
// spec, one after the other; apiVersion gets the target version in obj's group; metadata
// and status stay as they are, but for the Annotation, which keeps what the target version
// has no place for.
//
// A conversion and the conversion back return the object as it was, as Kubernetes requires
// of a conversion webhook; so does any sequence of conversions that comes back to the
// object's version, unless the object was edited on the way (an edit made in another
// version wins over the value kept from before it). A spec that is not an object is passed
// through as it is, in every direction.
//
// ConvertMap fails only when obj's version or the target version is not one of the chain's,
// or when what must be kept exceeds MaxAnnotationBytes, or cannot be kept: in an object
// whose metadata or annotations are not objects, or as a value JSON cannot hold (a NaN),
// which no object the API server decoded has. It never fails for the shape of a spec.
func (c *Chain) ConvertMap(obj map[string]any, version string) (map[string]any, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("apiVersion: %w", err)
	}
	from := slices.Index(c.versions, gv.Version)
	if from < 0 {
		return nil, fmt.Errorf("apiVersion %q: version %q is not one of the kind's (%s)", apiVersion, gv.Version, strings.Join(c.versions, ", "))
	}
	to := slices.Index(c.versions, version)
	if to < 0 {
		return nil, fmt.Errorf("target version %q is not one of the kind's (%s)", version, strings.Join(c.versions, ", "))
	}

	out := copyValue(obj).(map[string]any)
	out["apiVersion"] = schema.GroupVersion{Group: gv.Group, Version: version}.String()
	if from == to {
		return out, nil
	}
	u := readUnconverted(out)
	spec, _ := out["spec"].(map[string]any)
	for _, s := range c.path(from, to) {
		s.apply(spec, u)
	}
	if err := writeUnconverted(out, u); err != nil {
		return nil, err
	}
	return out, nil
}

// path is the steps that convert values of c.versions[from] into values of c.versions[to],
// in the order they apply.
func (c *Chain) path(from, to int) []step {
	var steps []step
	for i := from; i < to; i++ {
		steps = append(steps, c.steps[i])
	}
	for i := from - 1; i >= to; i-- {
		steps = append(steps, c.steps[i].reversed())
	}
	return steps
}

// apply converts spec, in place, from values of s.from into values of s.to (spec nil: not
// an object, passed through). u is the annotation's content: apply puts back the values kept
// for s.to, and keeps those of s.from that s.to has no place for.
//
// All values are taken before any is put, so that a step may swap two fields or rename a
// chain of them. What a conversion back would not restore is kept:
//   - a value whose destination is blocked by a value that is not an object (the tenant's
//     string where the step would create an object), at its source;
//   - a dropped value (a move to nowhere), at its source;
//   - a value already at a destination (or at a dropped field's place, in the direction
//     back), which the target version would read as the moved field, at its place;
//   - an empty object on the way to a destination, which the conversion back, taking the
//     moved value and the objects it leaves empty, would remove: an empty {} at its place.
func (s step) apply(spec map[string]any, u unconverted) {
	restore := u[s.to]
	delete(u, s.to)
	// Values kept for the version converted from belong on an object of another version:
	// on one of this version they are stale (written by hand), and would come back wrong.
	delete(u, s.from)
	if spec == nil {
		return
	}

	taken := make([]any, len(s.moves))
	have := make([]bool, len(s.moves))
	for i, m := range s.moves {
		if m.from != nil {
			taken[i], have[i] = take(spec, m.from)
		}
	}
	kept := map[string]any{}
	for _, m := range s.moves {
		if m.to == nil {
			continue
		}
		if v, ok := take(spec, m.to); ok {
			kept[m.to.String()] = v
		}
	}
	for i, m := range s.moves {
		if !have[i] || m.to == nil {
			continue
		}
		if o, depth, blocked := reach(spec, m.to); !blocked && depth > 0 && len(o) == 0 {
			kept[m.to[:depth].String()] = map[string]any{}
		}
	}
	for i, m := range s.moves {
		if have[i] && (m.to == nil || !put(spec, m.to, taken[i])) {
			kept[m.from.String()] = taken[i]
		}
	}

	// Sorted, so that an object comes before the values inside it, and the result does not
	// depend on the order of a map.
	for _, key := range slices.Sorted(maps.Keys(restore)) {
		if p, err := parsePointer(key); err == nil && free(spec, p) {
			put(spec, p, restore[key])
		}
	}
	if len(kept) > 0 {
		u[s.from] = kept
	}
}

// copyValue copies the objects and lists of an unstructured value, so that a conversion
// modifies none of its input. Other values are shared: JSON's are immutable, and a value of
// another type is not the conversion's to copy.
func copyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return v
		}
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = copyValue(e)
		}
		return m
	case []any:
		if v == nil {
			return v
		}
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = copyValue(e)
		}
		return l
	default:
		return v
	}
}
