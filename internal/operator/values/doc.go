// Package values is the part of a CR's story in which its values are made: what one kind's
// helm reconciler renders the CR with. The spec is bounded first (specbound.go: a spec that
// holds more values than --max-spec-values is dropped from the manager's cache and refused at
// the reconciler's first read), then the sources of spec.valuesFrom are merged under it
// (sources.go: read from the API server at each render, their versions watched through a
// cache of metadata only, and each change wakes the CRs that name them).
//
// setupKind (internal/operator/kind.go) gives a kind's reconciler a Sources as its value
// translator and a BoundClient as its client; the manager's cache options apply BoundSpec.
package values
