package workloadstatus

import (
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// The sidecar applies exactly the status fields and conditions statuscontract.SidecarStatus
// declares it owns.
func TestApplyObjectMatchesTheSidecarsOwnership(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "K"}}
	cr.SetName("a")
	cr.SetNamespace("ns")
	status := applyObject(cr, ComputeStatus(1, 0, nil)).Object["status"].(map[string]any)
	var fields, conds []string
	for k := range status {
		if k != "conditions" {
			fields = append(fields, k)
		}
	}
	for _, c := range status["conditions"].([]any) {
		conds = append(conds, c.(map[string]any)["type"].(string))
	}
	want := append([]string(nil), statuscontract.SidecarStatus.Fields...)
	sort.Strings(fields)
	sort.Strings(want)
	if strings.Join(fields, ",") != strings.Join(want, ",") {
		t.Errorf("the sidecar applies fields %v, owns %v", fields, want)
	}
	if strings.Join(conds, ",") != strings.Join(statuscontract.SidecarStatus.Conditions, ",") {
		t.Errorf("the sidecar applies conditions %v, owns %v", conds, statuscontract.SidecarStatus.Conditions)
	}
}
