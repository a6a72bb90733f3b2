package statuscontract

// Names of the fields under a CR's status, by owner (see StatusOwners).
const (
	// FieldConditions is the list of conditions, keyed by type: each writer owns its own
	// condition types (StatusOwner.Conditions).
	FieldConditions = "conditions"

	// FieldDeployedRelease is the release last deployed, in helm-operator-plugins' shape.
	FieldDeployedRelease = "deployedRelease"

	FieldObservedGeneration     = "observedGeneration"
	FieldFailures               = "failures"
	FieldLastHandledReconcileAt = "lastHandledReconcileAt"
	// FieldChart is the chart of the CR's release and where it stands in a chart rollout
	// (docs/rollouts.md).
	FieldChart = "chart"
	// FieldChartRevision is the field of status.chart that holds the release's revision: the
	// sidecar's RolledOut names the one it judged (RolloutMessage).
	FieldChartRevision = "revision"
	// FieldValuesFrom is the version of each source of spec.valuesFrom that the deployed
	// release was rendered from (internal/valuesfrom).
	FieldValuesFrom = "valuesFrom"

	FieldReplicas          = "replicas"
	FieldReadyReplicas     = "readyReplicas"
	FieldAvailableReplicas = "availableReplicas"
	// FieldSelector is the primary workload's selector, which the CRDs' scale subresource
	// reads (labelSelectorPath .status.selector).
	FieldSelector = "selector"

	FieldPool = "pool"
)

// Fields of status.deployedRelease, which helm-operator-plugins' reconciler writes.
const (
	FieldDeployedReleaseName     = "name"
	FieldDeployedReleaseRevision = "revision" // Helm's release version
	// FieldDeployedReleaseChartVersion is the version of the chart the release was rendered
	// from.
	FieldDeployedReleaseChartVersion = "chartVersion"
	// FieldDeployedReleaseManifest is the rendered manifest, written only with the manager's
	// --status-release-manifest.
	FieldDeployedReleaseManifest = "manifest"
)

// Fields of status.chart besides FieldChartRevision, which the manager writes: the chart of the
// release as it last saw it, and where the CR stands in the rollout of the chart the operator
// carries (docs/rollouts.md).
const (
	FieldChartVersion      = "version"      // the chart's version (Chart.yaml)
	FieldChartDigest       = "digest"       // the digest of the chart's content (internal/rollout)
	FieldChartLastDeployed = "lastDeployed" // when the release was last deployed
	FieldChartBehind       = "behind"       // whether the operator carries another chart
	// FieldChartFailedDigest is the carried chart this CR failed on, halting its rollout.
	FieldChartFailedDigest = "failedDigest"
	// FieldChartBaseline is how the CR stood on its own chart before the rollout moved it
	// (internal/rollout's Baseline), with the fields FieldBaseline*.
	FieldChartBaseline = "baseline"

	FieldBaselineDigest     = "digest"     // the chart being rolled out
	FieldBaselineGeneration = "generation" // the CR's generation then
	FieldBaselineInputs     = "inputs"     // the digest of the versions of its spec.valuesFrom sources then
	FieldBaselineHealthy    = "healthy"    // whether it was Ready and not Stalled then
)

// Fields of each entry of status.valuesFrom, a source the deployed release was rendered from.
const (
	FieldSourceKind            = "kind"
	FieldSourceName            = "name"
	FieldSourceResourceVersion = "resourceVersion"
)

// Processes that write a CR's status.
const (
	ProcessManager = "manager"
	ProcessSidecar = "sidecar"
)

// StatusOwner is the part of a CR's status that one writer owns: top-level fields under
// status, and condition types in status.conditions (a list keyed by type, so each entry
// has its own owner).
//
// Why one declaration: three writers apply the status side by side, each with only its own
// fields, so that none erases or overwrites another's. That holds only while no two of them
// claim the same field or condition type; StatusOwners is where a new field gets its owner,
// a test checks that the sets do not overlap and match docs/status.md, and the writers'
// tests check that each applies its set and nothing else.
type StatusOwner struct {
	// FieldManager names the writer's server-side applies; "" for a writer that does not
	// apply.
	FieldManager string
	// Process is the binary the writer runs in: ProcessManager or ProcessSidecar.
	Process    string
	Fields     []string
	Conditions []string
	// OtherConditions says that the writer also owns every condition type no other writer
	// declares: helm-operator-plugins' reconciler writes conditions of its own choosing.
	OtherConditions bool
}

// The writers of a CR's status.
var (
	// HelmStatus is helm-operator-plugins' reconciler in the manager, whose status update
	// internal/operator turns into an apply. Its conditions are those helm-operator-plugins
	// writes, and those the manager's Helm layers add to them, ReleaseRecordRefused
	// (internal/operator's signed release records) and Drifted (its drift report): it applies
	// every condition type the other owners do not.
	HelmStatus = StatusOwner{
		FieldManager:    HelmFieldManager,
		Process:         ProcessManager,
		Fields:          []string{FieldDeployedRelease},
		Conditions:      []string{Initialized, Deployed, ReleaseFailed, Irreconcilable, Paused, ReleaseRecordRefused, Drifted},
		OtherConditions: true,
	}
	// ManagerStatus is the manager's readiness controller: the outcome of Decide, and the
	// chart rollout's word on the CR (internal/operator/rollout_controller.go).
	ManagerStatus = StatusOwner{
		FieldManager: ManagerFieldManager,
		Process:      ProcessManager,
		Fields:       []string{FieldObservedGeneration, FieldFailures, FieldLastHandledReconcileAt, FieldChart, FieldValuesFrom},
		Conditions:   []string{Ready, Reconciling, Stalled, ChartRollout},
	}
	// SidecarStatus is the sidecar's workload status controller (sidecar/internal/workloadstatus).
	SidecarStatus = StatusOwner{
		FieldManager: SidecarFieldManager,
		Process:      ProcessSidecar,
		Fields:       []string{FieldReplicas, FieldReadyReplicas, FieldAvailableReplicas, FieldSelector},
		Conditions:   []string{RolledOut},
	}
	// PoolBooks is the sidecar's pool bookkeeping (sidecar/internal/poolstatus). It writes
	// status.pool of a WarpdrivePool whole, with a JSON merge patch rather than an apply, and
	// keeps its conditions inside it.
	PoolBooks = StatusOwner{
		Process: ProcessSidecar,
		Fields:  []string{FieldPool},
	}
)

// StatusOwners are all the writers of a CR's status.
var StatusOwners = []StatusOwner{HelmStatus, ManagerStatus, SidecarStatus, PoolBooks}

// ConditionsOwnedByOthers are the condition types that the owners other than the one of
// fieldManager own.
func ConditionsOwnedByOthers(fieldManager string) map[string]bool {
	out := map[string]bool{}
	for _, o := range StatusOwners {
		if o.FieldManager == fieldManager {
			continue
		}
		for _, c := range o.Conditions {
			out[c] = true
		}
	}
	return out
}
