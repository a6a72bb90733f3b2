package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
)

// pendingReleaseRepaired is the reason of the Event on a CR whose release was repaired.
const pendingReleaseRepaired = "PendingReleaseRepaired"

// needsRepair reports whether rel, the last revision of a release, is pending with no
// operation of this process running on it.
func needsRepair(rel *release.Release, running bool) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status.IsPending() && !running
}

// staleAfter is the age past which a pending revision is taken as abandoned even if its
// time says it was written after this process became the leader: that time is the writer's
// clock, which may run ahead of this one. No operation of the operator runs this long (it
// does not wait for workloads).
const staleAfter = 10 * time.Minute

// Operations tracks the Helm operations of this process, per release, and tells which
// pending revisions the repair may take over. Setup makes one, shared by every kind's pipeline.
//
// The repair must never break the lock of a live operation. The records it sees are the
// operator's own (signed, see trustedconfig.Configs: a person's `helm upgrade` writes
// unsigned records, which the operator never reads), so a live operation on them can only
// be one of this process, or of another manager of this operator. Under leader election
// another manager runs operations only while it leads, and it stops leading before this one
// can start, so every operation it started began before this process became the leader
// (electedAt). Without leader election nothing tells another manager's live operation from
// a dead one, and nothing is repaired.
type Operations struct {
	mu      sync.Mutex
	running map[string]int
	ours    map[string]bool // releases on which this process has run an operation
	// electedAt is when this process became the leader; zero until then, and for ever
	// without leader election (no repair).
	electedAt time.Time
}

// NewOperations tracks no operation yet, and leads not yet (Elected).
func NewOperations() *Operations {
	return &Operations{running: map[string]int{}, ours: map[string]bool{}}
}

// Elected records that this process leads from now on: Setup calls it once elected.
func (o *Operations) Elected(at time.Time) {
	o.mu.Lock()
	o.electedAt = at
	o.mu.Unlock()
}

// start records an operation on a release until the returned func is called.
func (o *Operations) start(key string) (done func()) {
	o.mu.Lock()
	o.running[key]++
	o.ours[key] = true
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		if o.running[key]--; o.running[key] <= 0 {
			delete(o.running, key)
		}
		o.mu.Unlock()
	}
}

func (o *Operations) isRunning(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running[key] > 0
}

// forget drops what is known of a release that is gone.
func (o *Operations) forget(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.running[key] == 0 {
		delete(o.ours, key)
	}
}

// mayRepair reports whether the pending revision rel of the release key is abandoned: no
// operation of this process runs on it, and its operation was this process's own, or began
// before this process became the leader (or long enough ago, see staleAfter).
func (o *Operations) mayRepair(key string, rel *release.Release, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.electedAt.IsZero() || o.running[key] > 0 {
		return false
	}
	if o.ours[key] {
		return true
	}
	started := rel.Info.LastDeployed.Time
	return started.Before(o.electedAt) || now.Sub(started) > staleAfter
}

// withPendingRepair hands out action clients that repair pending releases (see
// repairingClient).
func withPendingRepair(getter helmclient.ActionClientGetter, recorder record.EventRecorder, ops *Operations) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return repairingClient{ActionInterface: c, obj: cr, recorder: recorder, ops: ops}
	})
}

// repairingClient is the pending repair, the layer over the release guard (see pipeline.go).
//
// Helm records each install, upgrade and rollback as a new revision in state pending-install,
// pending-upgrade or pending-rollback, applies the objects, and only then records the outcome.
// A manager killed in between (a crash, an OOM kill, a node lost), or one that loses the
// apiserver before it can record the outcome, leaves the last revision pending for ever: Helm
// refuses every later upgrade of the release ("another operation (install/upgrade/rollback)
// is in progress"), the helm-operator reports the CR Irreconcilable, and the CR stays at its
// old state until someone repairs the release by hand. The stock helm-operator (v0.9.1) does
// exactly that.
//
// repairingClient does the repair itself: when the reconciler reads a release whose last
// revision is pending and no operation of this process is running on it, that revision is
// marked failed through Helm's own storage (status and description, as a failed upgrade
// leaves it), and an Event on the CR says so. The reconciler then goes on as after any
// failed release: it upgrades it to the CR's spec (Helm upgrades a failed revision, and a
// release whose only revision failed, from the last deployed one or from that revision).
//
// Why it is safe: only the leader runs reconcilers, so only the leader runs Helm operations;
// the Lease guarantees that no other manager holds it (a manager that cannot renew it stops
// before it can expire, and a new leader is elected only once it has expired). A revision
// found pending by the leader is thus either its own operation still running, or one left by
// a manager that is gone or by an operation of its own that has ended without recording its
// outcome. The first case is told apart in the process (Operations): reconciles of one CR
// never run at once, and each reconciler sees only its own chart's releases (releaseguard.New,
// which this wraps), but the check does not rely on either. Only revisions the operator
// wrote are ever seen (signed records), and only those an operation could no longer be
// running on are repaired (see Operations.mayRepair). Without leader election nothing is
// repaired: another manager's live operation could not be told from a dead one.
type repairingClient struct {
	helmclient.ActionInterface
	obj      client.Object // the CR: a release lives in its CR's namespace
	recorder record.EventRecorder
	ops      *Operations
}

// Get returns the last revision of the release, repaired first if it was left pending. A
// request for a given revision (an option) is passed on as it is.
func (c repairingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	key := releases.Key(c.obj.GetNamespace(), name)
	if err != nil || len(opts) > 0 || !needsRepair(rel, false) || !c.ops.mayRepair(key, rel, time.Now()) {
		return rel, err
	}
	return c.markFailed(rel)
}

// markFailed records the pending revision as failed, as Helm does when an operation fails.
func (c repairingClient) markFailed(rel *release.Release) (*release.Release, error) {
	pending := rel.Info.Status
	fixed := *rel
	info := *rel.Info
	info.Status = release.StatusFailed
	info.Description = fmt.Sprintf("%s interrupted: the operation that started it ended without recording its outcome (marked failed by warpdrive-operator)", pending)
	fixed.Info = &info
	if err := c.Config().Releases.Update(&fixed); err != nil {
		return nil, fmt.Errorf("release %s revision %d was left %s; marking it failed: %w", rel.Name, rel.Version, pending, err)
	}
	msg := fmt.Sprintf("release %s revision %d was left %s by an interrupted operation; marked failed and retried", rel.Name, rel.Version, pending)
	ctrl.Log.WithName("pending-repair").Info(msg, "namespace", c.obj.GetNamespace())
	c.recorder.Event(c.obj, corev1.EventTypeWarning, pendingReleaseRepaired, msg)
	return &fixed, nil
}

// Install and Upgrade record their operation while it runs (see Operations). When one
// fails, the revisions it leaves pending are repaired at once: helm-operator-plugins rolls a
// failed upgrade back to a new revision, so a revision whose outcome could not be recorded
// (the apiserver or etcd lost mid-operation) ends below the last one, where the repair on Get
// would never see it, and stays pending in the history.
func (c repairingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	done := c.ops.start(releases.Key(namespace, name))
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	done()
	if err != nil {
		c.repairHistory(name, chrt)
	}
	return rel, err
}

func (c repairingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	done := c.ops.start(releases.Key(namespace, name))
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	done()
	if err != nil && !actionclient.IsDryRun(opts) {
		c.repairHistory(name, chrt)
	}
	return rel, err
}

func (c repairingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	key := releases.Key(c.obj.GetNamespace(), name)
	done := c.ops.start(key)
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	done()
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		c.ops.forget(key)
	}
	return resp, err
}

// repairHistory marks failed every revision of the release, of chart chrt, still pending
// after an operation on it failed. It is best effort: what it cannot read or write now (the apiserver still
// away), the repair on Get does for the last revision at the next reconcile.
func (c repairingClient) repairHistory(name string, chrt *chart.Chart) {
	key := releases.Key(c.obj.GetNamespace(), name)
	if c.ops.isRunning(key) || !c.ops.mayRepair(key, &release.Release{Info: &release.Info{}}, time.Now()) {
		return
	}
	history, err := c.Config().Releases.History(name)
	if err != nil {
		return
	}
	for _, rel := range history {
		if needsRepair(rel, false) && rel.Chart != nil && chrt != nil && rel.Chart.Name() == chrt.Name() {
			_, _ = c.markFailed(rel) // logged and recorded as an Event when it succeeds
		}
	}
}
