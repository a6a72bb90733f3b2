// Package gen holds build-time code: the generators that make targets run through hack/
// (make manifests runs hack/crdgen and hack/kindgen, make add-kind runs hack/addkind, make
// add-version and make remove-version run hack/addversion and hack/removeversion), and that
// the tests under test/ call to check what is generated. Neither the manager nor the
// sidecar imports any of it: they run in the cluster, the generators only write the
// repository's files, and keeping them apart keeps a generator's code and dependencies out
// of the image's binaries. TestManagerImportsNoGeneratorOrTestHelper fails if the manager's
// binary links a package under internal/gen or internal/testutil.
package gen
