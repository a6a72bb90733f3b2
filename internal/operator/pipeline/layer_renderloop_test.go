package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// Three upgrades in a row from the same chart and values are a render loop: the fourth is
// refused, saying why, until the values change or an hour has passed; dry runs and failed
// upgrades do not count.
func TestRenderLoopRefused(t *testing.T) {
	engine := &actiontest.FakeActions{}
	o := outcomes.New()
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("ns")
	cr.SetName("app")
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	c := renderLoopClient{ActionInterface: engine, cr: cr, outcomes: o, now: func() time.Time { return now }}
	chrt := &chart.Chart{Metadata: &chart.Metadata{Name: "app", Version: "1.0.0"}}
	vals := map[string]any{"replicas": int64(1)}
	dryRun := func(u *action.Upgrade) error { u.DryRun = true; return nil }
	upgrade := func(vals map[string]any) error {
		_, err := c.Upgrade("app", "ns", chrt, vals)
		return err
	}

	for i := range renderLoopUpgrades {
		if err := upgrade(vals); err != nil {
			t.Fatalf("upgrade %d: %v", i+1, err)
		}
		if _, err := c.Upgrade("app", "ns", chrt, vals, dryRun); err != nil {
			t.Fatalf("dry run: %v", err)
		}
	}
	var loop renderLoopError
	if err := upgrade(vals); !errors.As(err, &loop) || !strings.Contains(err.Error(), "renders differently at every render") {
		t.Fatalf("the fourth upgrade from the same inputs: %v, want a render loop", err)
	}
	if got := strings.Count(strings.Join(engine.Calls, ","), "dry-run upgrade"); got != renderLoopUpgrades {
		t.Errorf("dry runs passed on: %d, want %d", got, renderLoopUpgrades)
	}
	if got := len(engine.Calls) - renderLoopUpgrades; got != renderLoopUpgrades {
		t.Errorf("upgrades passed on: %d, want %d (the refused one not)", got, renderLoopUpgrades)
	}

	// New values: an upgrade, and the count starts again.
	edited := map[string]any{"replicas": int64(2)}
	if err := upgrade(edited); err != nil {
		t.Fatalf("an upgrade from new values: %v", err)
	}
	// A failed upgrade does not count.
	engine.Errs = map[string]error{"upgrade": errors.New("boom")}
	for range renderLoopUpgrades {
		_ = upgrade(edited)
	}
	engine.Errs = nil
	if err := upgrade(edited); err != nil {
		t.Fatalf("failed upgrades counted as a loop: %v", err)
	}
	if err := upgrade(edited); err != nil {
		t.Fatalf("the third upgrade from the same inputs: %v", err)
	}
	if err := upgrade(edited); err == nil {
		t.Fatal("the fourth upgrade from the same inputs passed")
	}
	// An hour after the last upgrade, one more is tried, and the loop holds again.
	now = now.Add(renderLoopHold)
	if err := upgrade(edited); err != nil {
		t.Fatalf("an hour later: %v", err)
	}
	if err := upgrade(edited); err == nil {
		t.Fatal("the loop does not hold after the hour's upgrade")
	}
}
