// Package ownership is the part of a CR's story written on the objects of its release: the
// annotations that tie an object to the CR it was created for, read where no owner
// reference can say it (a cluster-scoped object of a namespaced CR) or where the release's
// records are gone.
//
// Helm puts HelmReleaseNameAnnotation and HelmReleaseNamespaceAnnotation on every object of
// a release; the helm-operator's post-renderer (operator-lib's SetOwnerAnnotations) puts
// OwnerNameAnnotation and OwnerTypeAnnotation, the CR's namespace/name and kind, on the
// cluster-scoped ones. OwnerOf reads the CR (a CR: kind and key) that both name; OwnedBy
// asks whether they name a given CR.
//
// internal/operator reads them in the orphan sweep (layer_orphansweep.go) and the orphan
// collector (orphan_controller.go), which delete what a gone CR left outside any
// namespace (each with DeleteAsSeen, which leaves alone an object created since under the
// same name), and in the release guard's proof (internal/operator/releaseguard/proof.go),
// which lets a CR take only objects that are its own; the manager's cache (internal/operator/informers)
// keeps these annotations of the objects it drops the rest of.
//
// The package imports nothing of internal/operator.
package ownership
