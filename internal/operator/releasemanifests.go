package operator

import (
	"context"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/lru"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// releaseManifests finds the object a CR's deployed release renders, for the drift filter
// (internal/operator/drift): from the manifest in the CR's status when it has one (--status-release-manifest,
// or a CR last written by the stock helm-operator), otherwise from the signed release record
// of the revision the status names (status.deployedRelease.revision, statusclient.go).
//
// Records are read through the operator's signed storage (trustedconfig/), so a record a
// namespace editor forged or altered is not read; the drift filter then cannot tell, and
// passes the event on (a reconcile, which is what every event did without the filter).
// Parsed manifests are kept for the last few revisions read: a rollout updates each object of
// a release several times in a few seconds, and each update is checked.
//
// The status is written after the upgrade it records, by the same reconcile: on a loaded API
// server, seconds after the upgrade's objects changed. Compared with the status's revision,
// those objects would look drifted, and each such update cost a second, no-op reconcile. So the
// revision is the newer of the status's and the one Helm last handed a reconciler (versions),
// and while a Helm operation holds the release (locks), its manifest is about to change
// (Changing): the drift filter waits for it to end.
type releaseManifests struct {
	// record reads revision of the release of cr from the signed storage.
	record   func(ctx context.Context, cr *unstructured.Unstructured, revision int) (*release.Release, error)
	versions *releaseVersions // the revisions Helm last handed the reconcilers
	locks    *keyedMutex      // the releases a Helm operation holds (layer_releaseguard.go)
	parsed   *lru.Cache       // of []*unstructured.Unstructured, by CR UID, namespace, name and revision
}

// manifestCacheSize bounds the parsed manifests kept: enough for the releases rolling out
// at once (--max-concurrent-reconciles per kind), a few KiB each for the charts here.
const manifestCacheSize = 64

func newReleaseManifests(record func(ctx context.Context, cr *unstructured.Unstructured, revision int) (*release.Release, error),
	versions *releaseVersions, locks *keyedMutex) *releaseManifests {
	return &releaseManifests{record: record, versions: versions, locks: locks, parsed: lru.New(manifestCacheSize)}
}

// Changing reports whether a Helm operation holds the release of the CR named name in
// namespace (its release is named after it).
func (m *releaseManifests) Changing(namespace, name string) bool {
	return m != nil && m.locks != nil && name != "" && m.locks.held(releaseKey(namespace, name))
}

// Object returns the object of kind gvk named name in the deployed release of cr, if known.
func (m *releaseManifests) Object(ctx context.Context, cr *unstructured.Unstructured, gvk schema.GroupVersionKind, name string) map[string]any {
	if manifest, ok, _ := unstructured.NestedString(cr.Object, "status", statuscontract.FieldDeployedRelease, statuscontract.FieldDeployedReleaseManifest); ok {
		return findInManifest(parseManifest(manifest), gvk, name)
	}
	if m == nil {
		return nil
	}
	revision, _, _ := unstructured.NestedInt64(cr.Object, "status", statuscontract.FieldDeployedRelease, statuscontract.FieldDeployedReleaseRevision)
	if m.versions != nil {
		if handedOut, known := m.versions.revision(cr.GetNamespace(), cr.GetName()); known && int64(handedOut) > revision {
			revision = int64(handedOut)
		}
	}
	if revision < 1 {
		return nil
	}
	key := fmt.Sprintf("%s/%s/%s/%d", cr.GetUID(), cr.GetNamespace(), cr.GetName(), revision)
	if objs, ok := m.parsed.Get(key); ok {
		return findInManifest(objs.([]*unstructured.Unstructured), gvk, name)
	}
	rel, err := m.record(ctx, cr, int(revision))
	if err != nil || rel == nil {
		return nil
	}
	objs := parseManifest(rel.Manifest)
	m.parsed.Add(key, objs)
	return findInManifest(objs, gvk, name)
}

// parseManifest splits a release manifest into its objects.
func parseManifest(manifest string) []*unstructured.Unstructured {
	var objs []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil || obj.Object == nil {
			continue
		}
		objs = append(objs, obj)
	}
	return objs
}

// findInManifest returns the object of the given kind and name among a manifest's objects.
func findInManifest(objs []*unstructured.Unstructured, gvk schema.GroupVersionKind, name string) map[string]any {
	for _, obj := range objs {
		if obj.GroupVersionKind() == gvk && obj.GetName() == name {
			return obj.Object
		}
	}
	return nil
}
