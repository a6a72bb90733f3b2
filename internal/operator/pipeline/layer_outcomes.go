package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"github.com/operator-framework/helm-operator-plugins/pkg/hook"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// withOutcomes hands out action clients that record each failed attempt in o. Successes are
// recorded by the post-hook (RecordSuccess), which runs only once the whole install, upgrade
// or drift repair has succeeded.
func withOutcomes(getter helmclient.ActionClientGetter, o *outcomes.Store, metrics *metrics.Fleet) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, cr client.Object) (helmclient.ActionInterface, error) {
		c, err := getter.ActionClientFor(ctx, cr)
		if err != nil {
			o.Failed(cr, statuscontract.Failure{Reason: statuscontract.ReasonErrorGettingClient, Step: "reconcile", Message: err.Error()})
			return nil, err
		}
		return outcomeClient{ActionInterface: c, obj: cr, outcomes: o, metrics: metrics}, nil
	})
}

type outcomeClient struct {
	helmclient.ActionInterface
	obj      client.Object
	outcomes *outcomes.Store
	metrics  *metrics.Fleet // the last install's or upgrade's duration and result
}

func (c outcomeClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		c.outcomes.Failed(c.obj, statuscontract.Failure{Reason: statuscontract.ReasonReleaseLookupFailed, Step: "reconcile", Message: err.Error()})
	}
	return rel, err
}

func (c outcomeClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	c.metrics.HelmOperation(c.obj.GetObjectKind().GroupVersionKind().Kind, namespace, name, time.Since(start), err)
	if f, refused := refusal.Of(err); refused {
		c.outcomes.Failed(c.obj, f)
	} else if err != nil {
		c.outcomes.Failed(c.obj, statuscontract.Failure{Reason: statuscontract.ReasonInstallFailed, Step: "install", Message: err.Error()})
	}
	return rel, err
}

func (c outcomeClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	start := time.Now()
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	if !actionclient.IsDryRun(opts) {
		c.metrics.HelmOperation(c.obj.GetObjectKind().GroupVersionKind().Kind, namespace, name, time.Since(start), err)
	}
	if f, refused := refusal.Of(err); refused {
		c.outcomes.Failed(c.obj, f)
	} else if err != nil {
		reason := statuscontract.ReasonUpgradeFailed
		if actionclient.IsDryRun(opts) {
			reason = statuscontract.ReasonDryRunFailed // the spec does not render or is refused: see layer_releaseevents.go
		}
		c.outcomes.Failed(c.obj, statuscontract.Failure{Reason: reason, Step: "upgrade", Message: err.Error()})
	}
	return rel, err
}

func (c outcomeClient) Reconcile(rel *release.Release) error {
	err := c.ActionInterface.Reconcile(rel)
	if err != nil {
		c.outcomes.Failed(c.obj, statuscontract.Failure{Reason: statuscontract.ReasonReconcileFailed, Step: "drift repair", Message: err.Error()})
	}
	return err
}

// RecordSuccess is the reconciler's post-hook: it runs after every install, upgrade or
// unchanged release that succeeded, before the reconciler's own status write.
func RecordSuccess(o *outcomes.Store) hook.PostHook {
	return hook.PostHookFunc(func(obj *unstructured.Unstructured, rel release.Release, _ logr.Logger) error {
		o.Succeeded(obj, &rel)
		return nil
	})
}
