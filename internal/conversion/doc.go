// Package conversion converts a custom resource between the API versions of its kind, as a
// CRD's conversion webhook must, from a file people write by hand: the chart's
// conversions.yaml (FileName), which says where the values of a version's spec (its Helm
// values) are in the next version's spec.
//
//	# helm-charts/<chart>/conversions.yaml
//	- from: v1alpha1        # values of this version ...
//	  to: v1beta1           # ... become values of this one
//	  moves:                # JSON pointers into spec
//	  - {from: /replicaCount, to: /replicas}
//	  - {from: /password, to: /auth/password}
//	  drops: [/legacyPort]  # no counterpart in v1beta1
//	- from: v1beta1         # no moves: v1 has v1beta1's schema
//	  to: v1
//
// The steps form one chain, oldest version first. A conversion applies the steps between
// two versions in turn, each reversed (the from and to of its moves swapped) on the way from
// a newer version to an older one. A value no move names keeps its place.
//
// A conversion is lossless, as Kubernetes requires of a conversion webhook (an object
// converted and converted back is the object it was): a value the target version has no
// place for (a dropped field, a value whose destination a tenant's string blocks, a value
// that was already where a move puts another) travels in the object's Annotation, keyed by
// the version it came from, and is put back by the conversion back to that version. The
// objects a move creates on the way to its destination go on the way back; the empty ones it
// found there stay.
//
// Converting never calls the API server and never fails for what a spec holds, whatever its
// shape: a spec that is not an object passes through as it is, a moved value may be of any
// type, and a value that stands where a move needs an object (a string, a list, a null)
// leaves the moved value without a place, kept as above. Only a malformed file (Parse and
// Load name the step), an unknown version, or more to keep than an annotation may hold
// (MaxAnnotationBytes) is an error.
//
// Infer proposes the moves between two versions' spec schemas that the fields' names make
// plain, and lists the fields a person must place.
package conversion
