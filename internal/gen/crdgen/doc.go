// Package crdgen builds the CustomResourceDefinition of each kind the helm-operator watches
// from the kind's chart: the spec schema from values.schema.json, or inferred from the
// values files of a chart without one, and the CRD's names, printer columns and scale
// subresource from annotations in Chart.yaml. Each kind's facts thus live in its chart
// directory, and the CRDs cannot drift from what the charts accept: any chart becomes a
// kind, and its CRD never refuses or prunes a value the chart accepts.
//
// # Versions
//
// A kind serves every version it has had. The chart directory holds the chart of the newest
// version only, the one watches.yaml names, which is the CRD's storage version; what an older
// version was lives beside it, in files make add-version writes:
//
//	helm-charts/<chart>/conversions.yaml               the versions, oldest first, and the
//	                                                   moves between them (internal/conversion)
//	helm-charts/<chart>/versions/<version>.schema.json the spec schema of each older version,
//	                                                   as its CRD's openAPIV3Schema.properties.spec
//	helm-charts/<chart>/versions/deprecated.yaml       optional: older versions that are
//	                                                   deprecated, each with its warning
//	                                                   ("" for the API server's own)
//
// Every version is served, with the status schema, subresources and printer columns of the
// newest (an older version without the replicas field, or a column's field, goes without
// them). The conversion strategy is None when no step of conversions.yaml moves or drops a
// value and every older schema equals the newest; otherwise Webhook, to the operator's
// conversion webhook Service (WebhookServiceName). A chart without conversions.yaml has one
// version and no conversion, as before versions.
package crdgen
