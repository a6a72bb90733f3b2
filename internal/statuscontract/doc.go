// Package statuscontract is the contract of a CR's status, in one place: which writer owns
// which fields and under which field manager, and the fields' names (owners.go); the
// conditions that kstatus, `kubectl wait`, Argo CD and Flux read, Ready, Reconciling and
// Stalled, with status.observedGeneration (decide.go); and every other condition type and
// reason a CR's status can hold: of a failed attempt (failures.go), of the helm reconciler
// and the manager's Helm layers (helmconditions.go), of ChartRollout (chartrollout.go), of
// the sidecar (sidecar.go). Code elsewhere names them from here, never by literal, and
// TestWireValues pins their values, which tenants read. docs/status.md tells it to users.
//
// Two processes know half each. The manager knows what happened to the release: which
// generation it deployed, which attempts failed, whether reconciling is paused. The sidecar
// knows whether the workloads of the deployed release have rolled out, and says so in its
// RolledOut condition, for the generation it checked. Decide combines both for the manager,
// which alone writes the result; the sidecar writes only RolledOut.
package statuscontract
