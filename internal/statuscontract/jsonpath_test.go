package statuscontract

import "testing"

// The printer columns of every CRD, and tenants' `kubectl wait --for=jsonpath`, read these
// paths.
func TestJSONPaths(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{FieldJSONPath(FieldChart, FieldChartVersion), ".status.chart.version"},
		{FieldJSONPath(FieldReplicas), ".status.replicas"},
		{ConditionJSONPath(Ready, "status"), `.status.conditions[?(@.type=="Ready")].status`},
		{ConditionJSONPath(ChartRollout, "reason"), `.status.conditions[?(@.type=="ChartRollout")].reason`},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}
