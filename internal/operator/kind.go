package operator

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/operator-framework/helm-operator-plugins/pkg/annotation"
	"github.com/operator-framework/helm-operator-plugins/pkg/reconciler"
	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/informers"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/operator/pipeline"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releaseguard"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/operator/renderjournal"
	"transwarp.io/tos/warpdrive-operator/internal/operator/trustedconfig"
	"transwarp.io/tos/warpdrive-operator/internal/operator/values"
	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// shared is what the kinds' controllers share: one of each per manager (Setup).
type shared struct {
	// The flags' defaults for every kind (Options); a watch may override the first two.
	period      time.Duration
	concurrency int
	history     int
	maxSpec     int // values a spec may hold (internal/operator/values)
	rollouts    rollout.Policies
	drift       drift.Settings

	status    statusKeepingClient    // the helm reconcilers' status writer (statusclient.go)
	versions  *releases.Versions     // the releases handed to the reconcilers, read by status
	configs   *trustedconfig.Configs // Helm's action configurations: signed records, confinement
	ops       *pipeline.Operations   // Helm operations of this process, by release
	locks     *releases.KeyedMutex   // one lock per release name
	manifests *releases.Manifests    // the deployed manifests, for the drift filter
	metrics   *metrics.Fleet         // the per-CR series
	sources   cache.Cache            // the metadata of spec.valuesFrom's sources (internal/operator/values)
	renders   *renderbound.Checker   // the render bounds' workers (layer_renderbounds.go); nil: off
	journal   *renderjournal.Journal // what the leader renders, for the quarantine (renderjournal.go)
}

// kindControllers are the three controllers of one CR kind and the channels between them.
// A CR's life moves between them so:
//
//	CR event (internal/operator/informers: not a status-only update)
//	or drift of a rendered object (drift.Filter)        rollout.wake: CRs it admits
//	      |                                               or rolls back
//	      v                                                      |
//	helm: helm-operator-plugins' reconciler  <-------------------+
//	      |  calls Helm through its pipeline (operator/pipeline); |
//	      |  its rollout gate asks rollout whether the CR         |
//	      |  may move to the carried chart ---------------> rollout (rollout_controller.go):
//	      |                                                 plans the waves from every CR's
//	      v                                                 status.chart and conditions
//	outcomes: how each visit ended (internal/operator/outcomes)   |
//	      |  Store.Notify                           rollout.notify: CRs whose
//	      v                                         ChartRollout is out of date
//	readiness (readiness_controller.go) <-------------------------+
//	      writes observedGeneration, Ready, Reconciling, Stalled, status.chart and
//	      ChartRollout, asking rollout where the CR stands; its status writes are
//	      read back by rollout's next plan
//
// The helm reconciler writes status.deployedRelease and its own conditions
// (statusclient.go); the sidecar writes the workloads' live state.
type kindControllers struct {
	helm      *reconciler.Reconciler
	readiness *readinessReconciler
	rollout   *kindRollout
	// outcomes links helm to readiness: written by the pipeline's outcomes layer and the
	// reconciler's hooks, read by readiness, which Store.Notify wakes.
	outcomes *outcomes.Store
	// The reconcile period and the reconciles run at once: the watch's, else the flags'.
	period      time.Duration
	concurrency int
}

// setupKind adds to mgr the controllers of the kind of w, whose chart policy is policy.
func setupKind(mgr ctrl.Manager, w watches.Watch, policy trustedconfig.KindPolicy, s shared) (*kindControllers, error) {
	engine, err := pipeline.NewHelmEngine(s.configs, policy.Hooks)
	if err != nil {
		return nil, err
	}
	k := &kindControllers{period: s.period, concurrency: s.concurrency,
		outcomes: outcomes.New()}
	if w.ReconcilePeriod != nil {
		k.period = w.ReconcilePeriod.Duration
	}
	if w.MaxConcurrentReconciles != nil {
		k.concurrency = *w.MaxConcurrentReconciles
	}
	cluster := pipeline.ClusterObjects{Kinds: policy.ClusterKinds, Mapper: mgr.GetRESTMapper(),
		Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()}
	// The reconciler's own recorder name, so that these Events share its source.
	recorder := mgr.GetEventRecorderFor(strings.ToLower(w.GroupVersionKind.Kind) + "-controller")
	selector, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of %s: %w", w.GroupVersionKind, err)
	}
	// The rollout lists every CR of the kind at each plan, and plans on every CR event: from
	// the cache (which its watch fills anyway). The client would read unstructured objects
	// from the API server, N CRs decoded per event: O(N^2) through a wave of creates or
	// deletes (docs/bench/findings.md, "The rollout's list from the cache").
	k.rollout = newKindRollout(w.GroupVersionKind, selector, s.rollouts.For(w.GroupVersionKind.Kind), w.Chart,
		mgr.GetCache(), recorder, k.outcomes.Notify())
	// What tenants may bring at will, forced reconciles and changes of sources, one budget
	// per CR (informers.PerCRInterval).
	budget := &informers.PerCRInterval{}
	sources := &values.Sources{GVK: w.GroupVersionKind, Resolver: valuesfrom.Resolver{Reader: mgr.GetAPIReader(), Defaults: w.Chart.Values},
		Cached: s.sources, CRs: mgr.GetCache(), Outcomes: k.outcomes, MaxValues: s.maxSpec, Recorder: recorder, Wakes: budget}
	if err := sources.Setup(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("index of spec.valuesFrom of %s: %w", w.GroupVersionKind, err)
	}
	k.rollout.sources, k.rollout.orderKey = sources, s.configs.RolloutOrderKey
	driftPolicy := drift.NewPolicy(s.drift.For(w.GroupVersionKind.Kind), mgr.GetAPIReader())
	getter := pipeline.Pipeline{Chart: w.Chart, Gate: k.rollout, Locks: s.locks, Ops: s.ops, Status: s.status,
		Outcomes: k.outcomes, Metrics: s.metrics, Versions: s.versions, Cluster: cluster, Recorder: recorder,
		Drift: driftPolicy, Live: mgr.GetAPIReader(), Renders: s.renders, Journal: s.journal,
		Guard: releaseguard.Checks{Unproven: s.configs.UnprovenRecords, FirstRun: s.configs.FirstRun}}.Build(engine)
	k.helm, err = reconciler.New(
		reconciler.WithChart(*w.Chart),
		reconciler.WithGroupVersionKind(w.GroupVersionKind),
		reconciler.WithOverrideValues(w.OverrideValues),
		reconciler.WithValueTranslator(sources),
		reconciler.WithSelector(*w.Selector),
		// The stock run command passes watchDependentResources itself here, so its
		// default (true) turns the watches off and drift waits for the periodic pass.
		// Drift mode off needs no watch: nothing would come of its events.
		reconciler.SkipDependentWatches(!*w.WatchDependentResources || driftPolicy.Mode == drift.Off),
		reconciler.WithMaxConcurrentReconciles(k.concurrency),
		reconciler.WithReconcilePeriod(k.period),
		reconciler.WithMaxReleaseHistory(s.history),
		reconciler.WithInstallAnnotations(annotation.DefaultInstallAnnotations...),
		reconciler.WithUpgradeAnnotations(annotation.DefaultUpgradeAnnotations...),
		reconciler.WithUninstallAnnotations(annotation.DefaultUninstallAnnotations...),
		// The CRs over the spec bound are refused at the reconciler's first read.
		reconciler.WithClient(values.BoundClient{Client: s.status, Cached: mgr.GetCache(), Limit: s.maxSpec,
			Outcomes: k.outcomes, Recorder: recorder}),
		reconciler.WithActionClientGetter(getter),
		reconciler.WithPostHook(pipeline.RecordSuccess(k.outcomes)),
		reconciler.WithPauseReconcileHandler(pauseHandler(k.outcomes)),
		reconciler.WithControllerSetupFunc(func(c reconciler.ControllerSetup) error {
			if err := useFairQueue(c, k.concurrency); err != nil { // namespaces in turn, a worker kept
				return err
			}
			if err := c.Watch(k.rollout.wakeSource()); err != nil { // the CRs the rollout admits
				return err
			}
			return sources.Watch(c) // the CRs whose values' sources changed
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("reconciler for %s: %w", w.GroupVersionKind, err)
	}
	if err := k.helm.SetupWithManager(informers.WithoutStatusUpdates(mgr, w.GroupVersionKind, s.manifests, driftPolicy, budget,
		s.configs.SignedRecord)); err != nil {
		return nil, fmt.Errorf("controller for %s: %w", w.GroupVersionKind, err)
	}
	k.readiness = &readinessReconciler{reader: mgr.GetCache(), client: mgr.GetClient(), gvk: w.GroupVersionKind,
		selector: selector, outcomes: k.outcomes, rollout: k.rollout, sources: sources, metrics: s.metrics, now: metav1.Now}
	if err := k.readiness.setup(mgr); err != nil {
		return nil, fmt.Errorf("readiness controller for %s: %w", w.GroupVersionKind, err)
	}
	if err := k.rollout.setup(mgr); err != nil {
		return nil, fmt.Errorf("rollout controller for %s: %w", w.GroupVersionKind, err)
	}
	return k, nil
}

// pauseHandler stops every reconcile of a CR whose pause annotation is "true"
// (helm-operator-plugins then sets its Paused condition), and records the visit so that
// Ready and Reconciling say that the CR is paused.
func pauseHandler(o *outcomes.Store) reconciler.PauseReconcileHandlerFunc {
	paused := reconciler.PauseReconcileIfAnnotationTrue(statuscontract.PauseAnnotation)
	return func(ctx context.Context, obj *unstructured.Unstructured) (bool, error) {
		p, err := paused(ctx, obj)
		if p {
			o.Visited(obj)
		}
		return p, err
	}
}
