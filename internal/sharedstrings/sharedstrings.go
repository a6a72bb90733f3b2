// Package sharedstrings makes the strings of cached objects share their bytes, so that the
// caches of both processes hold each string once. A cache of 10,000 CRs holds the same keys
// ("lastTransitionTime", "observedGeneration", ...) and mostly the same values ("True",
// "InstallSuccessful", the chart's labels) 10,000 times over, each decoded into a string of
// its own. Interning keeps one copy of each, through the standard library's unique package,
// which holds its table weakly: a string no cached object uses any more is dropped, so what a
// tenant writes into its CRs cannot grow the table beyond what the cache holds anyway.
// Strings are immutable, so sharing them cannot let one object's edit show in another.
//
// The table keeps a string's canonical copy only while a unique.Handle to it lives, and this
// package keeps none: a collection empties it, though the cached objects still hold the
// strings. So the objects decoded between two collections share their strings, and one
// decoded after a collection gets copies of its own, shared from then on with those that
// follow it (TestTrimmedObjectsShareStrings holds the collector off for that reason).
//
// It costs each watch event about half of what decoding the object cost (BenchmarkValue:
// 12 µs against 26 µs for one of the benchmark's AppServices), and takes 12% off the
// manager's live heap at 3000 CRs (docs/bench/findings.md, "Interned strings in the caches").
package sharedstrings

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// String returns s, sharing its bytes with every other interned copy of it.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// Value interns the keys and string values of an object decoded from JSON (maps, slices and
// scalars, as in unstructured.Unstructured's Object), in place where it can; it returns the
// value to store in place of v.
func Value(v any) any {
	switch x := v.(type) {
	case map[string]any:
		// A map's keys cannot be replaced in place: build it again with the interned keys.
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[String(k)] = Value(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = Value(e)
		}
		return x
	case string:
		return String(x)
	}
	return v
}

// Meta interns an object's labels and annotations, the part of its metadata that repeats
// across objects (the keys always, the values often); names, UIDs and resource versions are
// each object's own and are left as they are.
func Meta(o metav1.Object) {
	if l := o.GetLabels(); len(l) > 0 {
		o.SetLabels(StringMap(l))
	}
	if a := o.GetAnnotations(); len(a) > 0 {
		o.SetAnnotations(StringMap(a))
	}
}

// StringMap returns a copy of in with its keys and values interned (a map's keys cannot be
// replaced in place); nil stays nil.
func StringMap(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[String(k)] = String(v)
	}
	return out
}
