package statuscontract

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func crWithStatus(status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"status": status}}
}

// Holds compares only the writer's own part: numbers by value, conditions by what they say,
// and a condition of the writer's that its part no longer has counts as a change.
func TestHolds(t *testing.T) {
	ready := metav1.Condition{Type: Ready, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 2}
	cond := func(typ, status string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": "Ready", "message": "", "observedGeneration": int64(2)}
	}
	manager := Part{Fields: map[string]any{FieldObservedGeneration: int64(2), FieldFailures: int64(0)},
		Conditions: []metav1.Condition{ready}}
	cases := []struct {
		name   string
		owner  StatusOwner
		status map[string]any
		part   Part
		holds  bool
	}{
		{"same, numbers of another type, others' fields beside", ManagerStatus, map[string]any{
			FieldObservedGeneration: float64(2), FieldFailures: int32(0), FieldReplicas: int64(9),
			"conditions": []any{cond(Ready, "True"), cond(RolledOut, "False")}}, manager, true},
		{"a field of its own unset", ManagerStatus, map[string]any{
			FieldObservedGeneration: int64(2), "conditions": []any{cond(Ready, "True")}}, manager, false},
		{"a field of its own set that the part leaves unset", ManagerStatus, map[string]any{
			FieldObservedGeneration: int64(2), FieldFailures: int64(0), FieldChart: map[string]any{"version": "1"},
			"conditions": []any{cond(Ready, "True")}}, manager, false},
		{"a condition says otherwise", ManagerStatus, map[string]any{
			FieldObservedGeneration: int64(2), FieldFailures: int64(0),
			"conditions": []any{cond(Ready, "False")}}, manager, false},
		{"a condition of its own the part dropped", ManagerStatus, map[string]any{
			FieldObservedGeneration: int64(2), FieldFailures: int64(0),
			"conditions": []any{cond(Ready, "True"), cond(Stalled, "False")}}, manager, false},
		{"helm: a condition no writer declares is its own", HelmStatus, map[string]any{
			"conditions": []any{cond("Custom", "True")}}, Part{}, false},
		{"helm: another writer's condition is not", HelmStatus, map[string]any{
			"conditions": []any{cond(Ready, "True")}}, Part{}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.owner.Holds(crWithStatus(tc.status), tc.part); got != tc.holds {
				t.Errorf("Holds = %v, want %v", got, tc.holds)
			}
		})
	}
}

// A merge patch sends each field whole, stale keys as null, and nothing when it holds.
func TestMergePatch(t *testing.T) {
	cr := crWithStatus(map[string]any{FieldPool: map[string]any{"used": int64(1), "stale": "x"}, FieldReplicas: int64(3)})
	patch, err := PoolBooks.MergePatch(cr, Part{Fields: map[string]any{FieldPool: map[string]any{"used": int64(2)}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"status":{"pool":{"stale":null,"used":2}}}`; string(patch) != want {
		t.Errorf("patch %s, want %s", patch, want)
	}
	patch, err = PoolBooks.MergePatch(cr, Part{Fields: map[string]any{FieldPool: map[string]any{"used": float64(1), "stale": "x"}}})
	if err != nil || patch != nil {
		t.Errorf("patch %s (%v) of a status that holds the part, want none", patch, err)
	}
}
