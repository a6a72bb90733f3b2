// Package operator sets up the helm-operator's reconcilers: one per kind in watches.yaml, each
// installing, upgrading and uninstalling the kind's CRs as Helm releases of its chart. The
// Helm engine is helm-operator-plugins' reconciler, configured as its stock `run` command
// configures it, with these differences:
//
//   - the reconcilers' status writes keep status fields they do not own (statusclient.go), so
//     that the sidecar's replica counts survive every install, upgrade and failure;
//   - an update of a CR's status alone does not start a reconcile (informerfilters.go): only a change
//     of what the release should be does;
//   - release records are signed, and Helm reads only the operator's own (trustedconfig/,
//     internal/releasesign): a namespace editor cannot forge or alter a record to steer
//     the operator; refused records are reported on the CR (layer_recordreport.go);
//   - every release operation is confined to the release's namespace and the cluster-scoped
//     kinds its chart declares (trustedconfig/confinement.go), and hooks run only for charts that have
//     them;
//   - a reconciler touches only releases of its own chart (layer_releaseguard.go): a CR named like
//     another kind's CR in its namespace cannot take over that CR's release, even when both
//     are created at once;
//   - the objects of each release are watched, so that a hand edit or deletion is repaired at
//     once: the stock command (v0.9.1) turns these watches off when watchDependentResources is
//     true, its default, and leaves drift to the periodic reconcile, every minute;
//   - a watch's own reconcilePeriod and maxConcurrentReconciles in watches.yaml are honoured
//     (the stock command reads only its flags);
//   - a release left pending by an interrupted operation is marked failed and retried
//     (layer_pendingrepair.go); a CR whose release Secrets were deleted under it (with its
//     namespace) still has its cluster-scoped objects deleted (layer_orphansweep.go), and so does
//     a CR that went without any uninstall, such as by a finalizer removed by hand
//     (orphan_controller.go); failed Helm operations are recorded as Events on the CR
//     (layer_releaseevents.go);
//   - status.deployedRelease names the release's revision and chart version instead of
//     copying its rendered manifest (statusclient.go, layer_releaseversions.go), unless
//     Options.StatusReleaseManifest asks for the stock shape.
//
// # The pipeline
//
// Each reconciler runs Helm through a pipeline (pipeline.go): the Helm engine under a chain
// of action-client layers, from the engine outwards release guard, pending repair, orphan
// sweep, release events, record report and outcomes. The reconciler calls the outermost;
// each call goes down the chain to the engine and its result comes back up. One reconcile of
// a CR, as helm-operator-plugins' reconciler (v0.9.1) makes its calls, and the layers that
// act on each (a layer not named passes the call on):
//
//	ActionClientFor   every layer wraps the client for the CR; outcomes counts a failure
//	Get               guard: another chart's release is an error; repair: a pending
//	                  revision no operation runs on is marked failed; events: a Warning if
//	                  the release exists but cannot be read; record report; outcomes: failure
//	if the CR is being deleted:
//	  Uninstall       guard: another chart's release is "not found" and left alone;
//	                  repair: tracks the operation; sweep: no release left, so its
//	                  cluster-scoped objects are deleted; events: a Warning if it failed;
//	                  record report. No error, or "not found": the finalizer is removed.
//	otherwise, Get again (as above), then
//	  no release:     Install: guard: refused, under the name's lock, if another chart's
//	                  release appeared; repair: tracks it, and on failure marks its pending
//	                  revisions failed; events: Warning InstallFailed; record report;
//	                  outcomes: failure
//	  a release:      dry-run Upgrade (does the spec change the release?): guard, under the
//	                  lock; repair: tracks it; events: Warning UpgradeFailed; record
//	                  report; outcomes: DryRunFailed
//	    it changes, or the release failed: Get, then Upgrade: as the dry run, and repair
//	                  marks the pending revisions failed when it fails
//	    it does not:  Reconcile (repairs drifted objects): events: Warning ReconcileFailed;
//	                  outcomes: failure
//	success           the post-hook recordSuccess counts it in outcomes
//
// The outcomes are turned into Ready, Reconciling and Stalled by the readiness controller
// (readiness_controller.go).
package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/annotation"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/readiness"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
)

// Options are the defaults for every watch; watches.yaml may override them per kind.
type Options struct {
	WatchesFile             string
	ReconcilePeriod         time.Duration
	MaxConcurrentReconciles int
	MaxReleaseHistory       int
	// ReleaseListSecretsPerGET is how many Secrets of a namespace a LIST of one release's
	// records costs the API server as much as one GET: where a release's records cost fewer
	// GETs, they are read by name (internal/releaserecords).
	ReleaseListSecretsPerGET int
	// LeaderElection says that the manager elects a leader: pending releases are repaired
	// only then (see operations).
	LeaderElection bool
	// SigningKey is the Secret that holds the key release records are signed with (see
	// internal/releasesign), in the operator's own namespace.
	SigningKey types.NamespacedName
	// StatusReleaseManifest keeps the release's rendered manifest in status.deployedRelease,
	// as the stock helm-operator writes it (statusclient.go).
	StatusReleaseManifest bool
	// Rollouts are the chart rollout policies by kind (rollout_controller.go, docs/rollouts.md).
	Rollouts rollout.Policies
}

// Setup adds a helm reconciler to mgr for every kind in the watches file.
func Setup(mgr ctrl.Manager, opts Options) error {
	ws, err := watches.Load(opts.WatchesFile)
	if err != nil {
		return fmt.Errorf("loading %s: %w", opts.WatchesFile, err)
	}
	if opts.SigningKey.Name == "" || opts.SigningKey.Namespace == "" {
		return fmt.Errorf("the Secret of the release signing key needs a namespace and a name, got %q", opts.SigningKey)
	}
	versions := newReleaseVersions() // the releases handed to the reconcilers: see layer_releaseversions.go
	cl := statusKeepingClient{Client: mgr.GetClient(), current: mgr.GetCache(), versions: versions,
		releaseManifest: opts.StatusReleaseManifest}
	policies := make([]trustedconfig.KindPolicy, 0, len(ws))
	for _, w := range ws {
		clusterKinds, err := chartpolicy.ClusterScopedKinds(w.Chart)
		if err != nil {
			return err
		}
		policies = append(policies, trustedconfig.KindPolicy{GVK: w.GroupVersionKind, Chart: w.Chart.Name(),
			ClusterKinds: clusterKinds, Hooks: chartpolicy.HasHooks(w.Chart)})
	}
	configs, err := trustedconfig.New(mgr.GetConfig(), mgr, opts.SigningKey, policies, opts.ReleaseListSecretsPerGET)
	if err != nil {
		return err
	}
	log := ctrl.Log.WithName("operator")
	fleet := newFleetSeries() // the per-CR series: see metrics.go
	if err := registerFleet(fleet); err != nil {
		return fmt.Errorf("registering the per-CR metrics: %w", err)
	}
	ops := newOperations() // Helm operations in progress, across kinds: see layer_pendingrepair.go
	if opts.LeaderElection {
		if err := mgr.Add(leaderRunnable(func(context.Context) { ops.elected(time.Now()) })); err != nil {
			return err
		}
	}
	locks := newKeyedMutex()                                // one release name, across kinds: see layer_releaseguard.go
	manifests := newReleaseManifests(configs.StoredRelease) // for the drift filter: see drift.go
	for i, w := range ws {
		engine, err := newHelmEngine(configs, policies[i].Hooks)
		if err != nil {
			return err
		}
		period, concurrency := opts.ReconcilePeriod, opts.MaxConcurrentReconciles
		if w.ReconcilePeriod != nil {
			period = w.ReconcilePeriod.Duration
		}
		if w.MaxConcurrentReconciles != nil {
			concurrency = *w.MaxConcurrentReconciles
		}
		outcomes := newOutcomes() // how each visit ended: see layer_outcomes.go and readiness_controller.go
		cluster := clusterObjects{kinds: policies[i].ClusterKinds, mapper: mgr.GetRESTMapper(),
			reader: mgr.GetAPIReader(), writer: mgr.GetClient()}
		// The reconciler's own recorder name, so that these Events share its source.
		recorder := mgr.GetEventRecorderFor(strings.ToLower(w.GroupVersionKind.Kind) + "-controller")
		selector, err := metav1.LabelSelectorAsSelector(w.Selector)
		if err != nil {
			return fmt.Errorf("selector of %s: %w", w.GroupVersionKind, err)
		}
		policy := opts.Rollouts.For(w.GroupVersionKind.Kind)
		// The rollout lists every CR of the kind at each plan, and plans on every CR event: from
		// the cache (which its watch fills anyway). The client would read unstructured objects
		// from the API server, N CRs decoded per event: O(N^2) through a wave of creates or
		// deletes (docs/bench/memory.md, "the rollout's list").
		roll := newKindRollout(w.GroupVersionKind, selector, policy, w.Chart, mgr.GetCache(), recorder, outcomes.notify)
		getter := pipeline{chart: w.Chart, gate: roll, locks: locks, ops: ops, status: cl, outcomes: outcomes, metrics: fleet,
			versions: versions, cluster: cluster, recorder: recorder}.build(engine)
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
			reconciler.WithPostHook(recordSuccess(outcomes)),
			reconciler.WithPauseReconcileHandler(pauseHandler(outcomes)),
			reconciler.WithControllerSetupFunc(func(c reconciler.ControllerSetup) error {
				return c.Watch(roll.wakeSource()) // the CRs the rollout admits
			}),
		)
		if err != nil {
			return fmt.Errorf("reconciler for %s: %w", w.GroupVersionKind, err)
		}
		if err := r.SetupWithManager(withoutStatusUpdates(mgr, w.GroupVersionKind, manifests)); err != nil {
			return fmt.Errorf("controller for %s: %w", w.GroupVersionKind, err)
		}
		rr := &readinessReconciler{reader: mgr.GetCache(), client: mgr.GetClient(), gvk: w.GroupVersionKind, selector: selector,
			outcomes: outcomes, rollout: roll, metrics: fleet, now: metav1.Now}
		if err := rr.setup(mgr); err != nil {
			return fmt.Errorf("readiness controller for %s: %w", w.GroupVersionKind, err)
		}
		if err := roll.setup(mgr); err != nil {
			return fmt.Errorf("rollout controller for %s: %w", w.GroupVersionKind, err)
		}
		log.Info("watching", "gvk", w.GroupVersionKind, "chart", w.ChartPath,
			"reconcilePeriod", period, "maxConcurrentReconciles", concurrency,
			"clusterScopedKinds", policies[i].ClusterKinds, "hooks", policies[i].Hooks,
			"chart", w.Chart.Metadata.Version, "chartDigest", roll.carried.digest, "rollout", policy.String())
	}
	return setupOrphanCollectors(mgr, policies)
}

// setupOrphanCollectors adds an orphan collector (orphan_controller.go) for each cluster-scoped
// kind that a chart declares, for the CR kinds whose charts declare it. A kind the API server
// does not serve has no objects to collect.
func setupOrphanCollectors(mgr ctrl.Manager, policies []trustedconfig.KindPolicy) error {
	owners := map[schema.GroupKind]map[schema.GroupKind]schema.GroupVersionKind{}
	for _, p := range policies {
		for _, gk := range p.ClusterKinds {
			if owners[gk] == nil {
				owners[gk] = map[schema.GroupKind]schema.GroupVersionKind{}
			}
			owners[gk][p.GVK.GroupKind()] = p.GVK
		}
	}
	for gk, crKinds := range owners {
		mapping, err := mgr.GetRESTMapper().RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("orphan collector of %s: %w", gk, err)
		}
		c := &orphanCollector{gvk: mapping.GroupVersionKind, owners: crKinds, cache: mgr.GetCache(),
			live: mgr.GetAPIReader(), writer: mgr.GetClient(), recorder: mgr.GetEventRecorderFor("orphan-collector")}
		if err := c.setup(context.Background(), mgr); err != nil {
			return err
		}
	}
	return nil
}

// pauseHandler stops every reconcile of a CR whose pause annotation is "true"
// (helm-operator-plugins then sets its Paused condition), and records the visit so that
// Ready and Reconciling say that the CR is paused.
func pauseHandler(o *outcomes) reconciler.PauseReconcileHandlerFunc {
	paused := reconciler.PauseReconcileIfAnnotationTrue(readiness.PauseAnnotation)
	return func(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
		p, err := paused(ctx, obj)
		if p {
			o.visited(obj)
		}
		return p, err
	}
}

// leaderRunnable runs f once this process leads.
type leaderRunnable func(context.Context)

func (f leaderRunnable) Start(ctx context.Context) error { f(ctx); return nil }

func (leaderRunnable) NeedLeaderElection() bool { return true }
