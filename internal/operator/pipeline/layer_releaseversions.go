package pipeline

import (
	"errors"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
)

// withReleaseVersions hands out action clients that record in versions every release they
// return to the reconciler: of Get, Install and Upgrade (not of a dry run, whose revision is
// never stored). A release uninstalled, or found gone, is forgotten.
func withReleaseVersions(getter helmclient.ActionClientGetter, versions *releases.Versions) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return versionRecordingClient{ActionInterface: c, cr: cr, versions: versions}
	})
}

// versionRecordingClient is the release versions layer, the outermost (see pipeline.go).
type versionRecordingClient struct {
	helmclient.ActionInterface
	cr       client.Object
	versions *releases.Versions
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
	if !actionclient.IsDryRun(opts) {
		c.seen(name, rel, err)
	}
	return rel, err
}

func (c versionRecordingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err == nil || errors.Is(err, driver.ErrReleaseNotFound) {
		c.versions.Forget(c.cr.GetNamespace(), name)
	}
	return resp, err
}

func (c versionRecordingClient) seen(name string, rel *release.Release, err error) {
	switch {
	case err == nil && rel != nil:
		c.versions.Record(rel)
	case errors.Is(err, driver.ErrReleaseNotFound):
		c.versions.Forget(c.cr.GetNamespace(), name)
	}
}
