package bench

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func TestEditsTablesTellEachEdit(t *testing.T) {
	start := time.Now()
	runs := []fairRun{{operator: "warpdrive-operator", phases: []fairPhase{
		{name: "quiet", deploy: []time.Duration{time.Second}},
		{name: "edit wave", each: []fairEditFigures{
			{made: 2 * time.Second, deploy: 3 * time.Second, deployDone: 5 * time.Second, recorded: 4 * time.Second,
				rolledOut: 6 * time.Second, ready: 6500 * time.Millisecond},
		}},
		{name: "restart", restarted: start, served: 19 * time.Second, each: []fairEditFigures{
			{made: time.Second, deploy: 20500 * time.Millisecond, deployDone: 21500 * time.Millisecond, recorded: 21 * time.Second,
				rolledOut: 22 * time.Second, ready: 23200 * time.Millisecond},
			{made: 21 * time.Second, deploy: 2500 * time.Millisecond},
		}},
		{name: "rolling restart", restarted: start, served: 21 * time.Second, oldStopped: 20 * time.Second, each: []fairEditFigures{
			{made: time.Second, deploy: time.Second, ready: 2 * time.Second},
		}},
	}}, {operator: stockName, phases: []fairPhase{{name: "restart", restarted: start, each: []fairEditFigures{{made: time.Second}}}}}}
	got := editsTables(runs)
	for _, want := range []string{
		"\nedit wave, warpdrive-operator:\n",
		// Ready at 6.5 s less the Deployment's rollout of 2 s.
		"| 2 s | 3 s | 5 s | 4 s | 6 s | 6.5 s | 4.5 s |",
		"restart, warpdrive-operator, first reconcile 19 s after its start:",
		"rolling restart, warpdrive-operator, first reconcile 21 s after its start, the old one stopped 20 s after it:",
		"| 1 s | 1 s | - | - | - | 2 s | - |",
		// Ready less the Deployment's rollout of 1 s.
		"| 1 s | 20.5 s | 21.5 s | 21 s | 22 s | 23.2 s | 22.2 s |",
		"| 21 s | 2.5 s | - | - | - | - | - |",
		"restart, " + stockName + ", first reconcile none seen:",
		"| 1 s | - | - | - | - | - | - |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "| edit made |") != 4 {
		t.Errorf("want one table per phase with edits, none for the quiet phase without:\n%s", got)
	}
	if editsTables(runs[:0]) != "" {
		t.Error("no phase, yet a table")
	}
}

func TestTenantBRecordsEachStepOnce(t *testing.T) {
	b := &tenantB{cpuAt: map[int64]time.Time{}, readyAt: map[int64]time.Time{},
		recordedAt: map[int64]time.Time{}, rolledAt: map[int64]time.Time{}}
	cr := func(observed int64, revision int64, rolledOut string, ready string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"generation": int64(2)},
			"status": map[string]any{
				"observedGeneration": observed,
				"chart":              map[string]any{"revision": revision},
				"conditions": []any{
					map[string]any{"type": "RolledOut", "status": "True", "observedGeneration": observed,
						"message": rolledOut, "reason": "RolledOut", "lastTransitionTime": "2026-11-29T00:00:00Z"},
					map[string]any{"type": "Ready", "status": ready, "observedGeneration": int64(2),
						"reason": "Ready", "lastTransitionTime": "2026-11-29T00:00:00Z"},
				},
			},
		}}
	}
	// The manager recorded generation 2 at revision 3; the sidecar still names revision 2.
	b.cr(cr(2, 3, "release revision 2: 1 workload(s) rolled out", "False"))
	recorded := b.recordedAt[2]
	if recorded.IsZero() || len(b.rolledAt) != 0 || len(b.readyAt) != 0 {
		t.Fatalf("after the manager's record: recorded %v, rolled out %v, ready %v", b.recordedAt, b.rolledAt, b.readyAt)
	}
	b.cr(cr(2, 3, "release revision 3: 1 workload(s) rolled out", "False"))
	if b.rolledAt[2].IsZero() || len(b.readyAt) != 0 {
		t.Fatalf("after the sidecar's word on revision 3: rolled out %v, ready %v", b.rolledAt, b.readyAt)
	}
	b.cr(cr(2, 3, "release revision 3: 1 workload(s) rolled out", "True"))
	if b.readyAt[2].IsZero() || !b.recordedAt[2].Equal(recorded) {
		t.Fatalf("after Ready: ready %v, recorded %v (first seen %v)", b.readyAt, b.recordedAt, recorded)
	}
}

func TestTenantBRecordsTheDeploymentsRolloutDone(t *testing.T) {
	b := &tenantB{cpuAt: map[int64]time.Time{}, doneAt: map[int64]time.Time{}}
	// deployment is B's Deployment with the pods' CPU request milli at generation 3, which the
	// deployment controller has seen at observed, its Progressing condition at reason.
	deployment := func(milli, observed int64, reason string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "app-0000", Generation: 3},
			// The API server defaults progressDeadlineSeconds to 600; without it kstatus takes
			// the rollout for progressing whatever its condition says.
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), ProgressDeadlineSeconds: ptr.To[int32](600), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}}},
			}}},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: reason},
			}},
		}
	}
	// The spec of 60m written; the deployment controller has seen only the previous generation.
	b.deployment(deployment(60, 2, "NewReplicaSetAvailable"))
	if b.cpuAt[60].IsZero() || len(b.doneAt) != 0 {
		t.Fatalf("spec written, not yet seen by the deployment controller: cpu %v, done %v", b.cpuAt, b.doneAt)
	}
	b.deployment(deployment(60, 3, "ReplicaSetUpdated"))
	if len(b.doneAt) != 0 {
		t.Fatalf("rollout under way, yet recorded done: %v", b.doneAt)
	}
	b.deployment(deployment(60, 3, "NewReplicaSetAvailable"))
	done := b.doneAt[60]
	if done.IsZero() {
		t.Fatalf("rollout done, not recorded: %v", b.doneAt)
	}
	b.deployment(deployment(60, 3, "NewReplicaSetAvailable"))
	if !b.doneAt[60].Equal(done) {
		t.Errorf("a later update moved the rollout's time: %v, first %v", b.doneAt[60], done)
	}
}

func TestReadyLessRollout(t *testing.T) {
	e := fairEditFigures{deploy: 2 * time.Second, deployDone: 3500 * time.Millisecond, ready: 5 * time.Second}
	if got := e.readyLessRollout(); got != 3500*time.Millisecond {
		t.Errorf("Ready 5 s less a rollout of 1.5 s: got %v", got)
	}
	e.deployDone = 0
	if got := e.readyLessRollout(); got != 0 {
		t.Errorf("rollout not seen: got %v, want 0 (shown as -)", got)
	}
}
