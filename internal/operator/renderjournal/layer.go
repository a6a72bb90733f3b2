package renderjournal

import (
	"bytes"
	"sync"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
)

// With hands out action clients that record each install and upgrade in the
// render journal (renderjournal.go) before it renders; a nil journal hands out those below
// as they are.
func With(getter helmclient.ActionClientGetter, journal *Journal) helmclient.ActionClientGetter {
	if journal == nil {
		return getter
	}
	return actionclient.Wrap(getter, func(ac helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return journalingClient{ActionInterface: ac, journal: journal, cr: cr}
	})
}

// journalingClient is the render journal layer, over the render bounds (see the pipeline
// type, internal/operator/pipeline/pipeline.go).
type journalingClient struct {
	helmclient.ActionInterface
	journal *Journal
	cr      client.Object
}

// Install is in flight in the journal while Helm renders it: until its post-renderers have
// run (rendered), or the install ends without a render; a quarantined CR is refused.
func (c journalingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	done, err := c.journal.enter(c.cr)
	if err != nil {
		return nil, err
	}
	done = sync.OnceFunc(done)
	defer done()
	opts = append(opts, func(i *action.Install) error {
		i.PostRenderer = rendered{PostRenderer: i.PostRenderer, done: done}
		return nil
	})
	return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
}

// Upgrade is in flight in the journal while Helm renders it, the dry run too (a render is a
// render); a quarantined CR is refused.
func (c journalingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	done, err := c.journal.enter(c.cr)
	if err != nil {
		return nil, err
	}
	done = sync.OnceFunc(done)
	defer done()
	opts = append(opts, func(u *action.Upgrade) error {
		u.PostRenderer = rendered{PostRenderer: u.PostRenderer, done: done}
		return nil
	})
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

// rendered is the last of an install's or upgrade's post-renderers: the render is over when
// it runs, and the CR leaves the journal's flight (done). What Helm does next (the release
// record, the objects applied, the wait) runs no template: a manager killed then (a node
// drained, a rolling update, the fault suite's kills inside Helm operations) did not die of
// the CR, and must not count a death against it. Helm-operator-plugins sets its own
// post-renderers (owner references) in options applied before the call's, which this wraps.
type rendered struct {
	postrender.PostRenderer // the post-renderers before, or nil
	done                    func()
}

func (r rendered) Run(manifests *bytes.Buffer) (*bytes.Buffer, error) {
	defer r.done()
	if r.PostRenderer == nil {
		return manifests, nil
	}
	return r.PostRenderer.Run(manifests)
}

// Uninstall drops the CR's count and quarantine: the CR is going, and one of that name
// created later starts afresh.
func (c journalingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	c.journal.forget(c.cr)
	return c.ActionInterface.Uninstall(name, opts...)
}
