package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// exportedMetrics are the names of the manager's own metrics, each registered with the
// registry the manager serves.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	if err := RegisterFleet(NewFleet(0)); err != nil {
		t.Fatal(err)
	}
	for _, c := range append([]prometheus.Collector{NewFleet(0)}, managerCollectors...) {
		err := crmetrics.Registry.Register(c)
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
	if len(exported) < len(managerCollectors) {
		t.Fatalf("%d metric names for %d collectors: %v", len(exported), len(managerCollectors), exported)
	}
	var exprs []string
	dashboards, err := filepath.Glob("../../../config/grafana/*.json")
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
	data, err := os.ReadFile("../../../config/prometheus/alerts.yaml")
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

// The per-CR series follow what the readiness controller decided and the Helm operations'
// outcomes: a new chart version replaces the chart's series, and a CR that is gone has none.
func TestFleetSeries(t *testing.T) {
	f := NewFleet(0)
	cr := &unstructured.Unstructured{}
	cr.SetNamespace("team-a")
	cr.SetName("web")
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue}
	stalled := metav1.Condition{Type: "Stalled", Status: metav1.ConditionFalse}
	expect := func(step, want string) {
		t.Helper()
		names := []string{"warpdrive_cr_ready", "warpdrive_cr_stalled", "warpdrive_cr_chart_behind",
			"warpdrive_release_revision", "warpdrive_release_chart_info",
			"warpdrive_helm_last_operation_duration_seconds", "warpdrive_helm_last_operation_success"}
		if err := testutil.CollectAndCompare(f, strings.NewReader(want), names...); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	help := func(name, text string) string { return "# HELP " + name + " " + text + "\n# TYPE " + name + " gauge\n" }

	// Before its chart is known, a CR has its conditions' series only.
	f.Observe("AppService", cr, []metav1.Condition{ready, stalled}, nil)
	expect("conditions only", help("warpdrive_cr_ready", "1 while the CR's Ready condition is True at its generation, else 0.")+
		`warpdrive_cr_ready{kind="AppService",name="web",namespace="team-a"} 1
`+help("warpdrive_cr_stalled", "1 while the CR's Stalled condition is True, else 0.")+
		`warpdrive_cr_stalled{kind="AppService",name="web",namespace="team-a"} 0
`)

	chart := func(version string, revision int64, behind bool) map[string]any {
		return map[string]any{statuscontract.FieldChartVersion: version, statuscontract.FieldChartRevision: revision, statuscontract.FieldChartBehind: behind}
	}
	f.Observe("AppService", cr, []metav1.Condition{stalled}, chart("1.0.0", 3, true))
	f.Observe("AppService", cr, []metav1.Condition{ready}, chart("1.1.0", 4, false))
	f.HelmOperation("AppService", "team-a", "web", 1500*time.Millisecond, errors.New("timed out"))
	expect("after an upgrade to 1.1.0 and a failed operation",
		help("warpdrive_cr_ready", "1 while the CR's Ready condition is True at its generation, else 0.")+
			`warpdrive_cr_ready{kind="AppService",name="web",namespace="team-a"} 1
`+help("warpdrive_cr_stalled", "1 while the CR's Stalled condition is True, else 0.")+
			`warpdrive_cr_stalled{kind="AppService",name="web",namespace="team-a"} 0
`+help("warpdrive_cr_chart_behind", "1 while the CR's release is on another chart than the one the operator carries, else 0.")+
			`warpdrive_cr_chart_behind{kind="AppService",name="web",namespace="team-a"} 0
`+help("warpdrive_release_revision", "Revision of the CR's Helm release, as last deployed.")+
			`warpdrive_release_revision{kind="AppService",name="web",namespace="team-a"} 4
`+help("warpdrive_release_chart_info", "1, labelled with the version of the chart of the CR's release (one series per CR).")+
			`warpdrive_release_chart_info{kind="AppService",name="web",namespace="team-a",version="1.1.0"} 1
`+help("warpdrive_helm_last_operation_duration_seconds", "How long the last install or upgrade of the CR's release took.")+
			`warpdrive_helm_last_operation_duration_seconds{kind="AppService",name="web",namespace="team-a"} 1.5
`+help("warpdrive_helm_last_operation_success", "1 if the last install or upgrade of the CR's release succeeded, 0 if it failed.")+
			`warpdrive_helm_last_operation_success{kind="AppService",name="web",namespace="team-a"} 0
`)

	// Another kind's CR of the same name is another set of series; forgetting one CR leaves it.
	f.HelmOperation("Guestbook", "team-a", "web", time.Second, nil)
	f.Forget("AppService", types.NamespacedName{Namespace: "team-a", Name: "web"})
	expect("after the AppService is gone",
		help("warpdrive_helm_last_operation_duration_seconds", "How long the last install or upgrade of the CR's release took.")+
			`warpdrive_helm_last_operation_duration_seconds{kind="Guestbook",name="web",namespace="team-a"} 1
`+help("warpdrive_helm_last_operation_success", "1 if the last install or upgrade of the CR's release succeeded, 0 if it failed.")+
			`warpdrive_helm_last_operation_success{kind="Guestbook",name="web",namespace="team-a"} 1
`)
}

// Past the cap, a scrape exports the series of the unhealthy CRs first, then of the
// namespaces in turn, and counts the CRs left out.
func TestFleetSeriesCapped(t *testing.T) {
	f := NewFleet(4)
	observe := func(ns, name string, ready bool) {
		cr := &unstructured.Unstructured{}
		cr.SetNamespace(ns)
		cr.SetName(name)
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		f.Observe("AppService", cr, []metav1.Condition{{Type: "Ready", Status: status}}, nil)
	}
	for i := range 100 {
		observe("noisy", fmt.Sprintf("n%03d", i), true)
	}
	observe("quiet", "q1", true)
	observe("quiet", "q2", true)
	observe("broken", "b1", false)
	want := `# HELP warpdrive_cr_ready 1 while the CR's Ready condition is True at its generation, else 0.
# TYPE warpdrive_cr_ready gauge
warpdrive_cr_ready{kind="AppService",name="b1",namespace="broken"} 0
warpdrive_cr_ready{kind="AppService",name="n000",namespace="noisy"} 1
warpdrive_cr_ready{kind="AppService",name="n001",namespace="noisy"} 1
warpdrive_cr_ready{kind="AppService",name="q1",namespace="quiet"} 1
# HELP warpdrive_crs_without_series CRs the operator holds whose per-CR series are not exported, over --max-cr-metrics.
# TYPE warpdrive_crs_without_series gauge
warpdrive_crs_without_series 99
`
	if err := testutil.CollectAndCompare(f, strings.NewReader(want), "warpdrive_cr_ready", "warpdrive_crs_without_series"); err != nil {
		t.Error(err)
	}
}
