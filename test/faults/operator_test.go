package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/mgropts"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// Leader election as both binaries configure it (controller-runtime's Lease duration, a try
// every mgropts.LeaderRetryPeriod): a leader that is killed holds the Lease until it expires,
// so a standby or a restarted process takes over within leaseDuration + retryPeriod of the
// kill, give or take the try's jitter, which the waits' margin covers.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = mgropts.LeaderRetryPeriod
)

// proc is one operator process and where it serves its metrics (plain HTTP on loopback).
type proc struct {
	*framework.Process
	metrics string
}

// operator starts and restarts the processes of the manager pod for one test. All of them
// elect their leaders through Leases named after the test, so that a Lease left by another
// test's killed process does not hold this one up.
type operator struct {
	t     testing.TB
	lease string
	procs []*proc
}

// newOperator is called before the test makes its namespaces, so that its processes are
// stopped after the namespaces' cleanup, which needs a manager to uninstall the releases.
func newOperator(t testing.TB) *operator {
	o := &operator{t: t, lease: "faults-" + framework.Slug(t.Name(), 30) + "-" + rand.String(5)}
	t.Cleanup(func() {
		for _, p := range o.procs {
			if !p.Exited() {
				p.Stop()
			}
		}
	})
	return o
}

// manager starts a manager (or the stock helm-operator, see stock) with leader election.
func (o *operator) manager() *proc {
	o.t.Helper()
	return o.start("manager", framework.ProcessOptions{Stock: stock})
}

// sidecar starts a sidecar with leader election.
func (o *operator) sidecar() *proc {
	o.t.Helper()
	return o.start("sidecar", framework.ProcessOptions{})
}

// start starts a process of container ("manager" or "sidecar"), leader-elected through the
// test's Lease for that container, its metrics on a free loopback port, with opts' flags
// after those.
func (o *operator) start(container string, opts framework.ProcessOptions) *proc {
	o.t.Helper()
	addr, err := framework.FreeAddr()
	if err != nil {
		o.t.Fatal(err)
	}
	binary, start := "sidecar", env.StartSidecar
	if container == "manager" {
		binary, start = framework.ManagerBinary(opts.Stock), env.StartManager
	}
	opts.Name = fmt.Sprintf("%s-%s-%d", o.lease, binary, len(o.procs)+1)
	opts.MetricsAddr = addr
	opts.Flags = append([]string{"--leader-election-id=" + o.lease + "-" + container}, opts.Flags...)
	p, err := start(opts)
	if err != nil {
		o.t.Fatal(err)
	}
	o.t.Logf("started %s (pid %d), log %s", binary, p.Pid(), p.Log)
	o.procs = append(o.procs, &proc{Process: p, metrics: addr})
	return o.procs[len(o.procs)-1]
}

// isLeader reports whether p holds its Lease.
func (p *proc) isLeader() bool {
	n, err := framework.Metric(p.metrics, "leader_election_master_status")
	return err == nil && n == 1
}

// reconciles is how many reconciles p has run, of every controller.
func (p *proc) reconciles() (float64, error) {
	return framework.Metric(p.metrics, "controller_runtime_reconcile_total")
}

// waitLeader waits until one of ps leads, and returns it. The wait is bounded by what a
// take-over may take after a leader was killed: the Lease's expiry and a retry.
func waitLeader(t testing.TB, ps ...*proc) *proc {
	t.Helper()
	var leader *proc
	framework.Eventually(t, 2*(leaseDuration+retryPeriod)+10*time.Second, func(context.Context) error {
		for _, p := range ps {
			if !p.Exited() && p.isLeader() {
				leader = p
				return nil
			}
		}
		return fmt.Errorf("none of %d processes leads", len(ps))
	})
	return leader
}

// leaseOf reads the Lease that the manager's ("manager") or the sidecar's ("sidecar")
// processes of o elect their leader with.
func (o *operator) leaseOf(ctx context.Context, container string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: env.LeaseNamespace, Name: o.lease + "-" + container}, l)
	return l, err
}
