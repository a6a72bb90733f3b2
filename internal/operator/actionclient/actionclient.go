package actionclient

import (
	"context"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Wrap returns a getter that hands out the action clients of getter, each wrapped by wrap
// for the CR it serves: how most layers of a pipeline are made. Exported
// so that the layers kept in packages of their own are made with it too.
func Wrap(getter helmclient.ActionClientGetter, wrap func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, cr client.Object) (helmclient.ActionInterface, error) {
		c, err := getter.ActionClientFor(ctx, cr)
		if err != nil {
			return nil, err
		}
		return wrap(c, cr), nil
	})
}

// IsDryRun applies the upgrade options to a blank upgrade to see whether they ask for a dry
// run: the layers that act only on a real upgrade, wherever they are kept, ask it.
func IsDryRun(opts []helmclient.UpgradeOption) bool {
	u := &action.Upgrade{}
	for _, o := range opts {
		if err := o(u); err != nil {
			return false
		}
	}
	return u.DryRun
}
