package pipeline

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// Gate is the rollout controller of a kind as the rollout gate asks it (rollout_controller.go),
// exported for setupKind, which hands the kind's rollout controller to its pipeline.
type Gate interface {
	// Carries reports whether c is the chart the operator carries for the kind.
	Carries(c *chart.Chart) bool
	// Admits reports whether cr may move to the carried chart now.
	Admits(cr client.Object) bool
	// RollsBack reports whether cr failed on the carried chart and goes back to the one it
	// had before.
	RollsBack(cr client.Object) bool
}

// withRolloutGate hands out action clients that upgrade a release to the chart the operator
// carries only when the kind's rollout admits the CR (see gatedClient).
func withRolloutGate(getter helmclient.ActionClientGetter, gate Gate, o *outcomes.Store) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return gatedClient{ActionInterface: c, cr: cr, gate: gate, outcomes: o}
	})
}

// gatedClient is the rollout gate (see pipeline.go). The reconciler always upgrades with the
// chart the operator carries; for a release on another chart that the rollout has not
// admitted yet, the gate upgrades with the chart of the release itself (a Helm release
// record keeps its chart), so that a spec edit still applies, and an unchanged spec
// renders as it is deployed, which the reconciler's dry run finds unchanged: the release is
// left alone. A CR that failed on the carried chart, under a rollback policy, is upgraded
// with the chart of its last revision on another chart.
//
// The values are the CR's own, its spec.valuesFrom merged in as the reconciler's value
// translator read them in this visit (internal/operator/values), not the reconciler's: those are
// merged with the default values of the carried chart, which would bring the new chart's
// defaults into the old.
type gatedClient struct {
	helmclient.ActionInterface
	cr       client.Object
	gate     Gate
	outcomes *outcomes.Store // the values the visit translated; nil: the spec's
}

func (c gatedClient) Upgrade(name, namespace string, chrt *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	rollsBack := c.gate.RollsBack(c.cr)
	if !c.gate.Carries(chrt) || (c.gate.Admits(c.cr) && !rollsBack) {
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	}
	cur, err := c.ActionInterface.Get(name)
	if err != nil || cur.Chart == nil {
		return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
	}
	onCarried := c.gate.Carries(cur.Chart)
	switch {
	case !onCarried:
		// Held back, or failed and back on its chart: it stays on the chart it has.
		return c.ActionInterface.Upgrade(name, namespace, cur.Chart, c.ownValues(), opts...)
	case rollsBack:
		if prev := c.previousChart(name); prev != nil {
			return c.ActionInterface.Upgrade(name, namespace, prev, c.ownValues(), opts...)
		}
	}
	// On the carried chart already (a CR created during the rollout, or moved in an
	// earlier wave): it stays there.
	return c.ActionInterface.Upgrade(name, namespace, chrt, vals, opts...)
}

// previousChart is the chart of the newest revision of release name on another chart than
// the carried one; nil if none is left in the history.
func (c gatedClient) previousChart(name string) *chart.Chart {
	revs, err := c.History(name)
	if err != nil {
		return nil
	}
	var prev *release.Release
	for _, r := range revs {
		if r.Chart != nil && !c.gate.Carries(r.Chart) && (prev == nil || r.Version > prev.Version) {
			prev = r
		}
	}
	if prev == nil {
		return nil
	}
	return prev.Chart
}

// ownValues are the CR's values before any chart's defaults: those the visit's value
// translator made, or, if none is recorded, its spec (the reconciler has already applied the
// watch's override values to it) without spec.valuesFrom.
func (c gatedClient) ownValues() map[string]any {
	if c.outcomes != nil {
		if vals, ok := c.outcomes.Translated(client.ObjectKeyFromObject(c.cr)); ok {
			return vals // Helm copies the values it coalesces
		}
	}
	u, ok := c.cr.(*unstructured.Unstructured)
	if !ok {
		return map[string]any{}
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	if spec == nil {
		spec = map[string]any{}
	}
	return valuesfrom.Values(runtime.DeepCopyJSON(spec))
}
