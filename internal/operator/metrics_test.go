package operator

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"
)

// exportedMetrics are the names of the manager's own metrics, each registered with the
// registry the manager serves.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range managerCollectors {
		err := metrics.Registry.Register(c)
		if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
			t.Errorf("a collector of the manager is not registered with the served registry: %v", err)
		}
		ch := make(chan *prometheus.Desc, 10)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	return names
}

var metricName = regexp.MustCompile(`\bwarpdrive_[a-z_]+`)

// The Grafana dashboards of config/grafana and the alert rules of config/prometheus use only
// metrics the manager exports, and use each of the rollout's.
func TestDashboardsUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	if len(exported) != len(managerCollectors) {
		t.Fatalf("%d metric names for %d collectors: %v", len(exported), len(managerCollectors), exported)
	}
	var exprs []string
	dashboards, err := filepath.Glob("../../config/grafana/*.json")
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboards in config/grafana: %v", err)
	}
	for _, path := range dashboards {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string
				Targets []struct{ Expr string }
			}
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, p := range d.Panels {
			for _, target := range p.Targets {
				exprs = append(exprs, target.Expr)
			}
		}
	}
	data, err := os.ReadFile("../../config/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rule struct {
		Kind string
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert, Expr string
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &rule); err != nil {
		t.Fatal(err)
	}
	if rule.Kind != "PrometheusRule" {
		t.Fatalf("config/prometheus/alerts.yaml is a %q, want a PrometheusRule", rule.Kind)
	}
	alerts := map[string]bool{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
			alerts[r.Alert] = true
		}
	}
	for _, a := range []string{"WarpdriveChartRolloutHalted", "WarpdriveCRStalled"} {
		if !alerts[a] {
			t.Errorf("no alert %s", a)
		}
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			used[name] = true
			if !exported[name] {
				t.Errorf("%q uses %s, which the manager does not export", e, name)
			}
		}
	}
	var unused []string
	for name := range exported {
		if !used[name] {
			unused = append(unused, name)
		}
	}
	sort.Strings(unused)
	if len(unused) > 0 {
		t.Errorf("metrics no dashboard or alert shows: %v", unused)
	}
}
