// Package metrics is the part of a CR's story the manager tells Prometheus, beside
// controller-runtime's own metrics: one series per CR for the fleet (Fleet: Ready, Stalled,
// the chart of its release, how its last install or upgrade went), and one per kind for its
// chart rollout (RolloutProgress), the renders the render bounds refused (RenderRefusals)
// and the CRs the render journal holds quarantined (QuarantinedCRs).
//
// The operator (internal/operator/operator.go) makes one Fleet for all kinds and registers
// it (RegisterFleet); the outcomes layer of each pipeline records each Helm operation in
// it, each readiness controller the status it decided, and the forgetter drops the series of
// the CRs that are gone. config/grafana and config/prometheus use these series;
// TestDashboardsUseExportedMetrics checks that every name they use is exported here.
//
// The package imports nothing of internal/operator, so that the layers, the controllers and
// the render journal can all depend on it.
package metrics
