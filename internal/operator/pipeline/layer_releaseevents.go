package pipeline

import (
	"errors"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/refusal"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// withReleaseEvents hands out action clients that record failed operations as Events.
func withReleaseEvents(getter helmclient.ActionClientGetter, recorder record.EventRecorder) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return eventingClient{ActionInterface: c, obj: cr, recorder: recorder}
	})
}

// eventingClient is the release events layer, over the orphan sweep (see pipeline.go).
//
// helm-operator-plugins' reconciler (v0.9.1) reports a failed install, upgrade, uninstall or
// drift repair only in the CR's status conditions (ReleaseFailed, Irreconcilable): it records
// no Event (its recorder is used for overridden values only). `kubectl describe` and `kubectl
// get events`, where users and alerting look first, showed nothing. eventingClient records a
// Warning Event on the CR for each failed Helm operation, with Helm's error; the recorder
// aggregates repeats of the same failure into one Event with a count. A layer's refusal
// (refusal.Refuse) is reported with its own reason.
type eventingClient struct {
	helmclient.ActionInterface
	obj      client.Object
	recorder record.EventRecorder
}

func (c eventingClient) warn(reason, format string, args ...any) {
	c.recorder.Event(c.obj, corev1.EventTypeWarning, reason, refusal.Truncate(fmt.Sprintf(format, args...), refusal.MaxEventMessage))
}

// Get reports a release that exists but cannot be used (another kind's, or unreadable); no
// release at all is the normal state of a new CR.
func (c eventingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		c.warn(statuscontract.ReasonReleaseLookupFailed, "reading release %s: %v", name, err)
	}
	return rel, err
}

func (c eventingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	if f, refused := refusal.Of(err); refused {
		c.warn(f.Reason, "release %s: %s", name, f.Message)
	} else if err != nil {
		c.warn(statuscontract.ReasonInstallFailed, "installing release %s: %v", name, err)
	}
	return rel, err
}

// Upgrade reports a failed upgrade, and a failed server-side dry run: the reconciler dry-runs
// an upgrade to learn whether the release differs from the spec, and a spec that cannot be
// rendered or applied fails there first.
func (c eventingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	if f, refused := refusal.Of(err); refused {
		c.warn(f.Reason, "release %s: %s", name, f.Message)
	} else if err != nil {
		what := "upgrading"
		if actionclient.IsDryRun(opts) {
			what = "checking the upgrade (server-side dry run) of"
		}
		c.warn(statuscontract.ReasonUpgradeFailed, "%s release %s: %v", what, name, err)
	}
	return rel, err
}

func (c eventingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		c.warn(statuscontract.ReasonUninstallFailed, "uninstalling release %s: %v", name, err)
	}
	return resp, err
}

func (c eventingClient) Reconcile(rel *release.Release) error {
	err := c.ActionInterface.Reconcile(rel)
	if err != nil {
		c.warn(statuscontract.ReasonReconcileFailed, "repairing the objects of release %s: %v", rel.Name, err)
	}
	return err
}
