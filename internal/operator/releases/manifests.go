package releases

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

// Manifests finds the object a CR's deployed release renders, for the drift filter
// (internal/operator/drift): from the manifest in the CR's status when it has one
// (--status-release-manifest, or a CR last written by the stock helm-operator), otherwise
// from the signed release record of the revision the status names
// (status.deployedRelease.revision, internal/operator/statusclient.go).
//
// Records are read through the operator's signed storage (internal/operator/trustedconfig),
// so a record a namespace editor forged or altered is not read; the drift filter then cannot
// tell, and passes the event on (a reconcile, which is what every event did without the
// filter).
// Parsed manifests are kept for the last few revisions read: a rollout updates each object of
// a release several times in a few seconds, and each update is checked.
//
// The status is written after the upgrade it records, by the same reconcile: on a loaded API
// server, seconds after the upgrade's objects changed. Compared with the status's revision,
// those objects would look drifted, and each such update cost a second, no-op reconcile. So the
// revision is the newer of the status's and the one Helm last handed a reconciler (versions),
// and while a Helm operation holds the release (locks), its manifest is about to change
// (Changing): the drift filter waits for it to end.
type Manifests struct {
	// record reads revision of the release of cr from the signed storage.
	record   func(ctx context.Context, cr *unstructured.Unstructured, revision int) (*release.Release, error)
	versions *Versions   // the revisions Helm last handed the reconcilers
	locks    *KeyedMutex // the releases a Helm operation holds (internal/operator/releaseguard)
	parsed   *lru.Cache  // of []*unstructured.Unstructured, by CR UID, namespace, name and revision
}

// manifestCacheSize bounds the parsed manifests kept: enough for the releases rolling out
// at once (--max-concurrent-reconciles per kind), a few KiB each for the charts here.
const manifestCacheSize = 64

// NewManifests returns the Manifests that read a release's records with record, newer
// revisions in versions, and the releases a Helm operation holds in locks (either may be nil).
func NewManifests(record func(ctx context.Context, cr *unstructured.Unstructured, revision int) (*release.Release, error),
	versions *Versions, locks *KeyedMutex) *Manifests {
	return &Manifests{record: record, versions: versions, locks: locks, parsed: lru.New(manifestCacheSize)}
}

// Changing reports whether a Helm operation holds the release of the CR named name in
// namespace (its release is named after it).
func (m *Manifests) Changing(namespace, name string) bool {
	return m != nil && m.locks != nil && name != "" && m.locks.Held(Key(namespace, name))
}

// Object returns the object of kind gvk named name in the deployed release of cr, if known.
func (m *Manifests) Object(ctx context.Context, cr *unstructured.Unstructured, gvk schema.GroupVersionKind, name string) map[string]any {
	if manifest, ok, _ := unstructured.NestedString(cr.Object, "status", statuscontract.FieldDeployedRelease, statuscontract.FieldDeployedReleaseManifest); ok {
		return findInManifest(ParseManifest(manifest), gvk, name)
	}
	if m == nil {
		return nil
	}
	revision, _, _ := unstructured.NestedInt64(cr.Object, "status", statuscontract.FieldDeployedRelease, statuscontract.FieldDeployedReleaseRevision)
	if m.versions != nil {
		if handedOut, known := m.versions.Revision(cr.GetNamespace(), cr.GetName()); known && int64(handedOut) > revision {
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
	objs := ParseManifest(rel.Manifest)
	m.parsed.Add(key, objs)
	return findInManifest(objs, gvk, name)
}

// ParseManifest splits a release manifest into its objects.
func ParseManifest(manifest string) []*unstructured.Unstructured {
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
