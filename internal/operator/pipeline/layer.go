package pipeline

import helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"

// How a pipeline (pipeline.go) stacks its layers: a layer wraps the action clients of the
// layer below it, with internal/operator/actionclient's Wrap. It knows nothing of any one
// layer, so that a layer never calls into the file that assembles them.

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
