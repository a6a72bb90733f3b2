package renderbound

import (
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// request asks a worker to render one chart with one set of values. The chart travels once
// per worker: a request whose ChartKey the worker has seen carries no Chart.
type request struct {
	ChartKey string                   `json:"chartKey"`
	Chart    *wireChart               `json:"chart,omitempty"`
	Values   map[string]any           `json:"values"`
	Release  chartutil.ReleaseOptions `json:"release"`
}

// reply is a worker's answer. A worker that passes the memory bound or the deadline sends
// none: it dies, or is killed.
type reply struct {
	// OutputBytes is the size of the rendered templates.
	OutputBytes int64 `json:"outputBytes"`
	// Exceeded names a bound the worker checked itself (BoundOutput).
	Exceeded string `json:"exceeded,omitempty"`
	// PeakRSS is the worker's peak resident memory so far, in bytes: what a render cost.
	PeakRSS int64 `json:"peakRSS"`
	// Err is the render's own error (a `fail`, a missing `required` value, a parse error).
	// It is not a verdict: Helm's render in the manager reports it as it would have.
	Err string `json:"err,omitempty"`
}

// wireChart is a chart with its subcharts, which chart.Chart keeps in an unexported field
// that JSON does not carry.
type wireChart struct {
	Chart        *chart.Chart `json:"chart"`
	Dependencies []*wireChart `json:"dependencies,omitempty"`
}

// toWire copies c for the wire, without the raw files that Helm keeps beside the parsed ones.
func toWire(c *chart.Chart) *wireChart {
	flat := *c
	flat.Raw = nil
	flat.SetDependencies() // the copy's own list; the wire carries them in Dependencies
	w := &wireChart{Chart: &flat}
	for _, d := range c.Dependencies() {
		w.Dependencies = append(w.Dependencies, toWire(d))
	}
	return w
}

// fromWire builds a fresh chart from w, its subcharts linked to it as Helm's loader does.
// Fresh, because rendering enables and disables subcharts in place.
func fromWire(w *wireChart) *chart.Chart {
	c := *w.Chart
	for _, d := range w.Dependencies {
		c.AddDependency(fromWire(d))
	}
	return &c
}
