// Package pipeline is the part of a CR's story in which Helm is run for it: what the helm
// reconciler of one kind calls, the Helm engine (NewHelmEngine) under a stack of layers,
// each an action client that embeds the one below and overrides a few of its calls.
//
// pipeline.go assembles the stack (Pipeline: the layers in order, each one's contract and a
// reconcile walked through them); each layer is a file of its own, layer_*.go, named for
// what it does, as Flux's helm-controller keeps one file per action; layer.go stacks them. Two
// layers are packages of their own: the render journal (internal/operator/renderjournal)
// and the release guard (internal/operator/releaseguard).
//
// The package imports nothing of internal/operator but its small packages (actionclient,
// drift, metrics, outcomes, ownership, refusal, releaseguard, releases, renderjournal,
// trustedconfig), so that no layer reaches back into the package that wires a kind:
// setupKind (internal/operator/kind.go) makes a kind's Pipeline and hands its Build to the
// reconciler, and the rollout controller is its Gate.
package pipeline
