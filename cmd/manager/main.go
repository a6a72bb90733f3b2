// Command manager is the helm-operator of warpdrive-operator: it reconciles every kind in
// watches.yaml into Helm releases of its chart, with helm-operator-plugins as the Helm
// engine (see internal/operator for how it differs from the stock `helm-operator run`).
// Its flags are those of `helm-operator run`, so either binary runs with the same arguments.
//
// `manager sidecar` runs the pod's second container instead (sidecar.go).
package main

import (
	"flag"
	"os"
	"runtime"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/handover"
	"transwarp.io/tos/warpdrive-operator/internal/mgropts"
	"transwarp.io/tos/warpdrive-operator/internal/operator"
	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/values"
	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/storagemigration"
	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "sidecar" {
		runSidecar(os.Args[2:])
		return
	}
	var (
		opts       operator.Options
		common     mgropts.Options
		signingKey string
	)
	flag.StringVar(&opts.WatchesFile, "watches-file", "./watches.yaml", "Path to the watches file.")
	// The stock helm-operator re-renders and dry-runs every CR every minute, which costs CPU in
	// proportion to the number of CRs while nothing happens. Drift is repaired from watch
	// events on the rendered objects, so the periodic pass is only a safety net here.
	flag.DurationVar(&opts.ReconcilePeriod, "reconcile-period", 10*time.Hour,
		"How often every CR is reconciled even without events (a watch's reconcilePeriod overrides it).")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", runtime.NumCPU(),
		"Reconciles run at once, per kind (a watch's maxConcurrentReconciles overrides it).")
	// Every revision keeps the release's whole chart, which outweighs the CR and its objects
	// (docs/bench/history.md, "One revision"). 3 is the least that keeps a failed rollout's
	// way back to the previous chart through one spec edit, and a failed upgrade beside its
	// rollback.
	flag.IntVar(&opts.MaxReleaseHistory, "max-release-history", 3,
		"Revisions kept per release; older release Secrets are deleted (0: keep all).")
	flag.IntVar(&opts.ReleaseListSecretsPerGET, "release-list-secrets-per-get", releaserecords.DefaultSecretsPerGET,
		"Secrets of a namespace that the API server filters, in a LIST of one release's records, for the cost of one GET; "+
			"where reading a release's records by name costs fewer, they are read by name (0: always by name).")
	flag.IntVar(&opts.MaxCRMetrics, "max-cr-metrics", metrics.DefaultMaxCRMetrics,
		"CRs whose per-CR series (warpdrive_cr_*, warpdrive_release_*, warpdrive_helm_last_*) are exported at most; "+
			"past it the unhealthy go first, then the namespaces in turn, and warpdrive_crs_without_series counts the rest (0: all).")
	flag.IntVar(&opts.MaxSpecValues, "max-spec-values", values.DefaultMaxSpecValues,
		"Values (objects, lists and scalars of its JSON) a CR's spec may hold: a CR over it is not reconciled, Stalled "+
			"(SpecTooLarge), and kept in the manager's cache without its spec, so that no tenant's CR costs the manager "+
			"more memory than this bounds (0: any number). See docs/security.md, \"Open specs\".")
	opts.RenderBounds = renderbound.DefaultBounds()
	flag.Var(byteSize{&opts.RenderBounds.Memory}, "render-max-memory",
		"Memory one render of a chart with a CR's values may take, in the worker process that renders it before the manager does "+
			"(a quantity: 160Mi): a CR whose render takes more is not reconciled, Stalled (RenderMemoryExceeded), and its release left as it is. "+
			"See docs/security.md, \"Template bounds\".")
	flag.Var(byteSize{&opts.RenderBounds.Output}, "render-max-output",
		"Manifests one render may produce in all (a quantity: 16Mi); past it the CR is Stalled (RenderOutputExceeded).")
	flag.DurationVar(&opts.RenderBounds.Timeout, "render-timeout", opts.RenderBounds.Timeout,
		"How long one render may take; the worker is killed past it and the CR Stalled (RenderTimeExceeded).")
	flag.IntVar(&opts.RenderBounds.Workers, "render-workers", opts.RenderBounds.Workers,
		"Worker processes that render at once, each within --render-max-memory (0: renders are not bounded, which lets any "+
			"template a tenant writes take the manager's memory and workers).")
	flag.BoolVar(&opts.StatusReleaseManifest, "status-release-manifest", false,
		"Also write the release's rendered manifest in each CR's status.deployedRelease.manifest, as the stock "+
			"helm-operator does (it copies every rendered object, Secrets included, into the CR).")
	common.BindFlags(flag.CommandLine, mgropts.Flags{
		MetricsAddr:                  ":8080",
		MetricsAddrUsage:             "Address of the metrics endpoint (0 disables it).",
		ProbeAddr:                    ":8081",
		ProbeAddrUsage:               "Address of /healthz and /readyz (0 disables them).",
		LeaderElectUsage:             "Elect a leader, so that only one replica reconciles.",
		LeaderElectionID:             "warpdrive-operator.transwarp.io",
		LeaderElectionNamespaceUsage: "Namespace of the Lease (default: the pod's namespace; required out of cluster with --leader-elect).",
	})
	opts.Rollouts = rollout.Policies{}
	flag.Var(opts.Rollouts, "rollout",
		"How a new chart rolls out over the CRs of a kind, as Kind=POLICY (repeatable; * names every kind not named): "+
			"waved (the default: "+rollout.Waved.String()+"), all (every CR at once), "+
			"or settings over waved: canaries:N,waves:P/P/100,timeout:D,minready:D,onfailure:rollback|hold. See docs/rollouts.md.")
	opts.Drift = drift.Settings{}
	flag.Var(opts.Drift, "drift",
		"What a kind's reconciler does when a rendered object differs from its release, as Kind=MODE[;ignore=KIND:/json/pointer,...] "+
			"(repeatable; * names every kind not named): repair (the default: patch it back), report (a Warning Event and the "+
			"Drifted condition, nothing patched) or off (not watched). The ignore rules' fields, and the /spec/replicas of an "+
			"object a HorizontalPodAutoscaler scales, are neither repaired nor reported. A flag, not a watches.yaml key, so that "+
			"the stock helm-operator and the strict watches file reading stay as they are. See docs/drift.md.")
	flag.StringVar(&signingKey, "release-signing-key", operator.DefaultSigningKeyName,
		"Secret holding the keys of release records, as <name> in the operator's namespace (POD_NAMESPACE, the "+
			"in-cluster namespace, or --leader-election-namespace) or <namespace>/<name>: field key signs and verifies, "+
			"fields previous-<name> only verify (rotation); read at start. Created with a new key if missing where none "+
			"was used before; where one was (its state ConfigMap <name>-take-over) and records are signed, every reconcile "+
			"fails until it is restored: back it up. See docs/security.md, \"Key lifecycle: rotation, loss, restore\".")
	flag.Parse()
	log := setupLog(&common)
	opts.LeaderElection = common.LeaderElect
	opts.RenderJournal = common.LeaderElectionID + "-render-journal"
	var err error
	opts.SigningKey, err = operator.SigningKeySecret(signingKey, common.LeaderElectionNamespace)
	exitOn(err, log, "locating the release signing key")

	mgrOpts := common.Manager()
	// The watches file as the sidecar reads it: strictly, so that a typo fails here.
	watches, err := watchfile.Load(opts.WatchesFile)
	exitOn(err, log, "loading the watches file")
	mgrOpts.Cache = operator.CacheOptions(opts.MaxSpecValues)
	mgr := newManager(&common, mgrOpts, log)
	exitOn(operator.Setup(mgr, opts), log, "setting up the reconcilers")
	kinds := make([]schema.GroupVersionKind, 0, len(watches))
	for _, w := range watches {
		kinds = append(kinds, w.GroupVersionKind())
	}
	exitOn(storagemigration.Add(mgr, kinds), log, "setting up the storage migration")
	log.Info("starting the manager")
	exitOn(mgr.Start(handover.SignalContext(mgr.GetConfig(), log)), log, "running the manager")
}
