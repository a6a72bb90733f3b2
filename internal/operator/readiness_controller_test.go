package operator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// An upgrade that a change of a spec.valuesFrom source caused leaves the CR's generation as it
// was, so the sidecar's RolledOut written before it names the generation of the new release
// too: Ready waits until RolledOut names the release revision the upgrade made, which the
// manager writes to status.chart, where the sidecar reads it.
func TestManagerStatusAfterAnUpgradeWithNoNewGeneration(t *testing.T) {
	now := metav1.Unix(1000, 0)
	rolledOut := func(revision int64) map[string]any {
		return map[string]any{"type": statuscontract.RolledOut, "status": "True", "observedGeneration": int64(2),
			"reason": "RolloutComplete", "message": statuscontract.RolloutMessage(revision, "1 workload(s) rolled out"),
			"lastTransitionTime": "2025-01-01T00:00:00Z"}
	}
	// Ready at generation 2, release revision 3, rendered from version 10 of the Secret db.
	cr := crAt(2, map[string]any{
		"observedGeneration": int64(2),
		"chart":              map[string]any{chartVersion: "1.0.0", chartDigest: "d", chartRevision: int64(3), chartBehind: false},
		"valuesFrom":         []any{map[string]any{"kind": "Secret", "name": "db", "resourceVersion": "10"}},
		"conditions":         []any{rolledOut(3)},
	})
	// The Secret's version 11 upgraded the release to revision 4, at the same generation.
	upgraded := outcome{uid: "uid-1", deployed: 2, chart: deployedChart{version: "1.0.0", digest: "d", revision: 4}, chartSet: true,
		applied: []valuesfrom.Source{{Kind: "Secret", Name: "db", ResourceVersion: "11"}}, appliedSet: true}
	rs := rolloutStatus{targetDigest: "d"}

	f := managerStatus(cr, upgraded, now, rs, "")
	if ready := statuscontract.Find(f.conditions, statuscontract.Ready); ready == nil || ready.Status != metav1.ConditionFalse ||
		ready.Reason != statuscontract.ReasonRollingOut {
		t.Fatalf("Ready %+v beside status.valuesFrom %v, want False %s: the sidecar judged the release before the upgrade",
			ready, f.sources, statuscontract.ReasonRollingOut)
	}
	// What the sidecar reads from the status the manager writes.
	written := crAt(2, f.applyObject(cr).Object["status"].(map[string]any))
	if got := statuscontract.DeployedRevision(written); got != 4 {
		t.Fatalf("the status the manager writes names release revision %d to the sidecar, want 4", got)
	}

	// The sidecar has judged revision 4: Ready.
	written.Object["status"].(map[string]any)["conditions"] = []any{rolledOut(4)}
	f = managerStatus(written, upgraded, now, rs, "")
	if ready := statuscontract.Find(f.conditions, statuscontract.Ready); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v once RolledOut names release revision 4, want True", ready)
	}
}
