// Package outcomes is the part of a CR's story that the helm reconciler tells the readiness
// controller: how each visit of the CR ended. The reconciler writes its own conditions only
// when they change, so an attempt that fails like the one before, or a visit that finds
// nothing to change, leaves no trace on the CR; a Store counts them, per CR of one kind, in
// memory: the generation deployed, the failed attempts in a row and the last failure, the
// reconcile request handled, the chart of the release deployed, and the sources of
// spec.valuesFrom it was rendered from.
//
// The layers of internal/operator write it: the outcomes layer (layer_outcomes.go) counts
// each failed attempt and the post-hook each success, the pause handler each paused visit;
// the values of spec.valuesFrom (internal/operator/values) record what a visit resolved, and the
// redaction layer (layer_redact.go) takes out of messages the strings it read from Secrets;
// the render-loop layer (layer_renderloop.go) counts the upgrades from the same inputs; the
// rollout gate (layer_rolloutgate.go) reads the values a visit translated. The readiness
// controller (readiness_controller.go), which Notify wakes, reads a CR's Outcome with Get and
// turns it into status.observedGeneration, status.chart and Ready, Reconciling and Stalled.
//
// A Store holds only what this process saw: after a restart, the status the previous leader
// wrote stands until the helm reconciler has visited the CR again; a failure count goes on
// from the CR's status.
//
// The package imports nothing of internal/operator.
package outcomes
