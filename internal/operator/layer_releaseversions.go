package operator

import (
	"crypto/sha256"
	"errors"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// releaseVersions remembers, for each release, the revision and chart version of the release
// Helm last handed the reconciler, with a digest of its manifest.
//
// Why: helm-operator-plugins' reconciler writes status.deployedRelease as the release's name
// and its whole rendered manifest. The manifest is a copy of every object of the release
// (Secrets included), held in the CR and in every cache of the CR kind; the operator writes
// the name, the revision and the chart version instead (statusclient.go), and whoever needs
// the manifest reads the signed release record of that revision (releasemanifests.go). The
// status writer is handed only {name, manifest}; this is where it finds the revision of that
// manifest. One entry per release: a few dozen bytes, not a manifest.
type releaseVersions struct {
	mu sync.Mutex
	m  map[string]releaseVersion // by releaseKey
}

// releaseVersion is what releaseVersions keeps of one release.
type releaseVersion struct {
	sum          [sha256.Size]byte // of the manifest
	revision     int
	chartVersion string
}

func newReleaseVersions() *releaseVersions {
	return &releaseVersions{m: map[string]releaseVersion{}}
}

func (v *releaseVersions) record(rel *release.Release) {
	if rel == nil {
		return
	}
	rv := releaseVersion{sum: sha256.Sum256([]byte(rel.Manifest)), revision: rel.Version}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		rv.chartVersion = rel.Chart.Metadata.Version
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.m[releaseKey(rel.Namespace, rel.Name)] = rv
}

func (v *releaseVersions) forget(namespace, name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, releaseKey(namespace, name))
}

// revision is the revision of the release last handed out, if any: newer than its CR's status
// says from the end of an upgrade until the status is written.
func (v *releaseVersions) revision(namespace, name string) (int, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	rv, ok := v.m[releaseKey(namespace, name)]
	return rv.revision, ok
}

// lookup returns the revision and chart version of the release whose manifest is manifest,
// if it is the one last handed out.
func (v *releaseVersions) lookup(namespace, name, manifest string) (releaseVersion, bool) {
	v.mu.Lock()
	rv, ok := v.m[releaseKey(namespace, name)]
	v.mu.Unlock()
	if !ok || rv.sum != sha256.Sum256([]byte(manifest)) {
		return releaseVersion{}, false
	}
	return rv, true
}

// withReleaseVersions hands out action clients that record in versions every release they
// return to the reconciler: of Get, Install and Upgrade (not of a dry run, whose revision is
// never stored). A release uninstalled, or found gone, is forgotten.
func withReleaseVersions(getter helmclient.ActionClientGetter, versions *releaseVersions) helmclient.ActionClientGetter {
	return wrapActionClients(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return versionRecordingClient{ActionInterface: c, cr: cr, versions: versions}
	})
}

// versionRecordingClient is the release versions layer, the outermost (see pipeline.go).
type versionRecordingClient struct {
	helmclient.ActionInterface
	cr       client.Object
	versions *releaseVersions
}

func (c versionRecordingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	c.seen(name, rel, err)
	return rel, err
}

func (c versionRecordingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.seen(name, rel, err)
	return rel, err
}

func (c versionRecordingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	if !isDryRun(opts) {
		c.seen(name, rel, err)
	}
	return rel, err
}

func (c versionRecordingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		c.versions.forget(c.cr.GetNamespace(), name)
	}
	return resp, err
}

func (c versionRecordingClient) seen(name string, rel *release.Release, err error) {
	switch {
	case err == nil && rel != nil:
		c.versions.record(rel)
	case errors.Is(err, driver.ErrReleaseNotFound):
		c.versions.forget(c.cr.GetNamespace(), name)
	}
}
