package releases

import (
	"crypto/sha256"
	"sync"

	"helm.sh/helm/v3/pkg/release"
)

// Versions remembers, for each release, the revision and chart version of the release
// Helm last handed the reconciler, with a digest of its manifest.
//
// Why: helm-operator-plugins' reconciler writes status.deployedRelease as the release's name
// and its whole rendered manifest. The manifest is a copy of every object of the release
// (Secrets included), held in the CR and in every cache of the CR kind; the operator writes
// the name, the revision and the chart version instead (internal/operator/statusclient.go),
// and whoever needs the manifest reads the signed release record of that revision
// (Manifests). The status writer is handed only {name, manifest}; this is where it finds the
// revision of that manifest. One entry per release: a few dozen bytes, not a manifest.
type Versions struct {
	mu sync.Mutex
	m  map[string]Version // by Key
}

// Version is what Versions keeps of one release.
type Version struct {
	sum          [sha256.Size]byte // of the manifest
	Revision     int               // the release's revision
	ChartVersion string            // its chart's version, "" if unknown
}

// NewVersions returns Versions that know of no release.
func NewVersions() *Versions {
	return &Versions{m: map[string]Version{}}
}

// Record remembers rel as the release last handed out under its namespace and name.
func (v *Versions) Record(rel *release.Release) {
	if rel == nil {
		return
	}
	rv := Version{sum: sha256.Sum256([]byte(rel.Manifest)), Revision: rel.Version}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		rv.ChartVersion = rel.Chart.Metadata.Version
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.m[Key(rel.Namespace, rel.Name)] = rv
}

// Forget forgets the release, uninstalled or found gone.
func (v *Versions) Forget(namespace, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, Key(namespace, name))
}

// Revision is the revision of the release last handed out, if any: newer than its CR's status
// says from the end of an upgrade until the status is written.
func (v *Versions) Revision(namespace, name string) (int, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rv, ok := v.m[Key(namespace, name)]
	return rv.Revision, ok
}

// Lookup returns the revision and chart version of the release whose manifest is manifest,
// if it is the one last handed out.
func (v *Versions) Lookup(namespace, name, manifest string) (Version, bool) {
	v.mu.Lock()
	rv, ok := v.m[Key(namespace, name)]
	v.mu.Unlock()
	if !ok || rv.sum != sha256.Sum256([]byte(manifest)) {
		return Version{}, false
	}
	return rv, true
}
