package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestFailover: two replicas of each container, as a Deployment of two pods would run them.
// Each CR is created and then edited a few times, each edit once the previous one is
// deployed; in the middle of that work the leading manager and the leading sidecar are
// killed. The standbys did nothing while the leaders lived, take the Leases over once they
// expire, and finish the work: every release has exactly one revision per spec (no double
// writes; a revision left pending by the kill is marked failed and retried, and only that
// adds one), and every CR's status is complete (nothing lost).
func TestFailover(t *testing.T) {
	n, edits := size(30, 100), 3
	op := newOperator(t)
	ns := env.Namespace(t)
	// Every revision kept (0: the whole history), so that each write is counted below.
	keepAll := framework.ProcessOptions{Stock: stock, Flags: []string{"--max-release-history=0"}}
	managers := []*proc{op.start("manager", keepAll), op.start("manager", keepAll)}
	sidecars := []*proc{op.sidecar(), op.sidecar()}
	leaderM, leaderS := waitLeader(t, managers...), waitLeader(t, sidecars...)
	standbyM, standbyS := other(managers, leaderM), other(sidecars, leaderS)

	name := func(i int) string { return fmt.Sprintf("app-%03d", i) }
	want, edited := map[string]int64{}, map[string]int{} // replicas asked for; edits made
	for i := range n {
		env.Create(t, appService.newCR(ns, name(i), 1))
		want[name(i)] = 1
	}

	// One loop drives every CR: the next edit as soon as the previous spec is deployed (by the
	// manager) and reported (by the sidecar). Once a third of the work is done, both leaders
	// are killed.
	total := n * (edits + 1)
	var killed, managerTookOver, sidecarTookOver time.Time
	before := map[string]*coordinationv1.Lease{} // the Leases as the killed leaders left them
	framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
		s, err := snapshot(ctx, ns, appService)
		if err != nil {
			return err
		}
		progress := 0
		for _, cr := range s.crs {
			name := cr.GetName()
			atSpec := s.converged(cr) == nil && sidecarConverged(appService, cr) == nil && appService.replicas(cr) == want[name]
			if atSpec && edited[name] < edits {
				edited[name]++
				want[name] = (want[name] + 1) % 3
				if err := appService.setReplicas(ctx, cr, want[name]); err != nil {
					return err
				}
				atSpec = false
			}
			progress += edited[name]
			if atSpec {
				progress++
			}
		}
		if killed.IsZero() && progress >= total/3 {
			for _, p := range []*proc{standbyM, standbyS} {
				if n, err := p.reconciles(); err != nil || n != 0 {
					return fmt.Errorf("standby %s ran %v reconciles while its leader lived (%v)", p.Name, n, err)
				}
			}
			for _, c := range []string{"manager", "sidecar"} {
				if before[c], err = op.leaseOf(ctx, c); err != nil {
					return err
				}
			}
			t.Logf("killing the leaders (%s, %s) at %d/%d of the work", leaderM.Name, leaderS.Name, progress, total)
			leaderM.Kill()
			leaderS.Kill()
			killed = time.Now()
		}
		if !killed.IsZero() && managerTookOver.IsZero() && standbyM.isLeader() {
			managerTookOver = time.Now()
		}
		if !killed.IsZero() && sidecarTookOver.IsZero() && standbyS.isLeader() {
			sidecarTookOver = time.Now()
		}
		if progress < total {
			return fmt.Errorf("%d/%d of the work done", progress, total)
		}
		return nil
	})
	if killed.IsZero() {
		t.Fatal("the work ended before the leaders were killed")
	}
	// The standbys lead now; each took the Lease once the killed leader's had expired.
	waitLeader(t, standbyM)
	waitLeader(t, standbyS)
	t.Logf("take-over seen after the kill: manager %s, sidecar %s (lease duration %s)",
		managerTookOver.Sub(killed).Round(time.Second), sidecarTookOver.Sub(killed).Round(time.Second), leaseDuration)
	for _, c := range []string{"manager", "sidecar"} {
		after, err := op.leaseOf(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		old, now := ptr.Deref(before[c].Spec.HolderIdentity, ""), ptr.Deref(after.Spec.HolderIdentity, "")
		if now == old || after.Spec.AcquireTime == nil || before[c].Spec.RenewTime == nil {
			t.Errorf("%s Lease: holder %q before the kill, %q after; want the standby", c, old, now)
			continue
		}
		t.Logf("%s Lease: last renewed by the killed leader at %s, acquired by the standby %s later",
			c, before[c].Spec.RenewTime.Format(time.TimeOnly), after.Spec.AcquireTime.Sub(before[c].Spec.RenewTime.Time).Round(100*time.Millisecond))
	}
	for _, p := range []*proc{standbyM, standbyS} {
		if n, err := p.reconciles(); err != nil || n == 0 {
			t.Errorf("%s leads but ran no reconcile (%v, %v)", p.Name, n, err)
		}
	}

	// No double writes: one revision per spec of each CR, plus one per revision a kill left
	// pending (marked failed, then retried).
	s := waitAllConverged(t, ns, appService)
	expectExactly(t, ns, s, want)
	for name, revs := range s.releases {
		specs, repaired := 0, 0
		for i, r := range revs {
			rel, err := r.decoded()
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case r.version != i+1:
				t.Errorf("release %s: revisions %v, want 1, 2, ... without gaps", name, versions(revs))
			case strings.Contains(rel.Info.Description, "marked failed by warpdrive-operator"):
				repaired++
			case r.status == "deployed" || r.status == "superseded":
				specs++
			default:
				t.Errorf("release %s revision %d is %s (%s)", name, r.version, r.status, rel.Info.Description)
			}
		}
		if specs != edits+1 {
			t.Errorf("release %s: %d revisions for %d specs (%v); a double write or a lost one", name, specs, edits+1, versions(revs))
		}
		if repaired > 0 {
			t.Logf("release %s: %d revisions left pending by the kill, repaired", name, repaired)
		}
	}
}

func versions(revs []revision) []string {
	var out []string
	for _, r := range revs {
		out = append(out, fmt.Sprintf("%d:%s", r.version, r.status))
	}
	return out
}

// other is the process of ps that is not p.
func other(ps []*proc, p *proc) *proc {
	for _, q := range ps {
		if q != p {
			return q
		}
	}
	return nil
}

// TestGracefulHandover: a leader stopped as Kubernetes stops a pod (SIGTERM, for a rolling
// update or a node drain) releases its Lease on the way out and exits 0, so its standby takes
// over at its next retry instead of waiting for the Lease to expire; then the new leaders
// serve a new CR. The release is seen as a version of the Lease with no holder, between the
// old leader's and the standby's.
func TestGracefulHandover(t *testing.T) {
	// The kubelet kills a container still running this long after SIGTERM: the manager pod's
	// terminationGracePeriodSeconds (config/manager/manager.yaml).
	const podGracePeriod = 45 * time.Second
	op := newOperator(t)
	ns := env.Namespace(t)
	for _, c := range []struct {
		container string
		start     func() *proc
	}{{"manager", op.manager}, {"sidecar", op.sidecar}} {
		ps := []*proc{c.start(), c.start()}
		leader := waitLeader(t, ps...)
		standby := other(ps, leader)
		lease, err := op.leaseOf(context.Background(), c.container)
		if err != nil {
			t.Fatal(err)
		}
		old := ptr.Deref(lease.Spec.HolderIdentity, "")

		ctx, cancel := context.WithTimeout(context.Background(), 2*(leaseDuration+retryPeriod)+10*time.Second)
		w, err := env.Clientset.CoordinationV1().Leases(lease.Namespace).Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + lease.Name, ResourceVersion: lease.ResourceVersion})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		stopped := time.Now()
		leader.StopWithin(podGracePeriod)
		if code := leader.ExitCode(); code != 0 {
			t.Errorf("%s exited with %d after SIGTERM (killed if still running after the pod's grace period, %s), want 0 (see %s)", leader.Name, code, podGracePeriod, leader.Log)
		}
		var holders []string // each holder the Lease had after the stop, "" for none
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordinationv1.Lease)
			if !ok {
				break
			}
			h := ptr.Deref(l.Spec.HolderIdentity, "")
			if len(holders) == 0 || holders[len(holders)-1] != h {
				holders = append(holders, h)
			}
			if h != "" && h != old {
				break
			}
		}
		w.Stop()
		cancel()
		t.Logf("%s: Lease holders after the stop %q; the standby held it %s after SIGTERM (lease duration %s)",
			c.container, holders, time.Since(stopped).Round(100*time.Millisecond), leaseDuration)
		if len(holders) < 2 || holders[len(holders)-2] != "" || holders[len(holders)-1] == old || holders[len(holders)-1] == "" {
			t.Errorf("%s Lease holders after the stop: %q, want it released (\"\") and then taken by the standby", c.container, holders)
		}
		waitLeader(t, standby)
	}

	env.Create(t, appService.newCR(ns, "after-handover", 2))
	waitAllConverged(t, ns, appService)
}
