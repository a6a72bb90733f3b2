package renderbound

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// testChart is a chart whose one template evaluates the value "tpl" with tpl, as Bitnami's
// common.tplvalues.render does, and renders a ConfigMap of its result.
func testChart(name string, templates map[string]string) *chart.Chart {
	c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: name, Version: "0.1.0"},
		Values: map[string]any{"tpl": "", "replicas": 1}}
	for file, text := range templates {
		c.Templates = append(c.Templates, &chart.File{Name: "templates/" + file, Data: []byte(text)})
	}
	return c
}

const tplConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  rendered: {{ tpl (toString .Values.tpl) . | quote }}
`

func input(c *chart.Chart, vals map[string]any) Input {
	return Input{Chart: c, Values: vals, Release: chartutil.ReleaseOptions{Name: "web", Namespace: "tenant-a", Revision: 1, IsInstall: true}}
}

func newTestChecker(t *testing.T, b Bounds) *Checker {
	t.Helper()
	c, err := NewChecker(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func wantBound(t *testing.T, err error, bound string) {
	t.Helper()
	var ex *Exceeded
	if !errors.As(err, &ex) || ex.Bound != bound {
		t.Fatalf("got %v, want the %s bound exceeded", err, bound)
	}
	if !strings.Contains(ex.Error(), ex.Flag) {
		t.Errorf("%q does not name the flag %s", ex.Error(), ex.Flag)
	}
}

func TestWithinBoundsPasses(t *testing.T) {
	c := newTestChecker(t, DefaultBounds())
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	in := input(ch, map[string]any{"tpl": "{{ .Release.Name }}-{{ .Values.replicas }}"})
	for i := range 2 {
		if err := c.Check(context.Background(), in); err != nil {
			t.Fatalf("check %d: %v", i, err)
		}
	}
	if n := len(c.verdicts); n != 1 {
		t.Errorf("%d verdicts remembered, want 1 for one input checked twice", n)
	}
}

// A render's own error is Helm's to report, with its message: it is no verdict.
func TestTemplateErrorIsNotAVerdict(t *testing.T) {
	c := newTestChecker(t, DefaultBounds())
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	if err := c.Check(context.Background(), input(ch, map[string]any{"tpl": `{{ fail "no" }}`})); err != nil {
		t.Fatalf("got %v, want nil: Helm's render reports the template's own error", err)
	}
}

// The memory bomb: one value that makes repeat allocate 300 MB.
func TestMemoryBombRefused(t *testing.T) {
	c := newTestChecker(t, DefaultBounds())
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	err := c.Check(context.Background(), input(ch, map[string]any{"tpl": `{{ len (repeat 300000000 "x") }}`}))
	wantBound(t, err, BoundMemory)

	// The worker that died is replaced for the next render.
	if err := c.Check(context.Background(), input(ch, map[string]any{"tpl": "small"})); err != nil {
		t.Fatalf("the render after the bomb: %v", err)
	}
}

// Memory that grows step by step, each string twice the last, rather than in one allocation.
func TestGrowingMemoryRefused(t *testing.T) {
	c := newTestChecker(t, DefaultBounds())
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	bomb := `{{ $s := "x" }}{{ range 29 }}{{ $s = print $s $s }}{{ end }}{{ len $s }}`
	wantBound(t, c.Check(context.Background(), input(ch, map[string]any{"tpl": bomb})), BoundMemory)
}

// The CPU bomb: nested ranges that would loop for hours, with no function to guard.
func TestCPUBombStoppedAtDeadline(t *testing.T) {
	b := DefaultBounds()
	b.Timeout = 2 * time.Second
	c := newTestChecker(t, b)
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	err := c.Check(context.Background(), input(ch, map[string]any{"tpl": `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`}))
	wantBound(t, err, BoundTime)
}

func TestOutputBoundRefused(t *testing.T) {
	b := DefaultBounds()
	b.Output = 1 << 20
	c := newTestChecker(t, b)
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	wantBound(t, c.Check(context.Background(), input(ch, map[string]any{"tpl": `{{ repeat 2000000 "x" }}`})), BoundOutput)
	if err := c.Check(context.Background(), input(ch, map[string]any{"tpl": `{{ repeat 500000 "x" }}`})); err != nil {
		t.Fatalf("half a MiB under a 1 MiB bound: %v", err)
	}
}

// A bomb in a subchart's template is rendered too: the chart travels with its subcharts.
func TestSubchartRendered(t *testing.T) {
	c := newTestChecker(t, DefaultBounds())
	parent := testChart("stack", map[string]string{"cm.yaml": tplConfigMap})
	parent.Metadata.Dependencies = []*chart.Dependency{{Name: "cache", Version: "0.1.0"}}
	parent.AddDependency(testChart("cache", map[string]string{"cm.yaml": tplConfigMap}))
	err := c.Check(context.Background(), input(parent, map[string]any{"cache": map[string]any{"tpl": `{{ len (repeat 300000000 "x") }}`}}))
	wantBound(t, err, BoundMemory)
}

// While one render runs to its deadline, another worker serves everyone else.
func TestOthersServedDuringABomb(t *testing.T) {
	b := DefaultBounds()
	b.Workers = 2
	b.Timeout = 5 * time.Second
	c := newTestChecker(t, b)
	ch := testChart("web", map[string]string{"cm.yaml": tplConfigMap})
	bomb := make(chan error, 1)
	go func() {
		bomb <- c.Check(context.Background(), input(ch, map[string]any{"tpl": `{{ range 100000 }}{{ range 100000 }}{{ end }}{{ end }}`}))
	}()
	for i := range 5 {
		if err := c.Check(context.Background(), input(ch, map[string]any{"tpl": fmt.Sprint("tenant-", i)})); err != nil {
			t.Fatalf("tenant %d: %v", i, err)
		}
	}
	select {
	case err := <-bomb:
		t.Fatalf("the bomb's check returned (%v) before the other tenants' were served", err)
	default:
	}
	wantBound(t, <-bomb, BoundTime)
}
