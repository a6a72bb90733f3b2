package poolstatus

import (
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// A pool's spec is written by whoever may edit pools in its namespace, and the sidecar
// reads claims in every namespace. Counting the claims of whatever class spec names would
// let a namespace editor read, through a pool's status, the usage of other namespaces'
// pools or of the cluster's own StorageClasses. So a pool keeps books only for a class its
// own release created: the proof is on the live StorageClass, which is cluster-scoped (a
// namespace editor cannot write it) and carries Helm's ownership annotations, set by Helm
// on every object it creates and checked by Helm before it adopts one.

// Helm's ownership annotations, as Helm writes them on the objects of a release.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// storageClassGVK is read as metadata only: ownership is all the bookkeeping needs of a
// StorageClass.
var storageClassGVK = storagev1.SchemeGroupVersion.WithKind("StorageClass")

// Ownership is whether a pool keeps the books of its StorageClass, with the reason and
// message of its BooksKept condition.
type Ownership struct {
	Owned           bool
	Reason, Message string
}

// OwnershipOf decides whether pool keeps the books of class, whose live metadata is sc (nil
// when no such StorageClass exists). The pool must be deployed (the helm-operator's
// Deployed=True) and the class must carry the ownership annotations of the pool's release,
// which the helm-operator names after the pool, in the pool's namespace. Deployed alone
// does not prove it: a failed install leaves Deployed unset, but a failed upgrade leaves it
// True, and only the class's annotations say whose the class is.
func OwnershipOf(pool *unstructured.Unstructured, class string, sc *metav1.PartialObjectMetadata) Ownership {
	name, ns := pool.GetName(), pool.GetNamespace()
	if sc == nil {
		return Ownership{Reason: statuscontract.ReasonStorageClassNotFound, Message: fmt.Sprintf(
			"StorageClass %q does not exist: the pool's release has not created it (see status.conditions). "+
				"The claims of a StorageClass are counted only by the pool whose release created it.", class)}
	}
	owner, ownerNS := sc.Annotations[helmReleaseName], sc.Annotations[helmReleaseNamespace]
	switch {
	case owner == "" && ownerNS == "":
		return Ownership{Reason: statuscontract.ReasonStorageClassNotOwned, Message: fmt.Sprintf(
			"StorageClass %q was not created by a Helm release (it has no meta.helm.sh/release-name annotation): it belongs to the cluster, "+
				"and its claims are not counted here. A pool counts the claims of the StorageClass its own release creates: "+
				"recreate the pool with a spec.storageClassName that no other StorageClass has.", class)}
	case owner != name || ownerNS != ns:
		// The owner is named only within the pool's namespace: its editors may not learn
		// which releases other namespaces hold.
		other := "a Helm release of another namespace"
		if ownerNS == ns {
			other = fmt.Sprintf("the Helm release %q of this namespace", owner)
		}
		return Ownership{Reason: statuscontract.ReasonStorageClassNotOwned, Message: fmt.Sprintf(
			"StorageClass %q belongs to %s, not to this pool's release %q in namespace %q: "+
				"its claims are not counted here. A pool counts the claims of the StorageClass its own release creates: "+
				"recreate the pool with a spec.storageClassName that no other StorageClass has.", class, other, name, ns)}
	case !deployed(pool):
		return Ownership{Reason: statuscontract.ReasonReleaseNotDeployed, Message: fmt.Sprintf(
			"StorageClass %q is the pool's, but its release is not deployed (status.conditions Deployed is not True): "+
				"the books are kept once it is.", class)}
	}
	return Ownership{Owned: true, Reason: statuscontract.ReasonStorageClassOwned, Message: fmt.Sprintf(
		"StorageClass %q was created by the pool's release: the claims of that class, in every namespace, are counted here.", class)}
}

// releaseOwns reports whether the StorageClass sc carries the ownership annotations of
// pool's release.
func releaseOwns(pool *unstructured.Unstructured, sc *metav1.PartialObjectMetadata) bool {
	return sc.Annotations[helmReleaseName] == pool.GetName() && sc.Annotations[helmReleaseNamespace] == pool.GetNamespace()
}

// deployed reports whether the helm-operator reports the pool's release as deployed.
func deployed(pool *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedFieldNoCopy(pool.Object, "status", statuscontract.FieldConditions)
	list, _ := conds.([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		if m["type"] == statuscontract.Deployed {
			return m["status"] == string(metav1.ConditionTrue)
		}
	}
	return false
}
