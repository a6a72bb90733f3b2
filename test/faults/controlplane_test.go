package faults

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// restartComponent kills one process of the local cluster and starts it again with the same
// command line (hack/cluster-restart.sh), and waits until it answers.
func restartComponent(t testing.TB, component string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.Root, "hack", "cluster-restart.sh"), component)
	cmd.Env = append(cmd.Environ(), "CLUSTER_DIR="+filepath.Dir(env.Kubeconfig))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("restarting %s: %v\n%s", component, err, out)
	}
	t.Logf("%s", out)
}

// restartMidWork restarts a component of the control plane while the operator still has
// work to do in ns: the test would prove nothing if the operator were idle.
func restartMidWork(t testing.TB, ns, component string) {
	t.Helper()
	s, err := snapshot(context.Background(), ns, appService)
	if err != nil {
		t.Fatal(err)
	}
	pending := len(s.notConverged())
	if pending == 0 {
		t.Fatalf("restarting %s: the operator has already done all the work", component)
	}
	t.Logf("restarting %s with %d of %d CRs not at their spec yet", component, pending, len(s.crs))
	restartComponent(t, component)
}

// sidecarConverged says why the sidecar's status of cr does not report its spec's replicas,
// all available, for its current generation; or nil.
func sidecarConverged(k kind, cr *unstructured.Unstructured) error {
	want := k.replicas(cr)
	get := func(field string) int64 {
		n, _, _ := unstructured.NestedInt64(cr.Object, "status", field)
		return n
	}
	if get("replicas") != want || get("availableReplicas") != want || get("observedGeneration") != cr.GetGeneration() {
		return fmt.Errorf("%s %s: status replicas %d, available %d at generation %d; want %d at generation %d",
			cr.GetKind(), cr.GetName(), get("replicas"), get("availableReplicas"), get("observedGeneration"), want, cr.GetGeneration())
	}
	return nil
}

// waitAllConverged waits until every CR of kind k in ns is at its spec, by the manager (the
// release and workload) and by the sidecar (its status).
func waitAllConverged(t testing.TB, ns string, k kind) *state {
	t.Helper()
	var s *state
	framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
		var err error
		if s, err = snapshot(ctx, ns, k); err != nil {
			return err
		}
		bad := s.notConverged()
		for _, cr := range s.crs {
			if err := sidecarConverged(k, cr); err != nil {
				bad = append(bad, err.Error())
			}
		}
		if len(bad) > 0 {
			return fmt.Errorf("%d problems in %s, e.g. %v", len(bad), ns, bad[:min(3, len(bad))])
		}
		return nil
	})
	return s
}

// TestControlPlaneRestart: during a wave of CR edits, kube-apiserver is killed and
// restarted, then etcd. Both containers ride it out in the same processes (they reconnect;
// neither exits, not even for lost leadership), and every CR ends at its last spec, both
// its release and its status.
func TestControlPlaneRestart(t *testing.T) {
	n, edits := 100, size(100, 300)
	op := newOperator(t)
	ns := env.Namespace(t)
	manager, sidecar := op.manager(), op.sidecar()
	waitLeader(t, manager)
	waitLeader(t, sidecar)
	managerPid, sidecarPid := manager.Pid(), sidecar.Pid()

	name := func(i int) string { return fmt.Sprintf("app-%03d", i) }
	want := map[string]int64{}
	for i := range n {
		env.Create(t, appService.newCR(ns, name(i), 1))
		want[name(i)] = 1
	}
	waitAllConverged(t, ns, appService)

	t.Logf("a wave of %d edits over %d CRs; kube-apiserver restarted after a third, etcd after two thirds", edits, n)
	for i := range edits {
		switch i {
		case edits / 3:
			restartMidWork(t, ns, "kube-apiserver")
		case 2 * edits / 3:
			restartMidWork(t, ns, "etcd")
		}
		cr := name(i % n)
		want[cr] = (want[cr] + 1) % 3
		// A user's edit made while the apiserver is coming back is retried, as kubectl would be.
		framework.Eventually(t, time.Minute, func(ctx context.Context) error {
			return appService.setReplicas(ctx, appService.newCR(ns, cr, 0), want[cr])
		})
		time.Sleep(50 * time.Millisecond) // a wave, not a burst: the restarts land mid-work
	}

	s := waitAllConverged(t, ns, appService)
	expectExactly(t, ns, s, want)
	for _, p := range []*proc{manager, sidecar} {
		if p.Exited() {
			t.Errorf("%s exited during the restarts: see %s", p.Name, p.Log)
		}
	}
	if manager.Pid() != managerPid || sidecar.Pid() != sidecarPid {
		t.Errorf("pids changed: manager %d -> %d, sidecar %d -> %d", managerPid, manager.Pid(), sidecarPid, sidecar.Pid())
	}
	if !manager.isLeader() || !sidecar.isLeader() {
		t.Errorf("leadership lost: manager %v, sidecar %v", manager.isLeader(), sidecar.isLeader())
	}
}
