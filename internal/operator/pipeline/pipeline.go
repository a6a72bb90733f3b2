package pipeline

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releaseguard"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/operator/renderjournal"
	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
)

// Pipeline is what the helm reconciler of one kind calls to run Helm: the Helm engine
// (NewHelmEngine) under a chain of layers, each an action client that embeds the one below
// and overrides a few of its calls. Its fields are what the layers share with the rest of
// the operator.
//
// The layers, from the engine outwards (layers lists them in this order; the reconciler
// calls the last, and each call goes down the chain and its result comes back up):
//
//  0. engine (NewHelmEngine, trustedconfig/): helm-operator-plugins'
//     action client over Helm's actions. Release records are signed: Helm reads only the
//     operator's own, and the records it refused are collected for the record report. The
//     Kubernetes client is confined to the release's namespace and the cluster-scoped kinds
//     of the chart. Templates' lookup (and tpl's) reads only the release's namespace, and
//     of its Secrets only the release's own and those labelled chart-readable
//     (restconfig/lookup.go), in the dry run too. Within an update, Helm's repeated reads of
//     an object are answered from the first (restconfig/updatereads.go). Hooks run only
//     for a chart that has them. Install uninstalls a failed install by name; Upgrade rolls
//     a failed upgrade back.
//
//  1. render bounds (boundedRenderClient, layer_renderbounds.go). Install, Upgrade (dry-run or
//     not): the chart is first rendered with the values in a worker process limited in
//     memory, output and time (internal/renderbound); a render past a bound is refused,
//     terminally, with a reason naming the bound (RenderMemoryExceeded, ...), and Helm
//     never renders it in this process. Next to the engine, so that it checks the chart
//     and values the engine gets, the rollout gate's choice among them.
//
//  2. render journal (internal/operator/renderjournal: With, layer.go, renderjournal.go). Install,
//     Upgrade (dry-run or not): the CR is recorded in flight in the render journal, a
//     ConfigMap of the operator's namespace, before the call goes down, and taken out after;
//     the leader that finds it in flight there after the previous leader's death counts that
//     death, and a CR at two deaths in a row is refused, terminally, with reason Quarantined,
//     until its generation changes. Uninstall: the CR's count is dropped, then passed on.
//     Over the render bounds, so that a quarantined CR costs no worker's render.
//
//  3. redaction (redactingClient, layer_redact.go). Every error that quotes a string the
//     visit in progress read from a Secret of spec.valuesFrom (internal/operator/values) has it
//     replaced by "[redacted]", before any layer above, the reconciler or its log sees it.
//
//  4. release guard (internal/operator/releaseguard). Get: another chart's release is a
//     ForeignReleaseError. Install, Upgrade (dry-run or not): under a lock on the release
//     name shared by every kind, refused if the release is another chart's, else passed on.
//     Uninstall: another chart's release is reported not found and left alone. Reconcile:
//     passed on. Assumes of the engine: Get returns the release as stored, of any chart.
//
//  5. render loop (renderLoopClient, layer_renderloop.go). Upgrade (not a dry run): refused
//     after 3 upgrades in a row of the CR from the same chart and values (a chart that renders
//     something new at every render), until the inputs change or for an hour; counted in
//     outcomes. Every other call is passed on. Below the gate, so that it sees the chart and
//     values the upgrade is made with.
//
//  6. rollout gate (gatedClient, layer_rolloutgate.go). Upgrade (dry-run or not) to the chart the
//     operator carries of a release on another chart: passed on if the kind's rollout admits
//     the CR; else passed on with the chart of the release itself and the CR's spec as
//     values, so that an edit applies with that chart and an unchanged spec leaves the
//     release alone; a CR that failed on the carried chart, under a rollback policy, gets
//     the chart of its last revision on another chart. Every other call is passed on.
//     Assumes of the layer below: Get and History return the kind's own releases (the
//     guard).
//
//  7. pending repair (repairingClient, layer_pendingrepair.go). Get: a last revision left pending
//     by an operation no longer running is marked failed in the storage (Warning Event
//     PendingReleaseRepaired), and returned failed, so that the reconciler upgrades it.
//     Install, Upgrade: recorded as running while they run; when one fails (not a dry run),
//     the revisions of the chart it left pending are marked failed. Uninstall: recorded as
//     running; a release gone is forgotten. Reconcile: passed on. Assumes of the layers
//     below: Get returns only the kind's own releases (the guard), and Config().Releases
//     holds only the operator's records (the engine's signed storage).
//
//  8. orphan sweep (sweepingClient, layer_orphansweep.go). Uninstall of a CR being deleted that
//     finds no release: the objects of the cluster-scoped kinds the chart declares whose
//     annotations name this CR as their owner are deleted (Warning Event OrphanDeleted), then
//     "not found" is returned as before; a sweep that fails is an error, which keeps the
//     finalizer. Every other call is passed on. Assumes of the layers below: another chart's
//     release is reported not found (the guard), hence the owner check.
//
//  9. hook cleanup (hookCleanupClient, layer_hookcleanup.go). Uninstall that succeeds: the
//     objects of the last revision's hooks that are still there (Helm leaves those no delete
//     policy removes) are deleted through the confined client; a failure is a Warning Event
//     HookCleanupFailed, not an error (the release is gone). Every other call is passed on.
//
//  10. drift (driftClient, layer_drift.go). Reconcile, by the kind's drift mode (--drift,
//     docs/drift.md): repair: passed on with a manifest whose objects lack the fields the
//     kind's ignore rules name, and the replicas of those an HPA of the namespace scales, so
//     that the repair leaves them as the cluster has them; report: nothing is repaired, the
//     objects that differ from the manifest outside those fields are named, with the paths,
//     in a Warning Event DriftDetected and the condition Drifted; off: nothing. Every other
//     call is passed on.
//
//  11. release events (eventingClient, layer_releaseevents.go). Every call that fails, but for "no
//     release" on Get and Uninstall, leaves a Warning Event on the CR with the error
//     (InstallFailed, UpgradeFailed, also for a failed dry run, UninstallFailed,
//     ReconcileFailed, ReleaseLookupFailed). Above the guard, the repair, the sweep and the
//     drift layer, so that their failures are reported too.
//
//  12. record report (reportingClient, layer_recordreport.go). After each Get, Install, Upgrade and
//     Uninstall, whatever its outcome: the records the engine's storage refused are
//     reported on the CR (condition ReleaseRecordRefused, Warning Event). Assumes of the
//     layers below: Config() is the engine's, which each of them passes on.
//
//  13. outcomes (outcomeClient, layer_outcomes.go). A failure to get the client of any
//     layer, and a failed Get (but for "no release"), Install, Upgrade (a failed dry run as
//     DryRunFailed) or Reconcile, is counted in outcomes, from which the readiness
//     controller writes Ready, Reconciling and Stalled; Uninstall is not counted. Successes
//     are counted by the reconciler's post-hook (RecordSuccess), which runs only once the
//     whole visit has succeeded.
//
//  14. release versions (versionRecordingClient, layer_releaseversions.go), outermost. Every release
//     Get, Install and Upgrade (not a dry run) hand the reconciler is recorded in versions
//     (its revision and chart version, by its manifest's digest), for the status writer
//     (statusclient.go), which writes them in status.deployedRelease in place of the manifest.
//     Uninstall and "no release" forget the release. Assumes of the layers below: they return
//     the release the reconciler then records in the status.
//
// One reconcile of a CR, as helm-operator-plugins' reconciler (v0.9.1) makes its calls, and
// the layers that act on each (a layer not named passes the call on):
//
//	ActionClientFor   every layer wraps the client for the CR; outcomes counts a failure
//	Get               guard: another chart's release is an error; repair: a pending
//	                  revision no operation runs on is marked failed; events: a Warning if
//	                  the release exists but cannot be read; record report; outcomes: failure
//	if the CR is being deleted:
//	  Uninstall       guard: another chart's release is "not found" and left alone;
//	                  repair: tracks the operation; sweep: no release left, so its
//	                  cluster-scoped objects are deleted; hook cleanup: the hooks' objects
//	                  left are deleted; events: a Warning if it failed;
//	                  record report. No error, or "not found": the finalizer is removed.
//	otherwise, Get again (as above), then
//	  no release:     Install: journal: refused if quarantined, else in flight;
//	                  guard: refused, under the name's lock, if another chart's
//	                  release appeared; repair: tracks it, and on failure marks its pending
//	                  revisions failed; events: Warning InstallFailed; record report;
//	                  outcomes: failure
//	  a release:      dry-run Upgrade (does the spec change the release?): journal, as
//	                  Install; guard, under the lock; repair: tracks it; events: Warning UpgradeFailed; record
//	                  report; outcomes: DryRunFailed
//	    it changes, or the release failed: Get, then Upgrade: as the dry run, and repair
//	                  marks the pending revisions failed when it fails; render loop: refused
//	                  after three in a row from the same chart and values
//	    it does not:  Reconcile (repairs drifted objects): drift: ignored fields are not
//	                  repaired, or nothing is and drift is reported, or nothing at all;
//	                  events: Warning ReconcileFailed; outcomes: failure
//	success           the post-hook RecordSuccess counts it in outcomes
//
// The outcomes are turned into Ready, Reconciling and Stalled by the readiness controller
// (readiness_controller.go).
//
// The tests in pipeline_test.go build this chain over a fake engine and check the order,
// and that the guard refuses another chart's release before the layers over it act.
type Pipeline struct {
	Chart    *chart.Chart
	Gate     Gate                   // the kind's chart rollout (rollout_controller.go)
	Locks    *releases.KeyedMutex   // one lock per release name, shared by every kind
	Ops      *Operations            // Helm operations of this process, shared by every kind
	Recorder record.EventRecorder   // the kind's reconciler's, so that Events share its source
	Status   client.StatusClient    // writes the record report's condition
	Outcomes *outcomes.Store        // the kind's, read by its readiness controller
	Metrics  *metrics.Fleet         // the manager's per-CR series (internal/operator/metrics)
	Versions *releases.Versions     // the releases handed out, shared by every kind, read by the status writer
	Cluster  ClusterObjects         // where the orphan sweep looks: the chart's cluster-scoped kinds
	Drift    drift.Policy           // what the kind's drift repair leaves alone (docs/drift.md)
	Live     client.Reader          // the release's objects as the API server has them, for drift reports and proof of ownership
	Renders  *renderbound.Checker   // renders each new chart and values in a limited worker first; nil: off
	Journal  *renderjournal.Journal // what is being rendered, for the quarantine (renderjournal.go); nil: off
	// Guard is what the release guard checks of a release it cannot prove the operator's;
	// its Live is the pipeline's Live.
	Guard releaseguard.Checks
}

// layers are the pipeline's layers, from the engine outwards (see pipeline).
func (p Pipeline) layers() []layer {
	return []layer{
		{"render bounds", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withRenderBounds(g, p.Renders)
		}},
		{"render journal", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return renderjournal.With(g, p.Journal)
		}},
		{"redaction", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withRedaction(g, p.Outcomes)
		}},
		{"release guard", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			checks := p.Guard
			checks.Live = p.Live
			return releaseguard.New(g, p.Chart, p.Locks, checks)
		}},
		{"render loop", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withRenderLoopGuard(g, p.Outcomes)
		}},
		{"rollout gate", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withRolloutGate(g, p.Gate, p.Outcomes)
		}},
		{"pending repair", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withPendingRepair(g, p.Recorder, p.Ops)
		}},
		{"orphan sweep", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withOrphanSweep(g, p.Cluster, p.Recorder)
		}},
		{"hook cleanup", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withHookCleanup(g, p.Recorder)
		}},
		{"drift", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withDrift(g, p.Drift, p.Live, p.Recorder, p.Status)
		}},
		{"release events", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withReleaseEvents(g, p.Recorder)
		}},
		{"record report", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withRecordReport(g, p.Recorder, p.Status)
		}},
		{"outcomes", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withOutcomes(g, p.Outcomes, p.Metrics)
		}},
		{"release versions", func(g helmclient.ActionClientGetter) helmclient.ActionClientGetter {
			return withReleaseVersions(g, p.Versions)
		}},
	}
}

// Build stacks the pipeline's layers over engine: the action client getter the reconciler
// is given.
func (p Pipeline) Build(engine helmclient.ActionClientGetter) helmclient.ActionClientGetter {
	return stack(engine, p.layers())
}

// NewHelmEngine makes the innermost action client getter of one kind, over the trusted
// configurations (trustedconfig.Configs): helm-operator-plugins' action client with these
// options.
//
// Hooks run only if the kind's chart has them: a record's hooks would otherwise be applied
// as the record says.
//
// Helm's client-side OpenAPI validation is off. On by default, it fetches and parses the
// apiserver's OpenAPI v3 document of each group-version for every install, upgrade and
// dry-run, only to learn that the server validates fields itself (every supported Kubernetes
// does), and then validates nothing on the client. Profiled on the local cluster: 72% of the
// reconciler's CPU during a wave of upgrades went to parsing that document. The apiserver
// still validates every object, in the dry-run and in the real request.
//
// The dry-run upgrade by which the reconciler decides whether to upgrade is server-side
// (helm-operator-plugins v0.9.1 sets DryRunOption "server" after these options), so that its
// render runs `lookup` as install and upgrade do: a chart that generates a password once and
// looks it up afterwards renders the same manifest again, and is not upgraded at every
// reconcile. Every render reads through the release's lookup confinement (trustedconfig).
func NewHelmEngine(acg helmclient.ActionConfigGetter, hooks bool) (helmclient.ActionClientGetter, error) {
	noHooks := !hooks
	return helmclient.NewActionClientGetter(acg,
		helmclient.AppendInstallOptions(func(i *action.Install) error {
			i.DisableOpenAPIValidation, i.DisableHooks = true, noHooks
			return nil
		}),
		helmclient.AppendUpgradeOptions(func(u *action.Upgrade) error {
			u.DisableOpenAPIValidation, u.DisableHooks = true, noHooks
			return nil
		}),
		helmclient.AppendUninstallOptions(func(u *action.Uninstall) error { u.DisableHooks = noHooks; return nil }),
		helmclient.AppendInstallFailureUninstallOptions(func(u *action.Uninstall) error { u.DisableHooks = noHooks; return nil }),
		helmclient.AppendUpgradeFailureRollbackOptions(func(r *action.Rollback) error { r.DisableHooks = noHooks; return nil }),
	)
}
