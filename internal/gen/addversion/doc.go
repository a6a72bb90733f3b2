// Package addversion adds an API version to a kind, as make add-version does, and removes its
// oldest, as make remove-version does (internal/gen/crdgen says where a kind's versions live).
//
// Adding version V to a kind whose newest version is P: the spec schema of P is kept in
// helm-charts/<chart>/versions/P.schema.json, the kind's chart is replaced by the given one
// (or kept, for a version with the same schema), the step from P to V is appended to the
// chart's conversions.yaml with the moves conversion.Infer proposes and, as drops, the fields
// it could not place, each under a comment saying why (a person turns a drop into a move
// where the value lives on under another name), watches.yaml's entry moves to V, the kind's
// sample in config/samples is converted to V, and make manifests regenerates the CRD with
// every version, V stored. Nothing is written unless the
// kind is watched, V is a Kubernetes version name newer than P and not one of the kind's, a
// new chart passes what make add-kind holds a chart to (it loads, vendors its dependencies,
// renders no Role or RoleBinding it does not declare whatever its booleans), and crdgen
// accepts the result; if make manifests fails, every file is put back as it was.
//
// Removing a version is refused while the CRD's status.storedVersions lists it: objects
// stored in it would no longer decode. Only the oldest version can go, so that the others
// still form one chain.
package addversion
