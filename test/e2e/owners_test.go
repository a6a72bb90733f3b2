package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// statusOwners maps each field manager that owns something of cr's status to the status
// fields (top-level names) and condition types it owns, from cr's managedFields.
func statusOwners(t *testing.T, cr *unstructured.Unstructured) map[string][]string {
	t.Helper()
	owners := map[string][]string{}
	for _, mf := range cr.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		if err := json.Unmarshal(mf.FieldsV1.Raw, &fields); err != nil {
			t.Fatalf("managedFields of %s: %v", mf.Manager, err)
		}
		name := mf.Manager + "/" + string(mf.Operation)
		for field, sub := range fields["f:status"] {
			if field != "f:conditions" {
				owners[name] = append(owners[name], strings.TrimPrefix(field, "f:"))
				continue
			}
			conds, _ := sub.(map[string]any)
			for key := range conds {
				var k struct{ Type string }
				if err := json.Unmarshal([]byte(strings.TrimPrefix(key, "k:")), &k); err == nil && k.Type != "" {
					owners[name] = append(owners[name], "condition "+k.Type)
				}
			}
		}
		sort.Strings(owners[name])
	}
	return owners
}

// TestStatusWriters: the helm-operator's status write, the manager's readiness controller and
// the sidecar each own their own part of the status through server-side apply, as
// docs/status.md says; none writes the others' fields, so none can erase them, before and
// after an upgrade.
func TestStatusWriters(t *testing.T) {
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("the stock helm-operator updates the whole status")
	}
	ns := env.Namespace(t)
	cr := newCR(t, "Memcached", ns, "owners", map[string]any{"size": int64(1)})
	env.Create(t, cr)
	check := func(generation int64) {
		t.Helper()
		got := waitCondition(t, cr, "Ready", string(metav1.ConditionTrue))
		if got.GetGeneration() != generation {
			t.Fatalf("generation %d, want %d", got.GetGeneration(), generation)
		}
		want := map[string][]string{
			"warpdrive-helm/Apply": {"condition Deployed", "condition Initialized", "condition Irreconcilable",
				"condition Paused", "condition ReleaseFailed", "deployedRelease"},
			"warpdrive-manager/Apply": {"chart", "condition ChartRollout", "condition Ready", "condition Reconciling",
				"condition Stalled", "failures", "observedGeneration"},
			"warpdrive-sidecar/Apply": {"availableReplicas", "condition RolledOut", "readyReplicas", "replicas", "selector"},
		}
		got2 := statusOwners(t, got)
		for name, fields := range got2 {
			if _, ok := want[name]; !ok {
				t.Errorf("%s owns status fields %v; only the three appliers should", name, fields)
			}
		}
		for name, fields := range want {
			if strings.Join(got2[name], ",") != strings.Join(fields, ",") {
				t.Errorf("%s owns %v, want %v", name, got2[name], fields)
			}
		}
	}
	check(1)
	patchSpec(t, cr, map[string]any{"size": int64(2)})
	framework.Eventually(t, converge, func(ctx context.Context) error {
		got, err := getCR(ctx, cr)
		if err != nil {
			return err
		}
		if g, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration"); g != 2 {
			return fmt.Errorf("observedGeneration %d, want 2", g)
		}
		return nil
	})
	check(2)
}
