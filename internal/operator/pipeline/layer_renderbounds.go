package pipeline

import (
	"context"
	"errors"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// renderBoundReasons are the CR's reasons for each bound of internal/renderbound.
var renderBoundReasons = map[string]string{
	renderbound.BoundMemory: statuscontract.ReasonRenderMemoryExceeded,
	renderbound.BoundTime:   statuscontract.ReasonRenderTimeExceeded,
	renderbound.BoundOutput: statuscontract.ReasonRenderOutputExceeded,
	renderbound.BoundCrash:  statuscontract.ReasonRenderCrashed,
}

// withRenderBounds hands out action clients that render each install and upgrade in a
// limited worker first (internal/renderbound); a nil checker hands out those below as they are.
func withRenderBounds(getter helmclient.ActionClientGetter, checker *renderbound.Checker) helmclient.ActionClientGetter {
	if checker == nil {
		return getter
	}
	return actionclient.Wrap(getter, func(ac helmclient.ActionInterface, _ client.Object) helmclient.ActionInterface {
		return boundedRenderClient{ActionInterface: ac, checker: checker}
	})
}

// boundedRenderClient is the render bounds layer, next to the engine (see pipeline.go).
type boundedRenderClient struct {
	helmclient.ActionInterface
	checker *renderbound.Checker
}

func (c boundedRenderClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	if err := c.check(chrt, vals, chartutil.ReleaseOptions{Name: name, Namespace: namespace, Revision: 1, IsInstall: true}); err != nil {
		return nil, err
	}
	return c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
}

// Upgrade checks the dry run and the upgrade alike: the reconciler's dry run is the first
// render of a changed spec.
func (c boundedRenderClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	if err := c.check(chrt, vals, chartutil.ReleaseOptions{Name: name, Namespace: namespace, IsUpgrade: true}); err != nil {
		return nil, err
	}
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

// check returns nil if the render stays within the bounds, or could not be checked (a worker
// that cannot start must not stop every release: it is logged as the error it is, and Helm
// renders as before); a terminal refusal naming the bound if it passed one.
func (c boundedRenderClient) check(chrt *chart.Chart, vals map[string]any, rel chartutil.ReleaseOptions) error {
	err := c.checker.Check(context.Background(), renderbound.Input{Chart: chrt, Values: vals, Release: rel})
	var ex *renderbound.Exceeded
	if errors.As(err, &ex) {
		return refusal.Refuse(statuscontract.Failure{Reason: renderBoundReasons[ex.Bound], Step: "render", Message: ex.Error(), Terminal: true})
	}
	if err != nil {
		ctrl.Log.WithName("render-bounds").Error(err, "checking a render's bounds; rendering unchecked", "release", rel.Name, "namespace", rel.Namespace)
	}
	return nil
}
