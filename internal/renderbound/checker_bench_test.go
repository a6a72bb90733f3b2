package renderbound

import (
	"context"
	"fmt"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// BenchmarkCheck is what the render bounds add to a render of this repository's AppService
// chart: a check of new values in a worker (the chart already sent), beside Helm's render of
// the same in this process, which the manager makes anyway.
func BenchmarkCheck(b *testing.B) {
	ch, err := loader.Load("../../helm-charts/appservice")
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewChecker(DefaultBounds(), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	values := func(i int) map[string]any {
		return map[string]any{"deploymentName": "web", "image": fmt.Sprintf("nginx:1.%d", i)}
	}
	in := func(i int) Input {
		return Input{Chart: ch, Values: values(i), Release: chartutil.ReleaseOptions{Name: "web", Namespace: "t", IsUpgrade: true}}
	}
	if err := c.Check(context.Background(), in(-1)); err != nil { // the worker started, the chart sent
		b.Fatal(err)
	}
	checked := 0 // values never checked before, across runs: a remembered verdict costs nothing
	b.Run("worker", func(b *testing.B) {
		for range b.N {
			checked++
			if err := c.Check(context.Background(), in(checked)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("helm-in-process", func(b *testing.B) {
		for i := range b.N {
			vals, err := chartutil.ToRenderValues(ch, values(i), in(i).Release, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := (engine.Engine{}).Render(ch, vals); err != nil {
				b.Fatal(err)
			}
		}
	})
}
