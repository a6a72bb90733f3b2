package statuscontract

// The conditions of helm-operator-plugins' reconciler (v0.9.1), unchanged: its own status
// updates write them (HelmStatus), and the manager reads some.
const (
	// Initialized is True once the reconciler has taken the CR in (its finalizer added).
	Initialized = "Initialized"
	// Deployed is True while the CR's release is deployed, with the reason of the last
	// install or upgrade; False with ReasonUninstallSuccessful once the release of a CR being
	// deleted is uninstalled.
	Deployed = "Deployed"
	// ReleaseFailed is True while the last install, upgrade or uninstall failed.
	ReleaseFailed = "ReleaseFailed"
	// Irreconcilable is True while the reconciler cannot reconcile the CR: no action client,
	// values or release state to work from, or a failed operation.
	Irreconcilable = "Irreconcilable"
	// ReasonUninstallSuccessful is Deployed's reason once the release of a CR being deleted is
	// uninstalled.
	ReasonUninstallSuccessful = "UninstallSuccessful"
)

// The conditions that the manager's Helm layers add to the reconciler's, on its copy of the
// CR, so that its status write carries them (HelmStatus).
const (
	// Drifted is written in the drift mode report only (docs/drift.md): True with
	// ReasonDriftDetected while objects of the release differ from its manifest (the message
	// names them), False with ReasonNoDrift once nothing differs. A CR that never drifted has
	// none.
	Drifted             = "Drifted"
	ReasonDriftDetected = "DriftDetected"
	ReasonNoDrift       = "NoDrift"
	// ReleaseRecordRefused says which records of the CR's release the signed storage refused
	// (records the operator did not write, or that changed since it wrote them): True with
	// ReasonReleaseRecordRefused while such records are in the namespace, False with
	// ReasonNoUntrustedRecords once they are gone. A CR whose records were never refused has
	// none.
	ReleaseRecordRefused       = "ReleaseRecordRefused"
	ReasonReleaseRecordRefused = "ReleaseRecordRefused"
	ReasonNoUntrustedRecords   = "NoUntrustedRecords"
)
