package faults

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestRolloutSurvivesKills: a new chart rolls out over 30 CRs (of the memcached chart, under
// a kind of their own: framework.RolloutGVK) in waves (two canaries,
// then 10%, 25%, 50%, 100%), and the manager is killed (SIGKILL) as soon as each of the
// second, third and fourth waves has begun. Each new manager goes on from the cluster: it
// carries no memory of the rollout, so it must find the wave where it was from the CRs'
// status. Two watches order every version of the CRs and their Deployments: every wave
// starts only once the waves before are Ready on the new chart (none is skipped or
// started early across a kill), and every CR ends Ready on it.
func TestRolloutSurvivesKills(t *testing.T) {
	if stock {
		t.Skip("the stock helm-operator has no chart rollouts")
	}
	const policy = "canaries:2,waves:10/25/50/100,timeout:5m,minready:3s"
	pol, err := rollout.Parse(policy)
	if err != nil {
		t.Fatal(err)
	}
	n := size(30, 60)
	op := newOperator(t)
	ns := env.Namespace(t)
	chart := env.NewChartCopy(t)
	startManager := func() *proc {
		return op.start("manager", framework.ProcessOptions{WatchesFile: chart.WatchesFile(), Flags: []string{"--rollout=" + framework.RolloutGVK.Kind + "=" + policy}})
	}
	m := startManager()
	op.start("sidecar", framework.ProcessOptions{WatchesFile: chart.WatchesFile()})
	t.Cleanup(func() {
		if m.Exited() {
			m = startManager()
		}
		if err := chart.DeleteCRs(context.Background(), ns); err != nil {
			t.Errorf("deleting the CRs: %v", err)
		}
	})

	var names, keys []string
	for i := range n {
		name := fmt.Sprintf("mc-%02d", i)
		if err := chart.Client.Create(context.Background(), chart.NewCR(ns, name)); err != nil {
			t.Fatal(err)
		}
		names, keys = append(names, name), append(keys, ns+"/"+name)
	}
	chart.WaitOnChart(t, convergeTimeout(), "0.1.0", names, ns)

	chart.Write(t, "0.2.0", "")
	pol.OrderKey = env.RolloutOrderKey(t)
	waves := framework.Waves(pol, keys)
	crLog := env.Record(t, framework.RolloutGVR, "", ns)
	deployLog := env.Record(t, schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "", ns)
	m.Stop()
	m = startManager()
	for w := 1; w <= 3; w++ {
		// Kill the manager the moment a Deployment of wave w takes the new chart.
		framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
			for _, name := range waves[w] {
				d := &appsv1.Deployment{}
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
					return err
				}
				if d.Spec.Template.Annotations[framework.PodChartAnnotation] == "0.2.0" {
					return nil
				}
			}
			return fmt.Errorf("wave %d has not begun", w+1)
		})
		t.Logf("wave %d began: killing the manager", w+1)
		m.Kill()
		m = startManager()
	}
	chart.WaitOnChart(t, convergeTimeout(), "0.2.0", names, ns)
	crLog.Stop()
	deployLog.Stop()
	problems, report := framework.WaveOrder(waves, crLog, deployLog, "0.2.0", chart.Digests["0.2.0"])
	for _, r := range report {
		t.Log(r)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
