package statuscontract

// Reasons of the sidecar's RolledOut condition (sidecar/internal/workloadstatus).
const (
	// ReasonNothingDeployed (Unknown): no release of the CR is deployed yet.
	ReasonNothingDeployed = "NothingDeployed"
	// ReasonRolloutComplete (True): every workload of the deployed release has rolled out.
	ReasonRolloutComplete = "RolloutComplete"
	// The reason of RolledOut False, while a workload of the deployed release is rolling out
	// (the message names it), is ReasonRollingOut, as Ready's is then.
)

// The conditions of a WarpdrivePool's books, in status.pool.conditions rather than
// status.conditions (PoolBooks; sidecar/internal/poolstatus): the helm reconciler writes
// status.conditions as a whole list, which would erase them.
const (
	// BooksKept is True with ReasonStorageClassOwned while the pool keeps the books of its
	// StorageClass; False while it does not, with ReasonStorageClassNotFound,
	// ReasonStorageClassNotOwned or ReasonReleaseNotDeployed. Then status.pool shows no usage
	// and no CapacityAvailable or Overcommitted.
	BooksKept = "BooksKept"
	// ReasonStorageClassOwned: the pool's release created its StorageClass.
	ReasonStorageClassOwned = "StorageClassOwned"
	// ReasonStorageClassNotFound: no StorageClass of the pool's spec.storageClassName exists.
	ReasonStorageClassNotFound = "StorageClassNotFound"
	// ReasonStorageClassNotOwned: the StorageClass exists but another release, or none,
	// created it.
	ReasonStorageClassNotOwned = "StorageClassNotOwned"
	// ReasonReleaseNotDeployed: the StorageClass is the pool's, but the pool's release is not
	// deployed (Deployed is not True).
	ReasonReleaseNotDeployed = "ReleaseNotDeployed"

	// CapacityAvailable is True with ReasonCapacityLeft while the claims hold less than the
	// pool may promise (capacity × overcommitRatio), False with ReasonPoolFull once they hold
	// all of it.
	CapacityAvailable  = "CapacityAvailable"
	ReasonCapacityLeft = "CapacityLeft"
	ReasonPoolFull     = "PoolFull"
	// Overcommitted is True with ReasonAllocatedAboveCapacity while the claims hold more than
	// the pool's physical capacity, which overcommitRatio > 1 allows; False with
	// ReasonWithinCapacity otherwise.
	Overcommitted                = "Overcommitted"
	ReasonAllocatedAboveCapacity = "AllocatedAboveCapacity"
	ReasonWithinCapacity         = "WithinCapacity"
)
