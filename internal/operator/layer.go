package operator

import (
	"context"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/action"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The plumbing every layer of a pipeline (pipeline.go) is made with: a layer wraps the
// action clients of the layer below it. It knows nothing of any one layer, so that a layer
// never calls into the file that assembles them.

// layer is one layer of a pipeline: wrap hands out the action clients of the layer below,
// each wrapped for the CR it serves.
type layer struct {
	name string
	wrap func(below helmclient.ActionClientGetter) helmclient.ActionClientGetter
}

// stack wraps engine in layers, the first next to the engine.
func stack(engine helmclient.ActionClientGetter, layers []layer) helmclient.ActionClientGetter {
	g := engine
	for _, l := range layers {
		g = l.wrap(g)
	}
	return g
}

// wrapActionClients returns a getter that hands out the action clients of getter, each
// wrapped by wrap for the CR it serves: how most layers are made (see pipeline).
func wrapActionClients(getter helmclient.ActionClientGetter, wrap func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface) helmclient.ActionClientGetter {
	return helmclient.ActionClientGetterFunc(func(ctx context.Context, cr client.Object) (helmclient.ActionInterface, error) {
		c, err := getter.ActionClientFor(ctx, cr)
		if err != nil {
			return nil, err
		}
		return wrap(c, cr), nil
	})
}

// isDryRun applies the upgrade options to a blank upgrade to see whether they ask for a dry run.
func isDryRun(opts []helmclient.UpgradeOption) bool {
	u := &action.Upgrade{}
	for _, o := range opts {
		if err := o(u); err != nil {
			return false
		}
	}
	return u.DryRun
}
