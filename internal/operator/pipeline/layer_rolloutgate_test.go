package pipeline

import (
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// chartHistory is an engine with a release history that records the chart and values of
// each upgrade.
type chartHistory struct {
	helmclient.ActionInterface
	revs     []*release.Release // the last is current
	upgrades []string           // the chart version of each
}

func (h *chartHistory) Get(string, ...helmclient.GetOption) (*release.Release, error) {
	return h.revs[len(h.revs)-1], nil
}

func (h *chartHistory) History(string, ...helmclient.HistoryOption) ([]*release.Release, error) {
	return h.revs, nil
}

func (h *chartHistory) Upgrade(_, _ string, c *chart.Chart, vals map[string]any, _ ...helmclient.UpgradeOption) (*release.Release, error) {
	h.upgrades = append(h.upgrades, c.Metadata.Version)
	return h.revs[len(h.revs)-1], nil
}

// fixedGate admits and rolls back as told.
type fixedGate struct {
	carried     *rollout.Carried
	admit, back bool
}

func (g fixedGate) Carries(c *chart.Chart) bool  { return g.carried.Is(c) }
func (g fixedGate) Admits(client.Object) bool    { return g.admit }
func (g fixedGate) RollsBack(client.Object) bool { return g.back }

// The gate passes the carried chart on when the rollout admits the CR, else upgrades with
// the release's own chart and the CR's spec as values (not the reconciler's, merged with the
// carried chart's defaults); a CR to roll back gets the chart of its last revision on
// another chart.
func TestRolloutGate(t *testing.T) {
	v1, v2 := actiontest.MemcachedChart("1.0.0", "old-default"), actiontest.MemcachedChart("2.0.0", "new-default")
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(5)}}}
	// The reconciler's values: the spec merged with the carried chart's defaults.
	reconcilerVals := map[string]any{"size": int64(5), "extra": "new-default"}
	for _, tc := range []struct {
		name             string
		revs             []*release.Release
		admit, rollsBack bool
		want             string
	}{
		{"admitted: the carried chart", []*release.Release{{Version: 1, Chart: v1}}, true, false, "2.0.0"},
		{"held: its own chart, its own values", []*release.Release{{Version: 1, Chart: v1}}, false, false, "1.0.0"},
		{"on the carried chart already: stays", []*release.Release{{Version: 1, Chart: v2}}, false, false, "2.0.0"},
		{"failed, rollback: the previous chart", []*release.Release{{Version: 1, Chart: v1}, {Version: 2, Chart: v2}}, true, true, "1.0.0"},
		{"failed, rolled back already: stays", []*release.Release{{Version: 1, Chart: v2}, {Version: 2, Chart: v1}}, true, true, "1.0.0"},
		{"failed, no previous chart: the carried one", []*release.Release{{Version: 1, Chart: v2}}, true, true, "2.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &chartHistory{revs: tc.revs}
			gate := fixedGate{carried: rollout.NewCarried(rollout.Digest(v2)), admit: tc.admit, back: tc.rollsBack}
			c := gatedClient{ActionInterface: h, cr: cr, gate: gate}
			if _, err := c.Upgrade("x", "ns", v2, reconcilerVals); err != nil {
				t.Fatal(err)
			}
			if h.upgrades[0] != tc.want {
				t.Errorf("upgraded with chart %s, want %s", h.upgrades[0], tc.want)
			}
		})
	}

	// Values: held back, the chart gets the spec alone.
	h := &chartHistory{revs: []*release.Release{{Version: 1, Chart: v1}}}
	var got map[string]any
	spy := &valuesSpy{chartHistory: h, got: &got}
	c := gatedClient{ActionInterface: spy, cr: cr, gate: fixedGate{carried: rollout.NewCarried(rollout.Digest(v2))}}
	if _, err := c.Upgrade("x", "ns", v2, reconcilerVals); err != nil {
		t.Fatal(err)
	}
	if _, leaked := got["extra"]; leaked || got["size"] != int64(5) {
		t.Errorf("held back with values %v, want the spec {size: 5}", got)
	}
}

type valuesSpy struct {
	*chartHistory
	got *map[string]any
}

func (s *valuesSpy) Upgrade(name, ns string, c *chart.Chart, vals map[string]any, opts ...helmclient.UpgradeOption) (*release.Release, error) {
	*s.got = vals
	return s.chartHistory.Upgrade(name, ns, c, vals, opts...)
}
