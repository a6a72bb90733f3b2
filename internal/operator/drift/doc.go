// Package drift is the part of a CR's story that begins when an object of its release no
// longer is what the release's manifest says: a person scaled a Deployment by hand, edited a
// ConfigMap, deleted a Service, or another controller (an HPA) owns a field the chart sets.
// It says how such drift is noticed, which of it counts, and what a repair leaves alone; the
// rest of internal/operator decides when it runs, and calls Helm.
//
// Settings. Each CR kind has a Setting (flag --drift=Kind=SETTING, read by Settings, one per
// kind or "*"; docs/drift.md): its Mode, Repair (the default: patch the fields back, as the
// stock helm-operator does), Report (leave the objects as they are, and say so on the CR) or
// Off (no watch of the release's objects, no repair); and its Ignore rules, a kind and a JSON
// pointer each, the fields under which a change is neither repaired nor reported.
//
// Filtered. A Policy is a kind's Setting at work (NewPolicy): the fields its rules name,
// and, for an object that a HorizontalPodAutoscaler of its namespace scales, its replicas,
// are none of the operator's business.
//
// Noticed. The reconciler watches the objects of each release as metadata. A Filter stands between
// each of those informers and the reconciler's handlers (Filter.Wrap; the filtering cache of
// internal/operator/informers puts it there): an update that wrote only an object's status or its
// controller's bookkeeping is dropped unread, as is one of an object tied to no CR of the kind; any
// other is held for SettleDelay, the object read from the API server by a few workers, and passed
// on only if it differs from its release's manifest (Manifests: the operator's
// internal/operator/releases.Manifests) outside the fields the Policy ignores, or if that cannot be
// told. Updates of objects tied to their CR by annotations alone draw on the CR's Budget of
// reconciles tenants may force. A deleted object passes, unless its CR is going away.
//
// Repaired. A reconcile that the Filter woke reaches the pipeline's drift layer
// (internal/operator/pipeline/layer_drift.go), which asks the kind's Policy: in Repair mode it hands
// helm-operator-plugins' Reconcile the manifest of Policy.StrippedManifest, whose patch then
// leaves the ignored fields as the cluster has them; in Report mode it repairs nothing and
// reports what Policy.Drift finds (ObjectDrift) as the CR's Drifted condition and an Event.
//
// The package imports nothing of internal/operator: what it needs of it (the deployed
// manifests, the budget) it takes as the interfaces Manifests and Budget, which setupKind
// (internal/operator/kind.go) wires.
package drift
