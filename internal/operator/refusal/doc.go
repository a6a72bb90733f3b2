// Package refusal is the part of a CR's story in which the operator says no, or says what
// went wrong, in words the CR and its Events can hold.
//
// Refused. A layer of the pipeline (internal/operator/pipeline/pipeline.go) may refuse a CR for a
// reason of its own rather than let Helm act: a release name another tool holds, an object
// the release cannot prove its own, a render over its bounds, a quarantined render. Refuse
// makes that failure (statuscontract.Failure, with its reason, step and message) the error
// the layer returns, terminal if only an edit of the CR can mend it, so that
// controller-runtime does not retry it; Of finds it again in the error that the outcomes and
// release events layers see, which then report its reason and message instead of naming the
// Helm action that failed.
//
// Bounded. Errors quote the values they refuse, of any size. A condition's message is held
// to MaxConditionMessage and an Event's to MaxEventMessage, cut by Truncate, which keeps a
// message's start (what failed) and its end (why): a CR whose status patch was too large to
// store showed no status at all.
//
// The package imports nothing of internal/operator.
package refusal
