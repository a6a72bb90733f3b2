package statuscontract

// Reasons of the ChartRollout condition: where the CR stands in the rollout of the chart the
// operator carries (internal/rollout's Plan.Describe; docs/rollouts.md).
const (
	// ReasonUpgraded (True): the CR's release is on the chart the operator carries.
	ReasonUpgraded = "Upgraded"
	// ReasonUpgrading (False): the CR is in a wave under way, moving to the carried chart.
	ReasonUpgrading = "Upgrading"
	// ReasonWaiting (False): the CR waits for a later wave, or is not in the rollout's plan
	// yet.
	ReasonWaiting = "Waiting"
	// ReasonRolloutHalted (False): the rollout halted after CRs failed on the carried chart,
	// and holds this one on its chart.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutFailed: this CR failed on the carried chart, which halted the rollout; True
	// only if its release is on that chart nonetheless.
	ReasonRolloutFailed = "RolloutFailed"
)
