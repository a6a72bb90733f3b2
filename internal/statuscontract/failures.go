package statuscontract

// Reasons of a failed attempt at a release (Failure.Reason), which the manager's Ready and
// Stalled conditions report (Decide) and its Warning Event on the CR repeats, so that both say
// the same (internal/operator's outcomes and release events layers). Helm's error is the
// message.
const (
	// ReasonInstallFailed: Helm's install of the CR's release failed.
	ReasonInstallFailed = "InstallFailed"
	// ReasonUpgradeFailed: Helm's upgrade of the CR's release failed. A failed server-side
	// dry run of the upgrade has the same reason on its Event, and ReasonDryRunFailed on the
	// conditions.
	ReasonUpgradeFailed = "UpgradeFailed"
	// ReasonDryRunFailed: the server-side dry run of an upgrade failed, by which the
	// reconciler learns whether the release differs from the spec: the spec does not render,
	// or the API server refuses what it renders.
	ReasonDryRunFailed = "DryRunFailed"
	// ReasonUninstallFailed: Helm's uninstall of the release of a CR being deleted failed. It
	// is the Warning Event's reason only: the outcomes layer records no uninstall.
	ReasonUninstallFailed = "UninstallFailed"
	// ReasonReconcileFailed: the repair of the release's objects that drifted from it failed.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonReleaseLookupFailed: the CR's release exists but could not be read or used (it is
	// another kind's, or its records cannot be read); no release at all is the normal state of
	// a new CR and no failure.
	ReasonReleaseLookupFailed = "ReleaseLookupFailed"
	// ReasonErrorGettingClient: no Helm action client could be made for the CR (its action
	// configuration failed), so nothing was attempted.
	ReasonErrorGettingClient = "ErrorGettingClient"
	// ReasonValuesFromFailed: a source of the CR's spec.valuesFrom cannot be used (missing,
	// not labelled readable, over the bound); retried like a failed upgrade.
	ReasonValuesFromFailed = "ValuesFromFailed"
	// ReasonSpecTooLarge: the CR's spec, or the values merged from its spec.valuesFrom, holds
	// more values than --max-spec-values. Terminal: the CR is Stalled at once, until its spec
	// changes.
	ReasonSpecTooLarge = "SpecTooLarge"
)
