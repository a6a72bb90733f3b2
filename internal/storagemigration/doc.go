// Package storagemigration rewrites the stored objects of a kind whose storage version
// changed, then prunes the version from its CRD's status.storedVersions.
//
// When make add-version makes a new version the storage version, the API server stores each
// object at it on its next write, and no sooner: the objects nobody edits stay stored at the
// old version, which the CRD's status.storedVersions keeps listing, and the old version cannot
// be removed (make remove-version refuses) until they are rewritten. Kubernetes' own
// StorageVersionMigration is alpha and off by default, so the manager's leader does the pass:
// an update of each object as it is, which the API server stores at the storage version. An
// object edited since it was listed is skipped (its edit stored it at the new version, and is
// kept); the spec does not change, so no reconcile upgrades a release because of the pass.
// Progress is in the metric warpdrive_storage_migration_remaining and an Event on the CRD.
package storagemigration
