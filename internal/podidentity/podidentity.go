package podidentity

// The variables config/manager/manager.yaml sets in both containers, from the downward API
// where it has the value.
const (
	// NameEnv holds the pod's name (metadata.name).
	NameEnv = "POD_NAME"
	// UIDEnv holds the pod's UID (metadata.uid): the same across its containers' restarts,
	// never shared by two pods.
	UIDEnv = "POD_UID"
	// NamespaceEnv holds the pod's namespace (metadata.namespace).
	NamespaceEnv = "POD_NAMESPACE"
	// ContainerEnv holds the name of the container the process runs in, set as a value (the
	// downward API has no field for it).
	ContainerEnv = "CONTAINER_NAME"
)

// NamespaceFile holds the pod's namespace in its service account's mount, where
// controller-runtime looks for the Lease's namespace when none is given.
const NamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// LeaseHolder is who holds a Lease from the pod of that name and UID: both processes of a
// pod take their Leases under it (internal/mgropts), and a restarted process hands its
// Lease to another pod under it (internal/handover).
func LeaseHolder(name, uid string) string {
	return name + "_" + uid
}
