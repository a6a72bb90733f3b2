package operator

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"transwarp.io/tos/warpdrive-operator/internal/readiness"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
)

// The manager's own metrics, beside controller-runtime's: one series per CR for the fleet
// (labels kind, namespace and name only, so that a thousand CRs are a thousand series per
// metric), and one per kind for its chart rollout. config/grafana and config/prometheus use
// them; TestDashboardsUseExportedMetrics checks that every name they use is here.
var (
	crLabels = []string{"kind", "namespace", "name"}

	crReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_cr_ready",
		Help: "1 while the CR's Ready condition is True at its generation, else 0.",
	}, crLabels)
	crStalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_cr_stalled",
		Help: "1 while the CR's Stalled condition is True, else 0.",
	}, crLabels)
	crBehind = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_cr_chart_behind",
		Help: "1 while the CR's release is on another chart than the one the operator carries, else 0.",
	}, crLabels)
	releaseRevision = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_release_revision",
		Help: "Revision of the CR's Helm release, as last deployed.",
	}, crLabels)
	releaseChartInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_release_chart_info",
		Help: "1, labelled with the version of the chart of the CR's release (one series per CR).",
	}, append(crLabels, "version"))
	helmOperationSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_helm_last_operation_duration_seconds",
		Help: "How long the last install or upgrade of the CR's release took.",
	}, crLabels)
	helmOperationSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_helm_last_operation_success",
		Help: "1 if the last install or upgrade of the CR's release succeeded, 0 if it failed.",
	}, crLabels)

	rolloutCRs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_rollout_crs",
		Help: "CRs of a kind by where they stand in the rollout of the chart the operator carries: " +
			"behind, in_progress, upgraded, failed.",
	}, []string{"kind", "state"})
	rolloutHalted = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_rollout_halted",
		Help: "1 while the chart rollout of a kind is halted by a failed CR, else 0.",
	}, []string{"kind"})
	rolloutWave = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_rollout_wave",
		Help: "The wave under way (1-based) of the chart rollout of a kind; the number of waves + 1 when done.",
	}, []string{"kind"})
	rolloutWaves = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "warpdrive_rollout_waves",
		Help: "How many waves the chart rollout of a kind has.",
	}, []string{"kind"})
)

// managerCollectors are the metrics above, registered once with controller-runtime's
// registry, which the manager serves.
var managerCollectors = []prometheus.Collector{crReady, crStalled, crBehind, releaseRevision, releaseChartInfo,
	helmOperationSeconds, helmOperationSuccess, rolloutCRs, rolloutHalted, rolloutWave, rolloutWaves}

func init() {
	metrics.Registry.MustRegister(managerCollectors...)
}

// releaseMetrics writes the per-CR series; it remembers each CR's chart version label, so
// that a new version replaces the series rather than adding one.
type releaseMetrics struct {
	mu       sync.Mutex
	versions map[string]string
}

func newReleaseMetrics() *releaseMetrics { return &releaseMetrics{versions: map[string]string{}} }

// observe sets cr's series from the status the readiness controller decided.
func (m *releaseMetrics) observe(kind string, cr *unstructured.Unstructured, f managerFields) {
	l := prometheus.Labels{"kind": kind, "namespace": cr.GetNamespace(), "name": cr.GetName()}
	ready, stalled := 0.0, 0.0
	for _, c := range f.conditions {
		switch {
		case c.Type == readiness.Ready && c.Status == metav1.ConditionTrue:
			ready = 1
		case c.Type == readiness.Stalled && c.Status == metav1.ConditionTrue:
			stalled = 1
		}
	}
	crReady.With(l).Set(ready)
	crStalled.With(l).Set(stalled)
	if f.chart == nil {
		return
	}
	behind := 0.0
	if b, _ := f.chart[chartBehind].(bool); b {
		behind = 1
	}
	crBehind.With(l).Set(behind)
	if rev, ok := f.chart[chartRevision].(int64); ok {
		releaseRevision.With(l).Set(float64(rev))
	}
	version, _ := f.chart[chartVersion].(string)
	key := kind + "/" + cr.GetNamespace() + "/" + cr.GetName()
	m.mu.Lock()
	old, seen := m.versions[key]
	m.versions[key] = version
	m.mu.Unlock()
	if seen && old != version {
		releaseChartInfo.DeletePartialMatch(prometheus.Labels{"kind": kind, "namespace": cr.GetNamespace(), "name": cr.GetName(), "version": old})
	}
	releaseChartInfo.With(prometheus.Labels{"kind": kind, "namespace": cr.GetNamespace(), "name": cr.GetName(), "version": version}).Set(1)
}

// forget deletes the series of a CR that is gone.
func (m *releaseMetrics) forget(kind string, key types.NamespacedName) {
	l := prometheus.Labels{"kind": kind, "namespace": key.Namespace, "name": key.Name}
	for _, v := range []*prometheus.GaugeVec{crReady, crStalled, crBehind, releaseRevision, releaseChartInfo, helmOperationSeconds, helmOperationSuccess} {
		v.DeletePartialMatch(l)
	}
	m.mu.Lock()
	delete(m.versions, kind+"/"+key.Namespace+"/"+key.Name)
	m.mu.Unlock()
}

// helmOperation records how an install or upgrade (not a dry run) of a CR's release went.
func helmOperation(kind, namespace, name string, took time.Duration, err error) {
	l := prometheus.Labels{"kind": kind, "namespace": namespace, "name": name}
	helmOperationSeconds.With(l).Set(took.Seconds())
	ok := 1.0
	if err != nil {
		ok = 0
	}
	helmOperationSuccess.With(l).Set(ok)
}

// rolloutProgress sets a kind's rollout series from its plan.
func rolloutProgress(kind string, p rollout.Plan) {
	for state, n := range map[string]int{"behind": p.Counts.Behind, "in_progress": p.Counts.InProgress,
		"upgraded": p.Counts.Upgraded, "failed": p.Counts.Failed} {
		rolloutCRs.WithLabelValues(kind, state).Set(float64(n))
	}
	halted := 0.0
	if p.Halted {
		halted = 1
	}
	rolloutHalted.WithLabelValues(kind).Set(halted)
	rolloutWave.WithLabelValues(kind).Set(float64(p.Wave + 1))
	rolloutWaves.WithLabelValues(kind).Set(float64(len(p.Waves)))
}
