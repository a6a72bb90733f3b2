package statuscontract

import (
	"encoding/json"
	"reflect"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Part is what one writer says of a CR's status: values of its top-level fields, as JSON
// decodes them (int64, string, map[string]any...), and its conditions. A field the writer
// owns that Fields lacks is one it leaves unset.
type Part struct {
	Fields     map[string]any
	Conditions []metav1.Condition
}

// Holds reports whether cr's status already says p, the part of it that o writes: each of
// o's fields is set in both, with the same value (numbers compared by value, whatever their
// Go type), or in neither; each condition of p has its like in cr (SameCondition); and cr has
// no condition of o's that p lacks.
//
// Every writer asks this before it writes, so that a status that says the same is not
// written again: a write is a request to the API server and an event to every watcher.
func (o StatusOwner) Holds(cr *unstructured.Unstructured, p Part) bool {
	status, _ := cr.Object["status"].(map[string]any)
	for _, f := range o.Fields {
		want, set := p.Fields[f]
		got, has := status[f]
		if set != has || (set && !sameValue(got, want)) {
			return false
		}
	}
	conds := Conditions(cr)
	for i := range p.Conditions {
		if !SameCondition(&p.Conditions[i], Find(conds, p.Conditions[i].Type)) {
			return false
		}
	}
	var others map[string]bool // the types other writers own, for a writer that owns the rest
	if o.OtherConditions && len(conds) > 0 {
		others = ConditionsOwnedByOthers(o.FieldManager)
	}
	for i := range conds {
		t := conds[i].Type
		owned := slices.Contains(o.Conditions, t) || (o.OtherConditions && !others[t])
		if owned && Find(p.Conditions, t) == nil {
			return false
		}
	}
	return true
}

// ApplyObject is the server-side apply configuration of p on cr, for a writer with a field
// manager: p's fields and conditions and nothing else, so that the apply cannot touch
// another writer's, and, if conditional, only while cr is at the resourceVersion read (a
// writer that decides from what it read must not overwrite what it did not see).
func (o StatusOwner) ApplyObject(cr *unstructured.Unstructured, p Part, conditional bool) *unstructured.Unstructured {
	status := make(map[string]any, len(p.Fields)+1)
	for _, f := range o.Fields {
		if v, ok := p.Fields[f]; ok {
			status[f] = v
		}
	}
	if len(o.Conditions) > 0 || o.OtherConditions {
		conds := make([]any, 0, len(p.Conditions))
		for i := range p.Conditions {
			conds = append(conds, conditionField(&p.Conditions[i]))
		}
		status[FieldConditions] = conds
	}
	meta := map[string]any{"name": cr.GetName(), "namespace": cr.GetNamespace()}
	if conditional {
		meta["resourceVersion"] = cr.GetResourceVersion()
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cr.GetAPIVersion(),
		"kind":       cr.GetKind(),
		"metadata":   meta,
		"status":     status,
	}}
}

// MergePatch is the JSON merge patch that writes p's fields into cr's status, for a writer
// without a field manager, or nil when cr's status holds them already. Each field is sent
// whole: what the field has in cr and p lacks is set to null, which a merge patch removes,
// so that nothing stale survives the merge. Nothing outside o's fields is touched.
func (o StatusOwner) MergePatch(cr *unstructured.Unstructured, p Part) ([]byte, error) {
	if o.Holds(cr, p) {
		return nil, nil
	}
	status, _ := cr.Object["status"].(map[string]any)
	patch := map[string]any{}
	for _, f := range o.Fields {
		want, ok := p.Fields[f].(map[string]any)
		if !ok {
			patch[f] = p.Fields[f] // nil: the field is removed
			continue
		}
		whole := map[string]any{}
		if current, ok := status[f].(map[string]any); ok {
			for k := range current {
				whole[k] = nil
			}
		}
		for k, v := range want {
			whole[k] = v
		}
		patch[f] = whole
	}
	return json.Marshal(map[string]any{"status": patch})
}

// conditionField is c as a condition of an apply: every field, observedGeneration even when
// 0 (the sidecar's RolledOut before anything is deployed), the time in UTC to the second, as
// the API server stores it.
func conditionField(c *metav1.Condition) map[string]any {
	return map[string]any{
		"type":               c.Type,
		"status":             string(c.Status),
		"reason":             c.Reason,
		"message":            c.Message,
		"observedGeneration": c.ObservedGeneration,
		"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
	}
}

// sameValue compares a value decoded from JSON with a wanted one: numbers by value (the API
// machinery decodes them as int64, other sources as float64 or another int type), maps and
// lists element by element, anything else as it is.
func sameValue(got, want any) bool {
	if w, ok := Number(want); ok {
		g, ok := Number(got)
		return ok && g == w
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, v := range w {
			if gv, has := g[k]; !has || !sameValue(gv, v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !sameValue(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(got, want)
}

// Number is v as a float64, if v is a number as a JSON decoder or the API machinery gives it
// (float64, int64, or another int type): status fields and rendered manifests compare by
// value whatever decoded them.
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
