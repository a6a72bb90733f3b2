package operator

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func memcached(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cache.example.com/v1alpha1",
		"kind":       "Memcached",
		"metadata":   map[string]any{"name": "m", "namespace": "ns"},
		"spec":       map[string]any{"size": int64(3)},
	}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

// The apply configuration of the helm-operator's status update holds its own conditions and
// deployedRelease, and nothing that belongs to the manager's readiness controller or the
// sidecar: an apply of those would take them over from their writers.
func TestHelmStatusApply(t *testing.T) {
	cases := []struct {
		name   string
		status map[string]any
		want   map[string]any
	}{
		{"own fields", map[string]any{"conditions": []any{map[string]any{"type": "Deployed"}}, "deployedRelease": map[string]any{"name": "m"}},
			map[string]any{"conditions": []any{map[string]any{"type": "Deployed"}}, "deployedRelease": map[string]any{"name": "m"}}},
		{"release gone is left out, so that the apply removes it", map[string]any{"conditions": []any{}},
			map[string]any{"conditions": []any{}}},
		{"others' fields and conditions are never applied", map[string]any{
			"availableReplicas": int64(3), "observedGeneration": int64(2),
			"conditions": []any{
				map[string]any{"type": "Ready", "status": "True"}, map[string]any{"type": "Reconciling"},
				map[string]any{"type": "Stalled"}, map[string]any{"type": "RolledOut"},
				map[string]any{"type": "Paused", "status": "False"},
			}},
			map[string]any{"conditions": []any{map[string]any{"type": "Paused", "status": "False"}}}},
		{"no status", nil, map[string]any{"conditions": []any{}}},
	}
	for _, tc := range cases {
		got, err := helmStatusApply(memcached(tc.status))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"apiVersion": "cache.example.com/v1alpha1",
			"kind":       "Memcached",
			"metadata":   map[string]any{"name": "m", "namespace": "ns"},
			"status":     tc.want,
		}
		if diff := cmp.Diff(want, got.Object); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// A failure that quotes a huge value still leaves a status small enough to store.
func TestHelmStatusApplyBoundsMessages(t *testing.T) {
	huge := strings.Repeat("a", 1<<20)
	got, err := helmStatusApply(memcached(map[string]any{"conditions": []any{
		map[string]any{"type": "ReleaseFailed", "message": "invalid: " + huge},
		map[string]any{"type": "Deployed", "message": "ok"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	kept := maxConditionMessage / 2
	conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	want := []any{
		map[string]any{"type": "ReleaseFailed", "message": "invalid: " + huge[:kept-len("invalid: ")] + " … " + huge[:kept]},
		map[string]any{"type": "Deployed", "message": "ok"},
	}
	if !cmp.Equal(want, conds) {
		t.Errorf("conditions of %d bytes, want the middle of the message cut out", len(conds[0].(map[string]any)["message"].(string)))
	}
}
