// Package releases is the operator's bookkeeping of the Helm releases it makes for CRs, the
// part of a CR's story between one Helm operation and the next: which release is being
// changed, which revision Helm handed out last, and what that revision's manifest says.
//
// Held. A release is named after its CR and keyed across namespaces by Key. The release
// guard (internal/operator/releaseguard) holds the release's lock in a KeyedMutex,
// shared by every kind, for each Helm operation on it, so that two kinds' CRs of one name
// never act on one release at once.
//
// Handed out. Versions remembers, for each release, the revision and chart version of the
// release Helm last handed a reconciler, with a digest of its manifest: the release versions
// layer (internal/operator/pipeline/layer_releaseversions.go) records them, and the status client
// (internal/operator/statusclient.go) writes the revision and chart version in the CR's
// status instead of the manifest.
//
// Deployed. Manifests finds an object of a CR's deployed release, for the drift filter
// (internal/operator/drift): from the CR's status when it holds the manifest, otherwise from
// the signed record of the newer of the status's revision and the one last handed out; and
// it tells (Changing) while a Helm operation holds the release, whose manifest is then
// about to change.
//
// The package imports nothing of internal/operator, so that the layers and the informer
// filters can both depend on it. The operator (internal/operator/operator.go) makes one
// KeyedMutex, one Versions and one Manifests for all kinds, and setupKind
// (internal/operator/kind.go) wires them into each kind's pipeline and filters.
package releases
