// Package releaseguard is the part of a CR's story that keeps its release its own: the
// release guard, the layer of a kind's pipeline (internal/operator/pipeline/pipeline.go) between the
// render layers and the layers that act on a release.
//
// A CR's Helm release is named after the CR, and the kinds share that namespace of names:
// the guard (New, guard.go) makes each kind's reconciler see only the releases of its own
// chart (another chart's is a ForeignReleaseError, or "not found" to an uninstall), holds
// the release's lock (internal/operator/releases.KeyedMutex, shared by every kind) for each
// Helm operation on it, and refuses an install over records no key of the operator
// verifies (Checks). Its post-renderer, the ownership proof (proof.go), refuses a render
// that names an existing object nothing proves the release's own, before Helm adopts it.
//
// The package imports nothing of internal/operator but the small packages the layers share
// (actionclient, ownership, refusal, releases, trustedconfig), so that the pipeline that stacks it depends
// on it and it never on the pipeline. setupKind (internal/operator/kind.go) hands it the
// checks of the kind's trusted configurations.
package releaseguard
