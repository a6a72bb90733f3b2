// Package addkind turns an existing Helm chart into a kind of the operator, as make add-kind
// does: it copies the chart (a directory or a .tgz) into helm-charts/<kind>, adds the kind's
// entry to watches.yaml and the Chart.yaml annotations internal/gen/crdgen needs, runs make
// manifests, and reports what was generated and what a person should review before
// committing: the CRD's spec schema, the manager's new rights, hooks, the template functions
// that evaluate values or read the cluster, those that render a new value at each render (an
// upgrade at every reconcile), and the vendored dependencies.
//
// A chart whose defaults render cluster-scoped objects, Roles or RoleBindings it does not
// declare, which the operator may not create, gets a safe default: watches.yaml overrideValues
// that turn them off, and that keep at their defaults the booleans a spec could turn to render
// such Roles and RoleBindings (safedefaults.go), named in the report with how to offer them
// instead, since that is the administrator's decision.
//
// Nothing is written unless the chart loads, every dependency it declares is vendored under
// its charts/ directory, crdgen accepts it, and it renders no Role or RoleBinding it does not
// declare once the safe default is set; if make manifests fails, every file it or add-kind
// wrote is put back as it was.
package addkind
