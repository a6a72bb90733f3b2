package operator

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// withRenderJournal hands out action clients that record each install and upgrade in the
// render journal (renderjournal.go) before it renders; a nil journal hands out those below
// as they are.
func withRenderJournal(getter helmclient.ActionClientGetter, journal *renderJournal) helmclient.ActionClientGetter {
	if journal == nil {
		return getter
	}
	return wrapActionClients(getter, func(ac helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return journalingClient{ActionInterface: ac, journal: journal, cr: cr}
	})
}

// journalingClient is the render journal layer, over the render bounds (see pipeline.go).
type journalingClient struct {
	helmclient.ActionInterface
	journal *renderJournal
	cr      client.Object
}

// Install is in flight in the journal while it runs; a quarantined CR is refused.
func (c journalingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	done, err := c.journal.enter(c.cr)
	if err != nil {
		return nil, err
	}
	defer done()
	return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
}

// Upgrade is in flight in the journal while it runs, the dry run too (a render is a
// render); a quarantined CR is refused.
func (c journalingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	done, err := c.journal.enter(c.cr)
	if err != nil {
		return nil, err
	}
	defer done()
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

// Uninstall drops the CR's count and quarantine: the CR is going, and one of that name
// created later starts afresh.
func (c journalingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	c.journal.forget(c.cr)
	return c.ActionInterface.Uninstall(name, opts...)
}
