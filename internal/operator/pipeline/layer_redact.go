package pipeline

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// withRedaction hands out action clients whose errors quote nothing the CR's visit in
// progress read from Secrets (spec.valuesFrom): Helm's render errors quote values ("error
// calling fail: ..."), and the API server's quote the fields it refuses. Next to the engine,
// so that every layer above, the reconciler, its conditions and its log see only redacted
// errors.
func withRedaction(getter helmclient.ActionClientGetter, o *outcomes.Store) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return redactingClient{ActionInterface: c, key: client.ObjectKeyFromObject(cr), outcomes: o}
	})
}

// redactingClient asks for the strings to redact at each call, not when it is made: the
// reconciler gets its action client before it reads the CR's values.
type redactingClient struct {
	helmclient.ActionInterface
	key      types.NamespacedName
	outcomes *outcomes.Store
}

func (c redactingClient) redactor() valuesfrom.Redactor { return c.outcomes.Redactor(c.key) }

func (c redactingClient) Get(name string, opts ...helmclient.GetOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Get(name, opts...)
	return rel, c.redactor().Error(err)
}

func (c redactingClient) Install(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.InstallOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Install(name, namespace, chrt, vals, opts...)
	return rel, c.redactor().Error(err)
}

func (c redactingClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	rel, err := c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	return rel, c.redactor().Error(err)
}

func (c redactingClient) Reconcile(rel *release.Release) error {
	return c.redactor().Error(c.ActionInterface.Reconcile(rel))
}

func (c redactingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	res, err := c.ActionInterface.Uninstall(name, opts...)
	return res, c.redactor().Error(err)
}
