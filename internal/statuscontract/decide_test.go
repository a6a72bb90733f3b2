package statuscontract

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func rollout(status metav1.ConditionStatus, gen int64, msg string) *metav1.Condition {
	return &metav1.Condition{Type: RolledOut, Status: status, ObservedGeneration: gen, Message: msg}
}

type want struct {
	observed                    int64
	ready, reconciling, stalled metav1.ConditionStatus
	reason                      string // Ready's
	message                     string // part of Ready's message
}

func TestDecide(t *testing.T) {
	failure := &Failure{Reason: "UpgradeFailed", Step: "upgrade", Message: "boom"}
	terminal := &Failure{Reason: "SpecTooLarge", Step: "values", Message: "too many values", Terminal: true}
	cases := []struct {
		name  string
		state State
		want  want
	}{
		{"new CR, nothing deployed yet",
			State{Generation: 1},
			want{0, "False", "True", "False", ReasonInstallPending, "install of generation 1 pending"}},
		{"spec edited, upgrade not done: the old rollout says nothing of the new spec",
			State{Generation: 5, Deployed: 4, Rollout: rollout("True", 4, "")},
			want{4, "False", "True", "False", ReasonUpgradePending, "upgrade of generation 5 pending"}},
		{"deployed, the sidecar has not looked at this generation yet",
			State{Generation: 5, Deployed: 5, Rollout: rollout("True", 4, "")},
			want{5, "False", "True", "False", ReasonRollingOut, "waiting for its workloads"}},
		{"deployed, rolling out",
			State{Generation: 5, Deployed: 5, Rollout: rollout("False", 5, "Deployment web: 2 of 3 replicas available")},
			want{5, "False", "True", "False", ReasonRollingOut, "2 of 3 replicas available"}},
		{"deployed and rolled out",
			State{Generation: 5, Deployed: 5, Rollout: rollout("True", 5, "")},
			want{5, "True", "False", "False", ReasonReady, "generation 5 is deployed and rolled out"}},
		{"upgraded with no new generation (a source of valuesFrom changed): the word on the release before says nothing of the new one",
			State{Generation: 5, Deployed: 5, Revision: 8, Rollout: rollout("True", 5, RolloutMessage(7, "1 workload(s) rolled out"))},
			want{5, "False", "True", "False", ReasonRollingOut, "waiting for its workloads"}},
		{"upgraded with no new generation, the sidecar names no revision: nothing of the new release",
			State{Generation: 5, Deployed: 5, Revision: 8, Rollout: rollout("True", 5, "1 workload(s) rolled out")},
			want{5, "False", "True", "False", ReasonRollingOut, "waiting for its workloads"}},
		{"upgraded with no new generation, the new release rolling out",
			State{Generation: 5, Deployed: 5, Revision: 8, Rollout: rollout("False", 5, RolloutMessage(8, "Deployment web: 2 of 3 replicas available"))},
			want{5, "False", "True", "False", ReasonRollingOut, "generation 5 is deployed; Deployment web: 2 of 3 replicas available"}},
		{"upgraded with no new generation, the new release rolled out",
			State{Generation: 5, Deployed: 5, Revision: 8, Rollout: rollout("True", 5, RolloutMessage(8, "1 workload(s) rolled out"))},
			want{5, "True", "False", "False", ReasonReady, "generation 5 is deployed and rolled out"}},
		{"paused after an upgrade with no new generation: not ready until the new release rolled out",
			State{Generation: 5, Deployed: 5, Revision: 8, Paused: true, Rollout: rollout("True", 5, RolloutMessage(7, "1 workload(s) rolled out"))},
			want{5, "False", "False", "False", ReasonPaused, "generation 5 waits"}},
		{"first failure: retrying, observedGeneration stays",
			State{Generation: 5, Deployed: 4, Failures: 1, FailedGeneration: 5, Failure: failure},
			want{4, "False", "True", "False", "UpgradeFailed", "upgrade of generation 5 failed 1 time(s), retrying: boom"}},
		{"third failure: stalled, observedGeneration says the manager is done with it",
			State{Generation: 5, Deployed: 4, Failures: MaxTries, FailedGeneration: 5, Failure: failure},
			want{5, "False", "False", "True", "UpgradeFailed", "upgrade of generation 5 failed 3 times, retrying with back-off: boom"}},
		{"a terminal failure: stalled at the first attempt, with no count of attempts",
			State{Generation: 5, Deployed: 4, Failures: 1, FailedGeneration: 5, Failure: terminal},
			want{5, "False", "False", "True", "SpecTooLarge", "values of generation 5 refused: too many values"}},
		{"a terminal failure met again: the same decision, so no status write",
			State{Generation: 5, Deployed: 4, Failures: 4, FailedGeneration: 5, Failure: terminal},
			want{5, "False", "False", "True", "SpecTooLarge", "values of generation 5 refused: too many values"}},
		{"failures of an older generation do not count after an edit",
			State{Generation: 6, Deployed: 5, Failures: 7, FailedGeneration: 5, Failure: failure},
			want{5, "False", "True", "False", ReasonUpgradePending, "upgrade of generation 6 pending"}},
		{"paused with an edit waiting",
			State{Generation: 6, Deployed: 5, Paused: true, Rollout: rollout("True", 5, "")},
			want{5, "False", "False", "False", ReasonPaused, "generation 6 waits"}},
		{"paused with nothing pending stays ready",
			State{Generation: 5, Deployed: 5, Paused: true, Rollout: rollout("True", 5, "")},
			want{5, "True", "False", "False", ReasonReady, "reconciling is paused"}},
		{"a source of valuesFrom changed: not ready until the upgrade that applies it",
			State{Generation: 5, Deployed: 5, Rollout: rollout("True", 5, ""), SourceChanged: `Secret "db"`},
			want{5, "False", "True", "False", ReasonValuesSourceChanged, `Secret "db" changed; the upgrade of generation 5 that applies it is pending`}},
		{"a source changed while paused: the change waits",
			State{Generation: 5, Deployed: 5, Paused: true, Rollout: rollout("True", 5, ""), SourceChanged: `Secret "db"`},
			want{5, "False", "False", "False", ReasonPaused, `the change of Secret "db" waits`}},
		{"a source that cannot be read: failing wins over changed",
			State{Generation: 5, Deployed: 5, Failures: MaxTries, FailedGeneration: 5, SourceChanged: `Secret "db"`,
				Failure: &Failure{Reason: "ValuesFromFailed", Step: "values", Message: `Secret "db": not found`}},
			want{5, "False", "False", "True", "ValuesFromFailed", `values of generation 5 failed 3 times`}},
		{"paused while failing: paused wins, nothing is retried",
			State{Generation: 5, Deployed: 4, Paused: true, Failures: 5, FailedGeneration: 5, Failure: failure},
			want{4, "False", "False", "False", ReasonPaused, "generation 5 waits"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.state)
			got := want{d.ObservedGeneration, d.Ready.Status, d.Reconciling.Status, d.Stalled.Status, d.Ready.Reason, d.Ready.Message}
			if got.observed != tc.want.observed || got.ready != tc.want.ready || got.reconciling != tc.want.reconciling ||
				got.stalled != tc.want.stalled || got.reason != tc.want.reason || !strings.Contains(got.message, tc.want.message) {
				t.Errorf("Decide = %+v\nwant      %+v", got, tc.want)
			}
			for _, c := range []metav1.Condition{d.Ready, d.Reconciling, d.Stalled} {
				if c.ObservedGeneration != tc.state.Generation || c.Reason == "" {
					t.Errorf("%s: observedGeneration %d reason %q, want the CR's generation %d and a reason",
						c.Type, c.ObservedGeneration, c.Reason, tc.state.Generation)
				}
			}
			if d.Stalled.Status == metav1.ConditionTrue && d.Reconciling.Status == metav1.ConditionTrue {
				t.Error("Stalled and Reconciling both True")
			}
		})
	}
}

// The release revision the sidecar judged goes in RolledOut's message, and reads back; a
// message that does not name one names revision 0, whatever it says.
func TestRolloutMessage(t *testing.T) {
	c := &metav1.Condition{Type: RolledOut, Message: RolloutMessage(12, "Deployment web: 1 of 3 replicas available")}
	if c.Message != "release revision 12: Deployment web: 1 of 3 replicas available" {
		t.Errorf("RolloutMessage = %q", c.Message)
	}
	if rev, msg := JudgedRevision(c); rev != 12 || msg != "Deployment web: 1 of 3 replicas available" {
		t.Errorf("JudgedRevision = %d %q, want 12 and the message after it", rev, msg)
	}
	if got := RolloutMessage(0, "no release is deployed yet"); got != "no release is deployed yet" {
		t.Errorf("RolloutMessage of revision 0 = %q, want the message alone", got)
	}
	for _, msg := range []string{"", "1 workload(s) rolled out", "release revision x: a", "release revision -3: a",
		"release revision 4", "release revision : a"} {
		if rev, said := JudgedRevision(&metav1.Condition{Message: msg}); rev != 0 || said != msg {
			t.Errorf("JudgedRevision(%q) = %d %q, want 0 and the message as it is", msg, rev, said)
		}
	}
}

func TestDeployedRevision(t *testing.T) {
	for _, tc := range []struct {
		status any
		want   int64
	}{
		{nil, 0},
		{map[string]any{}, 0},
		{map[string]any{FieldChart: map[string]any{"digest": "d"}}, 0},
		{map[string]any{FieldChart: map[string]any{FieldChartRevision: int64(7)}}, 7},
		{map[string]any{FieldChart: map[string]any{FieldChartRevision: float64(8)}}, 8},
	} {
		cr := &unstructured.Unstructured{Object: map[string]any{}}
		if tc.status != nil {
			cr.Object["status"] = tc.status
		}
		if got := DeployedRevision(cr); got != tc.want {
			t.Errorf("DeployedRevision of status %v = %d, want %d", tc.status, got, tc.want)
		}
	}
}

func TestKeepTransitionTime(t *testing.T) {
	then, now := metav1.Unix(100, 0), metav1.Unix(200, 0)
	old := &metav1.Condition{Type: Ready, Status: metav1.ConditionFalse, Reason: "A", LastTransitionTime: then}
	c := metav1.Condition{Type: Ready, Status: metav1.ConditionFalse, Reason: "B"}
	KeepTransitionTime(&c, old, now)
	if !c.LastTransitionTime.Equal(&then) {
		t.Errorf("same status, new reason: transition time %v, want the old %v", c.LastTransitionTime, then)
	}
	c = metav1.Condition{Type: Ready, Status: metav1.ConditionTrue}
	KeepTransitionTime(&c, old, now)
	if !c.LastTransitionTime.Equal(&now) {
		t.Errorf("new status: transition time %v, want now %v", c.LastTransitionTime, now)
	}
	c = metav1.Condition{Type: Ready, Status: metav1.ConditionTrue}
	KeepTransitionTime(&c, nil, now)
	if !c.LastTransitionTime.Equal(&now) {
		t.Errorf("first condition: transition time %v, want now", c.LastTransitionTime)
	}
}
