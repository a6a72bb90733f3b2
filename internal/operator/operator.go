// Package operator sets up the helm-operator's reconcilers: one per kind in watches.yaml, each
// installing, upgrading and uninstalling the kind's CRs as Helm releases of its chart. The
// Helm engine is helm-operator-plugins' reconciler, configured as its stock `run` command
// configures it, with these differences:
//
//   - the reconcilers' status writes keep status fields they do not own (statusclient.go), so
//     that the sidecar's replica counts survive every install, upgrade and failure;
//   - an update of a CR's status alone does not start a reconcile (events.go): only a change
//     of what the release should be does;
//   - a reconciler touches only releases of its own chart (releaseguard.go): a CR named like
//     another kind's CR in its namespace cannot take over that CR's release;
//   - the objects of each release are watched, so that a hand edit or deletion is repaired at
//     once: the stock command (v0.9.1) turns these watches off when watchDependentResources is
//     true, its default, and leaves drift to the periodic reconcile, every minute;
//   - a watch's own reconcilePeriod and maxConcurrentReconciles in watches.yaml are honoured
//     (the stock command reads only its flags);
//   - a release left pending by an interrupted operation is marked failed and retried
//     (pendingrepair.go); a CR whose release Secrets were deleted under it (with its
//     namespace) still has its cluster-scoped objects deleted (orphansweep.go); failed Helm
//     operations are recorded as Events on the CR (releaseevents.go).
package operator

import (
	"fmt"
	"strings"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/annotation"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Options are the defaults for every watch; watches.yaml may override them per kind.
type Options struct {
	WatchesFile             string
	ReconcilePeriod         time.Duration
	MaxConcurrentReconciles int
	MaxReleaseHistory       int
}

// Setup adds a helm reconciler to mgr for every kind in the watches file.
func Setup(mgr ctrl.Manager, opts Options) error {
	ws, err := watches.Load(opts.WatchesFile)
	if err != nil {
		return fmt.Errorf("loading %s: %w", opts.WatchesFile, err)
	}
	cl := statusKeepingClient{Client: mgr.GetClient()}
	actionClients, err := newActionClientGetter(mgr)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("operator")
	ops := newOperations() // Helm operations in progress, across kinds: see pendingrepair.go
	for _, w := range ws {
		period, concurrency := opts.ReconcilePeriod, opts.MaxConcurrentReconciles
		if w.ReconcilePeriod != nil {
			period = w.ReconcilePeriod.Duration
		}
		if w.MaxConcurrentReconciles != nil {
			concurrency = *w.MaxConcurrentReconciles
		}
		// The reconciler's own recorder name, so that these Events share its source.
		recorder := mgr.GetEventRecorderFor(strings.ToLower(w.GroupVersionKind.Kind) + "-controller")
		getter := newReleaseGuard(actionClients, w.Chart)
		getter = withPendingRepair(getter, recorder, ops)
		getter = withOrphanSweep(getter, recorder)
		getter = withReleaseEvents(getter, recorder)
		r, err := reconciler.New(
			reconciler.WithChart(*w.Chart),
			reconciler.WithGroupVersionKind(w.GroupVersionKind),
			reconciler.WithOverrideValues(w.OverrideValues),
			reconciler.WithSelector(*w.Selector),
			// The stock run command passes watchDependentResources itself here, so its
			// default (true) turns the watches off and drift waits for the periodic pass.
			reconciler.SkipDependentWatches(!*w.WatchDependentResources),
			reconciler.WithMaxConcurrentReconciles(concurrency),
			reconciler.WithReconcilePeriod(period),
			reconciler.WithMaxReleaseHistory(opts.MaxReleaseHistory),
			reconciler.WithInstallAnnotations(annotation.DefaultInstallAnnotations...),
			reconciler.WithUpgradeAnnotations(annotation.DefaultUpgradeAnnotations...),
			reconciler.WithUninstallAnnotations(annotation.DefaultUninstallAnnotations...),
			reconciler.WithClient(cl),
			reconciler.WithActionClientGetter(getter),
		)
		if err != nil {
			return fmt.Errorf("reconciler for %s: %w", w.GroupVersionKind, err)
		}
		if err := r.SetupWithManager(withoutStatusUpdates(mgr, w.GroupVersionKind)); err != nil {
			return fmt.Errorf("controller for %s: %w", w.GroupVersionKind, err)
		}
		log.Info("watching", "gvk", w.GroupVersionKind, "chart", w.ChartPath,
			"reconcilePeriod", period, "maxConcurrentReconciles", concurrency)
	}
	return nil
}
