// Package renderjournal is the part of a CR's story that outlives the manager: a CR whose
// render kills the manager (past what the render bounds catch: an OOM kill, a panic) stops
// being the first thing the next leader does again.
//
// The journal (Journal, renderjournal.go) is a ConfigMap of the operator's namespace
// (ConfigMapStore) holding the CRs being rendered and each one's count of the manager's
// deaths in a row while rendering it; a CR at two is quarantined at its generation, refused
// terminally with reason Quarantined until its spec changes. Its layer (With, layer.go),
// one of a kind's pipeline (internal/operator/pipeline/pipeline.go), puts each install and upgrade in
// flight before Helm renders it and takes it out once the render is over.
//
// The operator (internal/operator/operator.go) makes one journal per manager, shared by
// every kind. The package imports nothing of internal/operator, so that the pipeline that
// stacks its layer depends on it and it never on the pipeline.
package renderjournal
