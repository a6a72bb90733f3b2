package renderbound

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
)

// monitoringStack is a chart of the size and shape of kube-prometheus-stack, the largest
// widely used chart: 160 templates through shared helpers, 1,750 values, and 40 Grafana
// dashboards of 60 KB of JSON each (2.4 MB) rendered into ConfigMaps, with some values passed
// through tpl as its chart does for extra labels.
func monitoringStack() (*chart.Chart, map[string]any) {
	c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: "v2", Name: "monitoring", Version: "1.0.0"}}
	c.Templates = append(c.Templates, &chart.File{Name: "templates/_helpers.tpl", Data: []byte(`
{{- define "mon.fullname" -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end }}
{{- define "mon.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Values.commonLabels }}
{{ tpl (toYaml .) $ }}
{{- end }}
{{- end }}
`)})
	values := map[string]any{"commonLabels": map[string]any{"team": "{{ .Release.Namespace }}"}}
	components := map[string]any{}
	for i := range 120 {
		name := fmt.Sprintf("component%d", i)
		comp := map[string]any{"enabled": true, "replicas": 2, "image": map[string]any{"repository": "example/" + name, "tag": "v1.2.3"},
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m", "memory": "128Mi"}}, "args": []any{"--a", "--b", "--c"},
			"labels": map[string]any{"tier": name}}
		components[name] = comp
		c.Templates = append(c.Templates, &chart.File{Name: "templates/" + name + ".yaml", Data: []byte(strings.ReplaceAll(`
{{- $c := index .Values.components "NAME" }}
{{- if $c.enabled }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "mon.fullname" . }}-NAME
  labels: {{- include "mon.labels" . | nindent 4 }}
spec:
  replicas: {{ $c.replicas }}
  selector:
    matchLabels: {{- include "mon.labels" . | nindent 6 }}
  template:
    metadata:
      labels: {{- include "mon.labels" . | nindent 8 }}{{ with $c.labels }}{{ toYaml . | nindent 8 }}{{ end }}
    spec:
      containers:
      - name: NAME
        image: "{{ $c.image.repository }}:{{ $c.image.tag }}"
        args: {{- toYaml $c.args | nindent 8 }}
        resources: {{- toYaml $c.resources | nindent 10 }}
{{- end }}
`, "NAME", name))})
	}
	values["components"] = components
	panel := strings.Repeat(`{"type":"timeseries","title":"{{ "{{" }}instance{{ "}}" }}","targets":[{"expr":"sum(rate(http_requests_total[5m])) by (instance)"}]},`, 500)
	for i := range 40 {
		c.Templates = append(c.Templates, &chart.File{Name: fmt.Sprintf("templates/dashboards/d%d.yaml", i), Data: []byte(fmt.Sprintf(`
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "mon.fullname" . }}-dashboard-%d
  labels: {{- include "mon.labels" . | nindent 4 }}
data:
  dashboard.json: |-
    {"panels":[%s{}]}
`, i, panel))})
	}
	return c, values
}

// TestMonitoringStackFitsDefaults renders a monitoring-stack-sized chart within the default
// bounds, and logs what it cost the worker (docs/security.md, "Template bounds", cites it).
func TestMonitoringStackFitsDefaults(t *testing.T) {
	c := newTestChecker(t, DefaultBounds())
	ch, vals := monitoringStack()
	in := input(ch, vals)
	if err := c.Check(context.Background(), in); err != nil {
		t.Fatalf("the monitoring stack within the default bounds: %v", err)
	}
	w, err := c.start()
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	start := time.Now()
	if v, err := w.render(context.Background(), "size", in, DefaultBounds()); v != nil || err != nil {
		t.Fatalf("render in a fresh worker: %v %v", v, err)
	}
	took := time.Since(start)
	rendered := render(toWire(ch), request{Values: vals, Release: in.Release}, 0)
	if rendered.Err != "" {
		t.Fatal(rendered.Err)
	}
	t.Logf("monitoring stack: %d templates, %.1f MiB rendered in %s by a fresh worker, its peak RSS %.0f MiB (bounds: memory %s, output %s, %s)",
		len(ch.Templates), float64(rendered.OutputBytes)/(1<<20), took.Round(time.Millisecond), float64(w.peakRSS)/(1<<20),
		ByteSize(DefaultMemory), ByteSize(DefaultOutput), DefaultTimeout)
	if rendered.OutputBytes < 2<<20 {
		t.Errorf("rendered %d bytes, want a chart of the monitoring stack's size (over 2 MiB)", rendered.OutputBytes)
	}
}
