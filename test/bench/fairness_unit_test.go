package bench

import (
	"strings"
	"testing"
	"time"
)

func TestRestartEditsTableTellsEachEdit(t *testing.T) {
	runs := []fairRun{{operator: "warpdrive-operator", phases: []fairPhase{
		{name: "quiet", deploy: []time.Duration{time.Second}},
		{name: "restart", served: 19 * time.Second, each: []fairEditFigures{
			{made: time.Second, deploy: 20500 * time.Millisecond, ready: 23200 * time.Millisecond},
			{made: 21 * time.Second, deploy: 2500 * time.Millisecond},
		}},
		{name: "rolling restart", served: 21 * time.Second, oldStopped: 20 * time.Second, each: []fairEditFigures{
			{made: time.Second, deploy: time.Second, ready: 2 * time.Second},
		}},
	}}, {operator: stockName, phases: []fairPhase{{name: "restart", each: []fairEditFigures{{made: time.Second}}}}}}
	got := restartEditsTable(runs)
	for _, want := range []string{
		"restart, warpdrive-operator, first reconcile 19 s after its start:",
		"rolling restart, warpdrive-operator, first reconcile 21 s after its start, the old one stopped 20 s after it:",
		"| 1 s | 1 s | 2 s |",
		"| 1 s | 20.5 s | 23.2 s |",
		"| 21 s | 2.5 s | - |",
		"restart, " + stockName + ", first reconcile none seen:",
		"| 1 s | - | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "| edit made |") != 3 {
		t.Errorf("want one table per restart phase, none for the quiet phase:\n%s", got)
	}
	if restartEditsTable(runs[:0]) != "" {
		t.Error("no restart phase, yet a table")
	}
}
