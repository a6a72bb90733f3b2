package workloadstatus

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Markers Helm and the helm-operator put on every object of a release.
//
// helm-operator-plugins' post-renderer (pkg/client/postrenderer.go) appends a
// controller owner reference (metav1.NewControllerRef: apiVersion, kind, name,
// uid of the CR, controller=true, blockOwnerDeletion=true) to each rendered
// object that can carry one, i.e. namespaced objects in the CR's namespace
// without "helm.sh/resource-policy: keep". For the others it sets the
// operator-lib annotations operator-sdk/primary-resource{,-type} instead; it
// adds no labels of its own. Helm itself then stamps every object of the
// release on install, upgrade and rollback (pkg/action/validate.go,
// setMetadataVisitor, with force) with the label
// app.kubernetes.io/managed-by=Helm and the annotations below. The release is
// named after the CR and lives in the CR's namespace.
const (
	helmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	helmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
	helmManagedByLabel             = "app.kubernetes.io/managed-by"
	helmManagedByValue             = "Helm"
)

// KindSet is the set of custom resource kinds listed in watches.yaml.
type KindSet map[schema.GroupKind]struct{}

// NewKindSet returns a KindSet holding gks.
func NewKindSet(gks ...schema.GroupKind) KindSet {
	s := make(KindSet, len(gks))
	for _, gk := range gks {
		s[gk] = struct{}{}
	}
	return s
}

// Has reports whether gk is one of the operator's kinds.
func (s KindSet) Has(gk schema.GroupKind) bool {
	_, ok := s[gk]
	return ok
}

// refGroupKind returns the GroupKind an owner reference points at. An
// unparsable apiVersion yields an empty group, which never matches a CR kind.
func refGroupKind(ref metav1.OwnerReference) schema.GroupKind {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}

// ownedByOperatorKind reports whether obj has an owner reference to any CR kind
// of this operator.
func ownedByOperatorKind(obj metav1.Object, kinds KindSet) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if kinds.Has(refGroupKind(ref)) {
			return true
		}
	}
	return false
}

// helmRelease returns the release named by obj's Helm annotations, provided the
// release is in obj's own namespace: a workload of another namespace can never
// belong to a CR, since the helm-operator installs a CR's release into the
// CR's namespace.
func helmRelease(obj metav1.Object) (string, bool) {
	ann := obj.GetAnnotations()
	name := ann[helmReleaseNameAnnotation]
	if name == "" || ann[helmReleaseNamespaceAnnotation] != obj.GetNamespace() {
		return "", false
	}
	return name, true
}

// requestsForWorkload maps a workload to the CRs of kind gk it belongs to.
//
// An owner reference of kind gk wins. A workload that carries an owner
// reference to another of the operator's kinds belongs to that kind's
// controller, so the Helm annotations are not consulted for it. Otherwise the
// Helm annotations name the release, hence the CR. They do not say which kind
// the CR is, so every kind's controller enqueues the name; the controllers of
// the wrong kinds find no such CR in their cache and stop there.
func requestsForWorkload(obj metav1.Object, gk schema.GroupKind, kinds KindSet) []reconcile.Request {
	var reqs []reconcile.Request
	for _, ref := range obj.GetOwnerReferences() {
		if refGroupKind(ref) == gk {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{
				// Owner references are namespace-local.
				Namespace: obj.GetNamespace(),
				Name:      ref.Name,
			}})
		}
	}
	if len(reqs) > 0 || ownedByOperatorKind(obj, kinds) {
		return reqs
	}
	if name, ok := helmRelease(obj); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
	}
	return nil
}

// belongsTo reports whether workload obj is part of cr's release, with the
// same precedence as requestsForWorkload but exact: the owner reference must
// carry cr's UID, so a workload left over from a deleted CR of the same name
// is not counted.
func belongsTo(obj, cr metav1.Object, kinds KindSet) bool {
	if obj.GetNamespace() != cr.GetNamespace() {
		return false
	}
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == cr.GetUID() {
			return true
		}
	}
	if ownedByOperatorKind(obj, kinds) {
		return false
	}
	name, ok := helmRelease(obj)
	return ok && name == cr.GetName()
}

// releaseIndex is a cache index over workloads so that a sync lists the
// workloads of one release instead of every workload in the namespace. Each
// workload is indexed under the UIDs of its owners and under its Helm release.
const releaseIndex = "warpdrive.transwarp.io/release"

func ownerUIDIndexKey(uid types.UID) string { return "uid/" + string(uid) }
func releaseIndexKey(name string) string    { return "release/" + name }

// releaseIndexValues is the client.IndexerFunc for releaseIndex.
func releaseIndexValues(obj client.Object) []string {
	var keys []string
	for _, ref := range obj.GetOwnerReferences() {
		keys = append(keys, ownerUIDIndexKey(ref.UID))
	}
	if name, ok := helmRelease(obj); ok {
		keys = append(keys, releaseIndexKey(name))
	}
	return keys
}
