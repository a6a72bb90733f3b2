// Package operator sets up the helm-operator's reconcilers: one per kind in watches.yaml, each
// installing, upgrading and uninstalling the kind's CRs as Helm releases of its chart. The
// Helm engine is helm-operator-plugins' reconciler, configured as its stock `run` command
// configures it, with these differences:
//
//   - the reconcilers' status writes keep status fields they do not own (statusclient.go), so
//     that the sidecar's replica counts survive every install, upgrade and failure;
//   - an update of a CR's status alone does not start a reconcile (internal/operator/informers):
//     only a change of what the release should be does;
//   - release records are signed, and Helm reads only the operator's own (trustedconfig/,
//     internal/releasesign): a namespace editor cannot forge or alter a record to steer
//     the operator; refused records are reported on the CR (pipeline/layer_recordreport.go);
//   - every release operation is confined to the release's namespace and the cluster-scoped
//     kinds its chart declares (trustedconfig/confinement.go), and hooks run only for charts that have
//     them;
//   - a reconciler touches only releases of its own chart (internal/operator/releaseguard): a CR named like
//     another kind's CR in its namespace cannot take over that CR's release, even when both
//     are created at once;
//   - the objects of each release are watched, so that a hand edit or deletion is repaired at
//     once: the stock command (v0.9.1) turns these watches off when watchDependentResources is
//     true, its default, and leaves drift to the periodic reconcile, every minute;
//   - a watch's own reconcilePeriod and maxConcurrentReconciles in watches.yaml are honoured
//     (the stock command reads only its flags);
//   - a release left pending by an interrupted operation is marked failed and retried
//     (pipeline/layer_pendingrepair.go); a CR whose release Secrets were deleted under it (with its
//     namespace) still has its cluster-scoped objects deleted (pipeline/layer_orphansweep.go), and so does
//     a CR that went without any uninstall, such as by a finalizer removed by hand
//     (orphan_controller.go); failed Helm operations are recorded as Events on the CR
//     (pipeline/layer_releaseevents.go);
//   - status.deployedRelease names the release's revision and chart version instead of
//     copying its rendered manifest (statusclient.go, pipeline/layer_releaseversions.go), unless
//     Options.StatusReleaseManifest asks for the stock shape.
//
// # How it is built
//
// Setup makes what the kinds share and, for each kind, its controllers (kind.go: setupKind,
// and kindControllers, whose doc draws how a CR moves between them). The parts of a CR's
// story are packages below this one, each with a doc.go, which import nothing of this
// package: the CR's values (values), the layers Helm is run through (pipeline, listed once in
// its pipeline.go, with two layers of their own: renderjournal and releaseguard), the Helm
// action configurations under every pipeline (trustedconfig: signed records, confinement,
// take-over; restconfig: what Helm reads the cluster with), what starts a reconcile
// (informers, drift), and what a visit found (outcomes, releases, metrics).
package operator

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"transwarp.io/tos/warpdrive-operator/internal/chartpolicy"
	"transwarp.io/tos/warpdrive-operator/internal/conversion"
	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/pipeline"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/operator/renderjournal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/operator/values"
	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
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
	// only then (see pipeline.Operations).
	LeaderElection bool
	// SigningKey is the Secret that holds the key release records are signed with (see
	// internal/releasesign), in the operator's own namespace.
	SigningKey types.NamespacedName
	// StatusReleaseManifest keeps the release's rendered manifest in status.deployedRelease,
	// as the stock helm-operator writes it (statusclient.go).
	StatusReleaseManifest bool
	// Rollouts are the chart rollout policies by kind (rollout_controller.go, docs/rollouts.md).
	Rollouts rollout.Policies
	// MaxCRMetrics is how many CRs have per-CR series at most (internal/operator/metrics); 0: all.
	MaxCRMetrics int
	// MaxSpecValues is how many values a CR's spec may hold for the CR to be reconciled
	// (internal/operator/values); 0: any number. Give the same bound to CacheOptions.
	MaxSpecValues int
	// Drift are the drift settings by kind: repair, report or off, and the fields left alone
	// (drift.Settings, docs/drift.md).
	Drift drift.Settings
	// RenderBounds bound each render of a chart with a CR's values, checked in a worker
	// process first (internal/renderbound, layer_renderbounds.go); no Workers: unchecked.
	RenderBounds renderbound.Bounds
	// RenderJournal names the render journal's ConfigMap in the operator's namespace
	// (renderjournal.go): one per leader election, so that two operators that elect their
	// leaders apart never count each other's renders as their own deaths. Empty: the default.
	RenderJournal string
}

// Setup adds to mgr, for every kind in the watches file, the kind's controllers (setupKind,
// kind.go), and the orphan collectors of the cluster-scoped kinds the charts declare.
func Setup(mgr ctrl.Manager, opts Options) error {
	ws, err := loadWatches(opts.WatchesFile)
	if err != nil {
		return err
	}
	if opts.SigningKey.Name == "" || opts.SigningKey.Namespace == "" {
		return fmt.Errorf("the Secret of the release signing key needs a namespace and a name, got %q", opts.SigningKey)
	}
	versions := releases.NewVersions() // the releases handed to the reconcilers: see layer_releaseversions.go
	s := shared{period: opts.ReconcilePeriod, concurrency: opts.MaxConcurrentReconciles,
		history: opts.MaxReleaseHistory, maxSpec: opts.MaxSpecValues, rollouts: opts.Rollouts, drift: opts.Drift, versions: versions,
		status: statusKeepingClient{Client: mgr.GetClient(), current: mgr.GetCache(), versions: versions,
			releaseManifest: opts.StatusReleaseManifest}}
	policies := make([]trustedconfig.KindPolicy, 0, len(ws))
	for _, w := range ws {
		clusterKinds, err := chartpolicy.ClusterScopedKinds(w.Chart)
		if err != nil {
			return err
		}
		rbacKinds, err := chartpolicy.RBACKinds(w.Chart)
		if err != nil {
			return err
		}
		policies = append(policies, trustedconfig.KindPolicy{GVK: w.GroupVersionKind, Chart: w.Chart.Name(),
			ClusterKinds: clusterKinds, RBACKinds: rbacKinds, Hooks: chartpolicy.HasHooks(w.Chart),
			InstallsCRDs: chartpolicy.InstallsCRDs(w.Chart, clusterKinds)})
	}
	if s.configs, err = trustedconfig.New(mgr.GetConfig(), mgr, opts.SigningKey, policies, opts.ReleaseListSecretsPerGET); err != nil {
		return err
	}
	s.ops = pipeline.NewOperations() // Helm operations in progress, across kinds: see layer_pendingrepair.go
	if opts.LeaderElection {
		if err := mgr.Add(leaderRunnable(func(context.Context) { s.ops.Elected(time.Now()) })); err != nil {
			return err
		}
	}
	if opts.RenderBounds.Workers > 0 { // one pool for every kind: see layer_renderbounds.go
		refused := func(bound string) { metrics.RenderRefusals.WithLabelValues(bound).Inc() }
		if s.renders, err = renderbound.NewChecker(opts.RenderBounds, refused); err != nil {
			return err
		}
	}
	// The render journal, loaded once this process leads: see renderjournal.go.
	s.journal = renderjournal.New(&renderjournal.ConfigMapStore{Reader: mgr.GetAPIReader(), Writer: mgr.GetClient(),
		Key: types.NamespacedName{Namespace: opts.SigningKey.Namespace, Name: cmp.Or(opts.RenderJournal, renderjournal.DefaultConfigMap)}})
	if err := mgr.Add(s.journal); err != nil {
		return err
	}
	s.locks = releases.NewKeyedMutex()                                              // one release name, across kinds: see internal/operator/releaseguard
	s.manifests = releases.NewManifests(s.configs.StoredRelease, versions, s.locks) // for the drift filter: see internal/operator/drift
	s.metrics = metrics.NewFleet(opts.MaxCRMetrics)                                 // the per-CR series: see internal/operator/metrics
	if s.sources, err = values.NewSourcesCache(mgr); err != nil {                   // spec.valuesFrom: see internal/operator/values
		return fmt.Errorf("cache of the sources of spec.valuesFrom: %w", err)
	}
	if err := metrics.RegisterFleet(s.metrics); err != nil {
		return fmt.Errorf("registering the per-CR metrics: %w", err)
	}
	log := ctrl.Log.WithName("operator")
	forget := &goneForgetter{reader: mgr.GetCache(), metrics: s.metrics}
	for i, w := range ws {
		k, err := setupKind(mgr, w, policies[i], s)
		if err != nil {
			return err
		}
		forget.kinds = append(forget.kinds, forgetKind{gvk: w.GroupVersionKind, outcomes: k.outcomes})
		log.Info("watching", "gvk", w.GroupVersionKind, "chart", w.ChartPath,
			"reconcilePeriod", k.period, "maxConcurrentReconciles", k.concurrency,
			"clusterScopedKinds", policies[i].ClusterKinds, "hooks", policies[i].Hooks,
			"chart", w.Chart.Metadata.Version, "chartDigest", k.rollout.carried.Digest(), "rollout", k.rollout.policy.String(),
			"drift", opts.Drift.For(w.GroupVersionKind.Kind).String())
	}
	if err := mgr.Add(forget); err != nil {
		return err
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

// leaderRunnable runs f once this process leads.
type leaderRunnable func(context.Context)

func (f leaderRunnable) Start(ctx context.Context) error { f(ctx); return nil }

func (leaderRunnable) NeedLeaderElection() bool { return true }

// loadWatches loads the watches file and each kind's chart, less the kind's version history
// (conversion.IsVersionHistory: conversions.yaml, versions/). That history is the CRD's,
// which the sidecar reads from the chart directory: no template of the chart reads it, a
// release record need not carry it, and a new version of the kind's API is no new chart to
// roll out to every CR (rollout.Digest).
func loadWatches(path string) ([]watches.Watch, error) {
	ws, err := watches.Load(path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	for _, w := range ws {
		w.Chart.Files = slices.DeleteFunc(w.Chart.Files, func(f *chart.File) bool { return conversion.IsVersionHistory(f.Name) })
	}
	return ws, nil
}
