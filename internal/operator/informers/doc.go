// Package informers is the part of a CR's story that decides which events reach its
// reconciler, and what the manager's cache keeps of the objects they are about.
//
// Filtered. helm-operator-plugins' reconciler watches its CRs, their release Secrets and the
// objects of their releases with no predicate, each event a full reconcile. It sets those
// watches up itself from the manager's cache, so WithoutStatusUpdates hands it a manager
// whose cache wraps the informers (informerfilters.go): a CR's update that wrote only its
// status or added a finalizer is dropped; one of its metadata alone (a forced reconcile)
// draws on the CR's PerCRInterval, which spaces such reconciles ForcedInterval apart; a
// release Secret passes only when deleted, and not when a superseded record goes; a release
// object's updates pass through the drift filter (internal/operator/drift.Filter).
//
// Cached. CacheOptions is the manager's cache (managercache.go): no managed fields and no
// kubectl last-applied copy (StripUnread, which the operator's cache of spec.valuesFrom
// sources uses too), strings interned; release Secrets as metadata, their data dropped;
// release objects as metadata, their annotations kept only where they tie the object to its
// CR (internal/operator/ownership), digested otherwise.
//
// The package imports nothing of internal/operator. setupKind (internal/operator/kind.go)
// gives each kind's reconciler its filtering manager and budget; the operator's
// CacheOptions (internal/operator/manageroptions.go) adds its bound of CR specs.
package informers
