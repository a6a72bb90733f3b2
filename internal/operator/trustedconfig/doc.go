// Package trustedconfig hands out the Helm action configurations every release operation of
// the manager runs with, the innermost layer under each kind's pipeline (internal/operator):
//
//   - configs.go: release records are signed (internal/releasesign), and Helm reads only the
//     operator's own; the records it refused are kept for the CR's report;
//   - confinement.go: Helm's Kubernetes client is confined to the release's namespace and the
//     cluster-scoped kinds its chart declares (internal/chartpolicy);
//   - the REST configs of internal/operator/restconfig: what the templates read with
//     `lookup` is confined to what the release may read (restconfig.Lookup), and Helm's
//     repeated reads within an update are answered from the first (restconfig.UpdateReads);
//   - capabilities.go: the cluster's capabilities (.Capabilities) are read once per
//     capabilitiesTTL for every release, but those of charts that install CRDs;
//   - takeover.go: once per cluster, the unsigned records an earlier version of the operator
//     wrote are taken over, if they name only what their CR's chart could render.
//
// A namespace editor can write Secrets that look like release records; nothing here lets
// such a record steer what Helm applies (docs/security.md).
package trustedconfig
