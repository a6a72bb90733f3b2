package conversion

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Infer proposes the moves of a step from the spec schema of one version to the next's, for a
// person to review into conversions.yaml. The schemas are openAPI v3 schemas of spec, as a
// CRD's openAPIV3Schema.properties.spec holds them.
//
// Infer reads names, nothing else: a leaf field (one without properties of its own) gone
// from its path, or changed in type there, moves where a leaf of the same name and type
// appeared, if exactly one did and no other gone field could move there too, as Bitnami's
// redis chart moved password to auth.password. Every other gone field is listed in review,
// with the reason: a renamed field (replicaCount to replicas) is one, since only a person
// knows it is the same value, and so is one that could go to several places. New fields
// that take no gone field's value are not listed; the chart's defaults give them a value.
func Infer(oldSchema, newSchema map[string]any) (moves []Move, review []string) {
	before, after := leaves(oldSchema), leaves(newSchema)
	gone := changed(before, after)
	added := changed(after, before)

	// The gone and added leaves that could be one field: same name, same type.
	candidates := map[string][]leaf{} // gone leaf -> added leaves
	claimed := map[string][]leaf{}    // added leaf -> gone leaves
	for _, g := range gone {
		for _, a := range added {
			if g.name() == a.name() && g.kind == a.kind {
				candidates[g.String()] = append(candidates[g.String()], a)
				claimed[a.String()] = append(claimed[a.String()], g)
			}
		}
	}

	type pair struct{ from, to leaf }
	var pairs []pair
	for _, g := range gone {
		c := candidates[g.String()]
		switch {
		case len(c) == 0:
			review = append(review, fmt.Sprintf("%s (%s): gone, and no new field is named %q with that type", g, g.kind, g.name()))
		case len(c) > 1:
			review = append(review, fmt.Sprintf("%s (%s): gone, and several new fields could be it: %s", g, g.kind, join(c)))
		case len(claimed[c[0].String()]) > 1:
			review = append(review, fmt.Sprintf("%s (%s): gone, and %s could be it as well as the new place of %s", g, g.kind, c[0], join(claimed[c[0].String()])))
		default:
			pairs = append(pairs, pair{g, c[0]})
		}
	}

	// A move whose source holds another's destination (image, a string, moved away while
	// tag moves into an image object) is one conversions.yaml refuses: the two go to review.
	for i, p := range pairs {
		overlaps := false
		for j, q := range pairs {
			if i != j && (p.from.inside(q.to.pointer) || q.to.inside(p.from.pointer) ||
				q.from.inside(p.to.pointer) || p.to.inside(q.from.pointer)) {
				overlaps = true
			}
		}
		if overlaps {
			review = append(review, fmt.Sprintf("%s (%s): would move to %s, which overlaps another move: place it by hand", p.from, p.from.kind, p.to))
			continue
		}
		moves = append(moves, Move{From: p.from.String(), To: p.to.String()})
	}
	slices.Sort(review)
	return moves, review
}

// leaf is a field of a schema without properties of its own: a string, a list, a map of
// free keys. It is what a move moves whole.
type leaf struct {
	pointer
	kind string // its type, as kindOf says it
}

func (l leaf) name() string { return l.pointer[len(l.pointer)-1] }

// leaves lists the leaves of schema, by pointer.
func leaves(schema map[string]any) map[string]leaf {
	out := map[string]leaf{}
	var walk func(schema map[string]any, at pointer)
	walk = func(schema map[string]any, at pointer) {
		props, _ := schema["properties"].(map[string]any)
		if len(props) == 0 {
			if len(at) > 0 {
				out[at.String()] = leaf{at, kindOf(schema)}
			}
			return
		}
		for name, sub := range props {
			s, _ := sub.(map[string]any)
			walk(s, append(at[:len(at):len(at)], name))
		}
	}
	walk(schema, nil)
	return out
}

// changed is the leaves of a that b does not have, at their pointer with their type, in
// the order of their pointers.
func changed(a, b map[string]leaf) []leaf {
	var out []leaf
	for _, k := range slices.Sorted(maps.Keys(a)) {
		if other, ok := b[k]; !ok || other.kind != a[k].kind {
			out = append(out, a[k])
		}
	}
	return out
}

// kindOf says a schema's type: its type keyword, with its items' for a list, since a list of
// strings does not take a list of objects' values.
func kindOf(schema map[string]any) string {
	if v, _ := schema["x-kubernetes-int-or-string"].(bool); v {
		return "int-or-string"
	}
	t, _ := schema["type"].(string)
	switch t {
	case "":
		return "untyped"
	case "array":
		items, _ := schema["items"].(map[string]any)
		return "array of " + kindOf(items)
	}
	return t
}

func join(ls []leaf) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = l.String()
	}
	return strings.Join(s, ", ")
}
