package operator

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
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

func TestHelmStatusPatch(t *testing.T) {
	cases := []struct {
		name   string
		status map[string]any
		want   string
	}{
		{"both fields", map[string]any{"conditions": []any{map[string]any{"type": "Deployed"}}, "deployedRelease": map[string]any{"name": "m"}},
			`{"status":{"conditions":[{"type":"Deployed"}],"deployedRelease":{"name":"m"}}}`},
		{"release gone is removed", map[string]any{"conditions": []any{}},
			`{"status":{"conditions":[],"deployedRelease":null}}`},
		{"foreign fields never in the patch", map[string]any{"availableReplicas": int64(3)},
			`{"status":{"conditions":null,"deployedRelease":null}}`},
		{"no status", nil, `{"status":{"conditions":null,"deployedRelease":null}}`},
	}
	for _, tc := range cases {
		got, err := helmStatusPatch(memcached(tc.status))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s: patch %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestStatusUpdateKeepsForeignFields: the reconciler's status update, with only its own
// fields, leaves the sidecar's fields on the CR and sets or clears its own.
func TestStatusUpdateKeepsForeignFields(t *testing.T) {
	stored := memcached(map[string]any{
		"conditions":        []any{map[string]any{"type": "Deployed", "status": "False"}},
		"deployedRelease":   map[string]any{"name": "m", "manifest": "old"},
		"availableReplicas": int64(3),
		"selector":          "app=m",
	})
	fc := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).
		WithObjects(stored.DeepCopy()).WithStatusSubresource(stored.DeepCopy()).Build()
	c := statusKeepingClient{Client: fc}

	// What the reconciler sends: its own struct, converted, and nothing else.
	update := stored.DeepCopy()
	update.Object["status"] = map[string]any{
		"conditions": []any{map[string]any{"type": "Deployed", "status": "True"}},
	}
	if err := c.Status().Update(context.Background(), update); err != nil {
		t.Fatal(err)
	}

	got := memcached(nil)
	if err := fc.Get(context.Background(), client.ObjectKeyFromObject(got), got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"conditions":        []any{map[string]any{"type": "Deployed", "status": "True"}},
		"availableReplicas": int64(3),
		"selector":          "app=m",
	}
	if diff := cmp.Diff(want, got.Object["status"]); diff != "" {
		t.Errorf("status after the reconciler's update (-want +got):\n%s", diff)
	}
	// The caller's object reflects what is stored, as after a plain update.
	if diff := cmp.Diff(want, update.Object["status"]); diff != "" {
		t.Errorf("caller's object after the update (-want +got):\n%s", diff)
	}
}

// A failure that quotes a huge value still leaves a status small enough to store.
func TestHelmStatusPatchBoundsMessages(t *testing.T) {
	huge := strings.Repeat("a", 1<<20)
	got, err := helmStatusPatch(memcached(map[string]any{"conditions": []any{
		map[string]any{"type": "ReleaseFailed", "message": "invalid: " + huge},
		map[string]any{"type": "Deployed", "message": "ok"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	kept := maxConditionMessage / 2
	want := `{"status":{"conditions":[{"message":"invalid: ` + huge[:kept-len("invalid: ")] + " … " + huge[:kept] +
		`","type":"ReleaseFailed"},{"message":"ok","type":"Deployed"}],"deployedRelease":null}}`
	if string(got) != want {
		t.Errorf("patch of %d bytes, want %d bytes with the middle of the message cut out", len(got), len(want))
	}
}
