// Package storagemigration rewrites the stored objects of a kind whose storage version
// changed, then prunes the old versions from its CRD's status.storedVersions.
//
// When make add-version makes a new version the storage version, the API server stores each
// object at it on its next write, and no sooner: the objects nobody edits stay stored at the
// old version, which the CRD's status.storedVersions keeps listing, and the old version cannot
// be removed (make remove-version refuses) until they are rewritten. The manager's leader has
// them rewritten one of two ways (migrator.go chooses):
//
//   - apiserver.go: where the API server serves storagemigration.k8s.io/v1beta1 (Kubernetes
//     1.35: beta, behind the StorageVersionMigrator feature gate, off by default, and
//     kube-controller-manager's storage-version-migrator-controller behind the same gate), a
//     StorageVersionMigration of the kind's resource, named after the CRD, the storage
//     version and the CRD's generation, so that a leader that restarted finds the one it
//     created; the leader waits until it Succeeded. One that Failed, or that no controller
//     picked up within two minutes, is said in a Warning Event, and the pass does the work.
//   - pass.go: the operator's own pass, an update of each object as it is, which the API
//     server stores at the storage version. An object edited since it was listed is skipped
//     (its edit stored it at the new version, and is kept).
//
// Neither changes a spec, so no reconcile upgrades a release because of them. The
// StorageVersionMigration controller does not prune storedVersions: the leader prunes them
// after either way. Progress is in the metric warpdrive_storage_migration_remaining and the
// end in an Event StorageMigrated on the CRD, saying which way it was done.
package storagemigration
