package framework

import (
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"transwarp.io/tos/warpdrive-operator/internal/gen/kindgen"
)

// Kinds returns the operator's kinds, in the order of watches.yaml, with what their charts say
// of them (internal/gen/kindgen). It is the source make manifests generates every list of kinds
// from, so a test that iterates over the kinds, or needs a kind's group and version, takes
// them from here rather than spelling them out.
func Kinds() ([]kindgen.Kind, error) {
	root := RepoRoot()
	return kindgen.Load(filepath.Join(root, "watches.yaml"), filepath.Join(root, "helm-charts"))
}

// GVK returns the group, version and kind of the operator's kind named kind. It panics when
// watches.yaml cannot be read or has no such kind: a test table naming a kind that is not
// watched is a mistake in the test.
func GVK(kind string) schema.GroupVersionKind {
	kinds, err := Kinds()
	if err != nil {
		panic(err)
	}
	for _, k := range kinds {
		if k.GVK.Kind == kind {
			return k.GVK
		}
	}
	panic("watches.yaml has no kind " + kind)
}
