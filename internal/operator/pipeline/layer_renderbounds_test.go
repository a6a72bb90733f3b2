package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/renderbound"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// A CR whose values make the chart's tpl allocate past the memory bound, or loop past the
// deadline, is refused through the whole pipeline: its dry run, install and upgrade never
// reach Helm, the refusal is terminal, the CR's failure and its Warning Event name the bound,
// and a CR of sane values is served by the same pipeline.
func TestRenderBoundsRefuseThroughThePipeline(t *testing.T) {
	p, rec, _ := testPipeline()
	b := renderbound.DefaultBounds()
	b.Timeout = 2 * time.Second
	checker, err := renderbound.NewChecker(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(checker.Close)
	p.Renders = checker
	p.Chart.Metadata.Version = "0.1.0"
	p.Chart.Templates = []*chart.File{{Name: "templates/cm.yaml", Data: []byte(
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {v: {{ tpl (toString .Values.extra) . | quote }}}\n")}}
	dryRun := func(u *action.Upgrade) error { u.DryRun = true; return nil }

	for _, tc := range []struct {
		name, extra, reason string
	}{
		{"memory", `{{ len (repeat 300000000 "x") }}`, statuscontract.ReasonRenderMemoryExceeded},
		{"time", `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`, statuscontract.ReasonRenderTimeExceeded},
	} {
		engine := &actiontest.FakeActions{Cfg: &action.Configuration{Releases: storage.Init(driver.NewMemory())}}
		cr := actiontest.AppServiceCR()
		c := clientFor(t, p, engine, cr)
		vals := map[string]any{"extra": tc.extra}
		for _, call := range []func() error{
			func() error { _, err := c.Upgrade("x", "team-a", p.Chart, vals, dryRun); return err },
			func() error { _, err := c.Install("x", "team-a", p.Chart, vals); return err },
			func() error { _, err := c.Upgrade("x", "team-a", p.Chart, vals); return err },
		} {
			err := call()
			if !errors.Is(err, reconcile.TerminalError(nil)) || !strings.Contains(err.Error(), "--render-") {
				t.Errorf("%s bomb: %v, want a terminal refusal naming the bound's flag", tc.name, err)
			}
		}
		if len(engine.Calls) != 0 {
			t.Errorf("%s bomb: Helm was called: %v", tc.name, engine.Calls)
		}
		e, _ := p.Outcomes.Get(client.ObjectKeyFromObject(cr), cr.GetUID())
		if e.Failure.Reason != tc.reason || !e.Failure.Terminal {
			t.Errorf("%s bomb: outcome %+v, want a terminal %s", tc.name, e.Failure, tc.reason)
		}
		evs := actiontest.Events(rec)
		if len(evs) == 0 || !strings.HasPrefix(evs[0], "Warning "+tc.reason) {
			t.Errorf("%s bomb: Events %q, want a Warning %s", tc.name, evs, tc.reason)
		}
	}

	engine := &actiontest.FakeActions{Cfg: &action.Configuration{Releases: storage.Init(driver.NewMemory())}}
	c := clientFor(t, p, engine, actiontest.AppServiceCR())
	if _, err := c.Install("x", "team-a", p.Chart, map[string]any{"extra": "{{ .Release.Name }}"}); err != nil {
		t.Fatalf("a CR of sane values: %v", err)
	}
	if len(engine.Calls) != 1 {
		t.Errorf("a CR of sane values: Helm calls %v, want its install", engine.Calls)
	}
}
