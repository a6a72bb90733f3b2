package operator

import (
	"fmt"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Helm records each install, upgrade and rollback as a new revision in state pending-install,
// pending-upgrade or pending-rollback, applies the objects, and only then records the outcome.
// A manager killed in between (a crash, an OOM kill, a node lost), or one that loses the
// apiserver before it can record the outcome, leaves the last revision pending for ever: Helm
// refuses every later upgrade of the release ("another operation (install/upgrade/rollback)
// is in progress"), the helm-operator reports the CR Irreconcilable, and the CR stays at its
// old state until someone repairs the release by hand. The stock helm-operator (v0.9.1) does
// exactly that.
//
// pendingRepair does the repair itself: when the reconciler reads a release whose last
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
// outcome. The first case is told apart in the process (operations): reconciles of one CR
// never run at once, and each reconciler sees only its own chart's releases (newReleaseGuard,
// which this wraps), but the check does not rely on either. Without leader election, running
// more than one manager is unsafe anyway (they would race on every upgrade).

// pendingReleaseRepaired is the reason of the Event on a CR whose release was repaired.
const pendingReleaseRepaired = "PendingReleaseRepaired"

// needsRepair reports whether rel, the last revision of a release, is pending with no
// operation of this process running on it.
func needsRepair(rel *release.Release, running bool) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status.IsPending() && !running
}

// operations counts the Helm operations of this process in progress, per release.
type operations struct {
	mu      sync.Mutex
	running map[string]int
}

func newOperations() *operations { return &operations{running: map[string]int{}} }

func releaseKey(namespace, name string) string { return namespace + "/" + name }

// start records an operation on a release until the returned func is called.
func (o *operations) start(key string) (done func()) {
	o.mu.Lock()
	o.running[key]++
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		if o.running[key]--; o.running[key] <= 0 {
			delete(o.running, key)
		}
		o.mu.Unlock()
	}
}

func (o *operations) isRunning(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.running[key] > 0
}

// withPendingRepair hands out action clients that repair pending releases (see above).
func withPendingRepair(getter helmclient.ActionClientGetter, recorder record.EventRecorder, ops *operations) helmclient.ActionClientGetter {
	return wrapActionClients(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return repairingClient{ActionInterface: c, obj: cr, recorder: recorder, ops: ops}
	})
}

type repairingClient struct {
	helmclient.ActionInterface
	obj      client.Object // the CR: a release lives in its CR's namespace
	recorder record.EventRecorder
	ops      *operations
}

// Get returns the last revision of the release, repaired first if it was left pending. A
// request for a given revision (an option) is passed on as it is.
func (c repairingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil || len(opts) > 0 || !needsRepair(rel, c.ops.isRunning(releaseKey(c.obj.GetNamespace(), name))) {
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

// Install and Upgrade record their operation while it runs (see operations). When one
// fails, the revisions it leaves pending are repaired at once: helm-operator-plugins rolls a
// failed upgrade back to a new revision, so a revision whose outcome could not be recorded
// (the apiserver or etcd lost mid-operation) ends below the last one, where the repair on Get
// would never see it, and stays pending in the history.
func (c repairingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	done := c.ops.start(releaseKey(namespace, name))
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	done()
	if err != nil {
		c.repairHistory(name, chrt)
	}
	return rel, err
}

func (c repairingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	done := c.ops.start(releaseKey(namespace, name))
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	done()
	if err != nil && !isDryRun(opts) {
		c.repairHistory(name, chrt)
	}
	return rel, err
}

func (c repairingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	defer c.ops.start(releaseKey(c.obj.GetNamespace(), name))()
	return c.ActionInterface.Uninstall(name, opts...)
}

// repairHistory marks failed every revision of the release, of chart chrt, still pending
// after an operation on it failed. It is best effort: what it cannot read or write now (the apiserver still
// away), the repair on Get does for the last revision at the next reconcile.
func (c repairingClient) repairHistory(name string, chrt *chart.Chart) {
	if c.ops.isRunning(releaseKey(c.obj.GetNamespace(), name)) {
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
