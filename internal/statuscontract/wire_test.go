package statuscontract

import "testing"

// The names of the contract are an API: tenants wait on them (`kubectl wait
// --for=condition=Ready`, `--for=jsonpath`), Argo CD's and Flux's health checks read them, and
// alerts match on reasons. A constant may be renamed; its value may not change unnoticed.
func TestWireValues(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		// Condition types.
		{Ready, "Ready"},
		{Reconciling, "Reconciling"},
		{Stalled, "Stalled"},
		{RolledOut, "RolledOut"},
		{Paused, "Paused"},
		{ChartRollout, "ChartRollout"},

		// Reasons of the manager's conditions (Decide).
		{ReasonReady, "Ready"},
		{ReasonInstallPending, "InstallPending"},
		{ReasonUpgradePending, "UpgradePending"},
		{ReasonRollingOut, "RollingOut"},
		{ReasonRetryingAfterFailure, "RetryingAfterFailure"},
		{ReasonPaused, "Paused"},
		{ReasonStalled, "Stalled"},
		{ReasonProgressing, "Progressing"},
		{ReasonNotStalled, "NotStalled"},
		{ReasonValuesSourceChanged, "ValuesSourceChanged"},
		{ReasonRenderMemoryExceeded, "RenderMemoryExceeded"},
		{ReasonRenderTimeExceeded, "RenderTimeExceeded"},
		{ReasonRenderOutputExceeded, "RenderOutputExceeded"},
		{ReasonRenderCrashed, "RenderCrashed"},
		{ReasonQuarantined, "Quarantined"},
		{ReasonReleaseNameTaken, "ReleaseNameTaken"},

		// Reasons of a failed attempt (failures.go).
		{ReasonInstallFailed, "InstallFailed"},
		{ReasonUpgradeFailed, "UpgradeFailed"},
		{ReasonDryRunFailed, "DryRunFailed"},
		{ReasonUninstallFailed, "UninstallFailed"},
		{ReasonReconcileFailed, "ReconcileFailed"},
		{ReasonReleaseLookupFailed, "ReleaseLookupFailed"},
		{ReasonErrorGettingClient, "ErrorGettingClient"},
		{ReasonValuesFromFailed, "ValuesFromFailed"},
		{ReasonSpecTooLarge, "SpecTooLarge"},

		// helm-operator-plugins' conditions, and those the manager's Helm layers add
		// (helmconditions.go).
		{Initialized, "Initialized"},
		{Deployed, "Deployed"},
		{ReleaseFailed, "ReleaseFailed"},
		{Irreconcilable, "Irreconcilable"},
		{ReasonUninstallSuccessful, "UninstallSuccessful"},
		{Drifted, "Drifted"},
		{ReasonDriftDetected, "DriftDetected"},
		{ReasonNoDrift, "NoDrift"},
		{ReleaseRecordRefused, "ReleaseRecordRefused"},
		{ReasonReleaseRecordRefused, "ReleaseRecordRefused"},
		{ReasonNoUntrustedRecords, "NoUntrustedRecords"},

		// Reasons of ChartRollout (chartrollout.go).
		{ReasonUpgraded, "Upgraded"},
		{ReasonUpgrading, "Upgrading"},
		{ReasonWaiting, "Waiting"},
		{ReasonRolloutHalted, "RolloutHalted"},
		{ReasonRolloutFailed, "RolloutFailed"},

		// The sidecar's: reasons of RolledOut, and the conditions of a pool's books
		// (sidecar.go).
		{ReasonNothingDeployed, "NothingDeployed"},
		{ReasonRolloutComplete, "RolloutComplete"},
		{BooksKept, "BooksKept"},
		{ReasonStorageClassOwned, "StorageClassOwned"},
		{ReasonStorageClassNotFound, "StorageClassNotFound"},
		{ReasonStorageClassNotOwned, "StorageClassNotOwned"},
		{ReasonReleaseNotDeployed, "ReleaseNotDeployed"},
		{CapacityAvailable, "CapacityAvailable"},
		{ReasonCapacityLeft, "CapacityLeft"},
		{ReasonPoolFull, "PoolFull"},
		{Overcommitted, "Overcommitted"},
		{ReasonAllocatedAboveCapacity, "AllocatedAboveCapacity"},
		{ReasonWithinCapacity, "WithinCapacity"},

		// Fields under status.
		{FieldDeployedRelease, "deployedRelease"},
		{FieldObservedGeneration, "observedGeneration"},
		{FieldFailures, "failures"},
		{FieldLastHandledReconcileAt, "lastHandledReconcileAt"},
		{FieldChart, "chart"},
		{FieldChartRevision, "revision"},
		{FieldValuesFrom, "valuesFrom"},
		{FieldReplicas, "replicas"},
		{FieldReadyReplicas, "readyReplicas"},
		{FieldAvailableReplicas, "availableReplicas"},
		{FieldSelector, "selector"},
		{FieldPool, "pool"},
		{FieldConditions, "conditions"},
		{FieldDeployedReleaseName, "name"},
		{FieldDeployedReleaseRevision, "revision"},
		{FieldDeployedReleaseChartVersion, "chartVersion"},
		{FieldDeployedReleaseManifest, "manifest"},
		{FieldChartVersion, "version"},
		{FieldChartDigest, "digest"},
		{FieldChartLastDeployed, "lastDeployed"},
		{FieldChartBehind, "behind"},
		{FieldChartFailedDigest, "failedDigest"},
		{FieldChartBaseline, "baseline"},
		{FieldBaselineDigest, "digest"},
		{FieldBaselineGeneration, "generation"},
		{FieldBaselineInputs, "inputs"},
		{FieldBaselineHealthy, "healthy"},
		{FieldSourceKind, "kind"},
		{FieldSourceName, "name"},
		{FieldSourceResourceVersion, "resourceVersion"},

		// Annotations and field managers.
		{PauseAnnotation, "warpdrive.transwarp.io/pause-reconcile"},
		{RequestAnnotation, "warpdrive.transwarp.io/reconcile-requested-at"},
		{HelmFieldManager, "warpdrive-helm"},
		{ManagerFieldManager, "warpdrive-manager"},
		{SidecarFieldManager, "warpdrive-sidecar"},
	} {
		if c.got != c.want {
			t.Errorf("%q is now %q: tenants' waits, health checks and alerts read the old value", c.want, c.got)
		}
	}
}
