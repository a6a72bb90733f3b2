package statuscontract

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Conditions reads by hand what the unstructured converter would read: the same conditions,
// and the same entries left out.
func TestConditionsReadsWhatTheConverterReads(t *testing.T) {
	cr := &unstructured.Unstructured{}
	if err := cr.UnmarshalJSON([]byte(`{"apiVersion":"x/v1","kind":"K","metadata":{"name":"a"},"status":{"conditions":[
		{"type":"Ready","status":"True","reason":"Available","message":"all there","observedGeneration":3,"lastTransitionTime":"2026-11-24T10:00:00Z"},
		{"type":"Stalled","status":"False"},
		{"type":"Reconciling","status":"True","observedGeneration":"3"},
		{"type":"Paused","status":"False","lastTransitionTime":"yesterday"},
		{"type":7},
		"not an object",
		{"type":"RolledOut","status":"Unknown","reason":null,"observedGeneration":2}
	]}}`)); err != nil {
		t.Fatal(err)
	}
	got := Conditions(cr)

	var want []metav1.Condition
	list, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		var c metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &c) == nil {
			want = append(want, c)
		}
	}
	if len(want) != 3 {
		t.Fatalf("the converter reads %d conditions, the test expects 3: %+v", len(want), want)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Conditions read\n%+v\nthe converter\n%+v", got, want)
	}
	if r := Find(got, Ready); r == nil || !r.LastTransitionTime.Equal(&metav1.Time{Time: want[0].LastTransitionTime.Time}) ||
		r.ObservedGeneration != 3 || r.Message != "all there" {
		t.Errorf("Ready read as %+v", r)
	}
}

func TestConditionsWithoutStatus(t *testing.T) {
	if got := Conditions(&unstructured.Unstructured{Object: map[string]any{}}); len(got) != 0 {
		t.Errorf("conditions of a CR without status: %+v", got)
	}
}
