package operator

import (
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// appliedStatus lists the status fields and condition types of an apply configuration.
func appliedStatus(t *testing.T, apply *unstructured.Unstructured) (fields, conds string) {
	t.Helper()
	status, _, err := unstructured.NestedMap(apply.Object, "status")
	if err != nil {
		t.Fatal(err)
	}
	var f, c []string
	for k := range status {
		if k != "conditions" {
			f = append(f, k)
		}
	}
	list, _ := status["conditions"].([]any)
	for _, item := range list {
		c = append(c, item.(map[string]any)["type"].(string))
	}
	sort.Strings(f)
	sort.Strings(c)
	return strings.Join(f, ","), strings.Join(c, ",")
}

func sortedJoin(s []string) string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return strings.Join(s, ",")
}

// Each of the manager's two status writers applies exactly what statuscontract.StatusOwners
// declares it owns, from a CR whose status holds every writer's fields.
func TestStatusAppliesMatchTheirOwners(t *testing.T) {
	cr := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "x/v1", "kind": "K"}}
	cr.SetName("a")
	cr.SetNamespace("ns")
	status := map[string]any{}
	var conds []any
	for _, o := range statuscontract.StatusOwners {
		for _, f := range o.Fields {
			status[f] = "x"
		}
		for _, c := range o.Conditions {
			conds = append(conds, map[string]any{"type": c, "status": "True"})
		}
	}
	status["conditions"] = conds
	cr.Object["status"] = status

	apply, err := helmStatusApply(cr)
	if err != nil {
		t.Fatal(err)
	}
	fields, types := appliedStatus(t, apply)
	if want := sortedJoin(statuscontract.HelmStatus.Fields); fields != want {
		t.Errorf("the helm-operator applies fields %s, owns %s", fields, want)
	}
	if want := sortedJoin(statuscontract.HelmStatus.Conditions); types != want {
		t.Errorf("the helm-operator applies conditions %s, owns %s", types, want)
	}

	f := managerFields{handledSet: true, chart: map[string]any{chartVersion: "0.1.0"}, sources: []any{}}
	for _, typ := range statuscontract.ManagerStatus.Conditions {
		f.conditions = append(f.conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue})
	}
	fields, types = appliedStatus(t, f.applyObject(cr))
	if want := sortedJoin(statuscontract.ManagerStatus.Fields); fields != want {
		t.Errorf("the readiness controller applies fields %s, owns %s", fields, want)
	}
	if want := sortedJoin(statuscontract.ManagerStatus.Conditions); types != want {
		t.Errorf("the readiness controller applies conditions %s, owns %s", types, want)
	}
	got := managerStatus(cr, outcomes.Outcome{}, metav1.Now(), rolloutStatus{known: true, condition: metav1.Condition{Type: statuscontract.ChartRollout}}, "")
	var decided []string
	for _, c := range got.conditions {
		decided = append(decided, c.Type)
	}
	if strings.Join(decided, ",") != strings.Join(statuscontract.ManagerStatus.Conditions, ",") {
		t.Errorf("the readiness controller decides %v, owns %v", decided, statuscontract.ManagerStatus.Conditions)
	}
}
