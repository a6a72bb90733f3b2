package metrics

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// The manager's own metrics, beside controller-runtime's: one series per CR for the fleet
// (fleet, below), and one per kind for its chart rollout. config/grafana and
// config/prometheus use them; TestDashboardsUseExportedMetrics checks that every name they use
// is here.
var (
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
	// RenderRefusals counts the renders the render bounds refused (internal/renderbound),
	// exported for the operator's Setup, which hands the checker a callback that counts them.
	RenderRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warpdrive_render_refusals_total",
		Help: "Renders refused because they passed a bound of the manager's (--render-*), by bound: memory, output, time, crash.",
	}, []string{"bound"})
	// QuarantinedCRs is how many CRs the render journal holds quarantined (renderjournal.go),
	// exported for the journal, which sets it.
	QuarantinedCRs = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "warpdrive_quarantined_crs",
		Help: "CRs quarantined because the manager died twice in a row while rendering them; each is Stalled (Quarantined) until its spec changes.",
	})
)

// managerCollectors are the metrics above, registered once with controller-runtime's
// registry, which the manager serves. The per-CR series are Setup's (RegisterFleet).
var managerCollectors = []prometheus.Collector{rolloutCRs, rolloutHalted, rolloutWave, rolloutWaves, RenderRefusals, QuarantinedCRs}

func init() {
	crmetrics.Registry.MustRegister(managerCollectors...)
}

// The per-CR series, labelled kind, namespace and name (and version, for the chart's).
var (
	crLabels = []string{"kind", "namespace", "name"}

	crReady = prometheus.NewDesc("warpdrive_cr_ready",
		"1 while the CR's Ready condition is True at its generation, else 0.", crLabels, nil)
	crStalled = prometheus.NewDesc("warpdrive_cr_stalled",
		"1 while the CR's Stalled condition is True, else 0.", crLabels, nil)
	crBehind = prometheus.NewDesc("warpdrive_cr_chart_behind",
		"1 while the CR's release is on another chart than the one the operator carries, else 0.", crLabels, nil)
	releaseRevision = prometheus.NewDesc("warpdrive_release_revision",
		"Revision of the CR's Helm release, as last deployed.", crLabels, nil)
	releaseChartInfo = prometheus.NewDesc("warpdrive_release_chart_info",
		"1, labelled with the version of the chart of the CR's release (one series per CR).",
		[]string{"kind", "namespace", "name", "version"}, nil)
	helmOperationSeconds = prometheus.NewDesc("warpdrive_helm_last_operation_duration_seconds",
		"How long the last install or upgrade of the CR's release took.", crLabels, nil)
	helmOperationSuccess = prometheus.NewDesc("warpdrive_helm_last_operation_success",
		"1 if the last install or upgrade of the CR's release succeeded, 0 if it failed.", crLabels, nil)
	crsOmitted = prometheus.NewDesc("warpdrive_crs_without_series",
		"CRs the operator holds whose per-CR series are not exported, over --max-cr-metrics.", nil, nil)
)

// DefaultMaxCRMetrics is how many CRs have per-CR series by default: seven series each, 70,000
// series at most, which one Prometheus scrape of the manager can carry.
const DefaultMaxCRMetrics = 10000

// NewFleet is an empty collector of the per-CR series of every kind: Setup makes one,
// registers it (RegisterFleet) and hands it to what writes them, the outcomes layer of each
// pipeline and each readiness controller.
func NewFleet(max int) *Fleet { return &Fleet{crs: map[crKey]*crSeries{}, max: max} }

// RegisterFleet registers f with the registry the manager serves, in place of the collector of
// an earlier Setup in this process (the integration test sets up more than one manager).
func RegisterFleet(f *Fleet) error {
	crmetrics.Registry.Unregister(f)
	return crmetrics.Registry.Register(f)
}

// Fleet is the collector of the per-CR metrics. It keeps each CR's values in a small
// struct and builds the series only when scraped: a GaugeVec keeps every series as a metric
// with its label pairs, about 1 KB each, and seven series per CR made these the largest part
// of the manager's heap after its caches (6.1 of 28.8 MiB sampled at 1000 CRs:
// docs/bench/findings.md, "Per-CR metrics as a collector"). A scrape costs the same either
// way: every series is encoded.
//
// The series are capped: tenants create the CRs, and each CR's series cost the scraper as
// they cost the manager. Past max CRs (0: no cap), a scrape exports the series of max of
// them (exported), and warpdrive_crs_without_series counts the others.
type Fleet struct {
	mu  sync.Mutex
	crs map[crKey]*crSeries
	max int
}

type crKey struct{ kind, namespace, name string }

// crSeries is what the series of one CR say; a series is exported once its value is known.
type crSeries struct {
	born           time.Time // when the first series of the CR was made
	decided        bool      // ready and stalled are known (the readiness controller decided)
	ready, stalled bool
	chartKnown     bool // behind and version are known
	behind         bool
	version        string
	revisionKnown  bool
	revision       int64
	opKnown        bool // an install or upgrade ended
	opSeconds      float64
	opSucceeded    bool
}

// series returns the values of key, creating them; f.mu is held.
func (f *Fleet) series(key crKey) *crSeries {
	s := f.crs[key]
	if s == nil {
		s = &crSeries{born: time.Now()}
		f.crs[key] = s
	}
	return s
}

// ForgetGone drops the series of the CRs of kind that live does not hold and that were
// already there at since (goneForgetter).
func (f *Fleet) ForgetGone(kind string, live map[types.NamespacedName]bool, since time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, s := range f.crs {
		if k.kind == kind && !live[types.NamespacedName{Namespace: k.namespace, Name: k.name}] && s.born.Before(since) {
			delete(f.crs, k)
		}
	}
}

// Observe sets cr's series from the status the readiness controller decided. While the
// release's chart is unknown, the chart's series keep their last values.
func (f *Fleet) Observe(kind string, cr *unstructured.Unstructured, conditions []metav1.Condition, chart map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.series(crKey{kind, cr.GetNamespace(), cr.GetName()})
	s.decided, s.ready, s.stalled = true, false, false
	for _, c := range conditions {
		switch {
		case c.Type == statuscontract.Ready && c.Status == metav1.ConditionTrue:
			s.ready = true
		case c.Type == statuscontract.Stalled && c.Status == metav1.ConditionTrue:
			s.stalled = true
		}
	}
	if chart == nil {
		return
	}
	s.chartKnown = true
	s.behind, _ = chart[statuscontract.FieldChartBehind].(bool)
	s.version, _ = chart[statuscontract.FieldChartVersion].(string)
	if rev, ok := chart[statuscontract.FieldChartRevision].(int64); ok {
		s.revisionKnown, s.revision = true, rev
	}
}

// Forget deletes the series of a CR that is gone.
func (f *Fleet) Forget(kind string, key types.NamespacedName) {
	f.mu.Lock()
	delete(f.crs, crKey{kind, key.Namespace, key.Name})
	f.mu.Unlock()
}

// HelmOperation records how an install or upgrade (not a dry run) of a CR's release went.
func (f *Fleet) HelmOperation(kind, namespace, name string, took time.Duration, err error) {
	f.mu.Lock()
	s := f.series(crKey{kind, namespace, name})
	s.opKnown, s.opSeconds, s.opSucceeded = true, took.Seconds(), err == nil
	f.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (f *Fleet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{crReady, crStalled, crBehind, releaseRevision, releaseChartInfo,
		helmOperationSeconds, helmOperationSuccess} {
		ch <- d
	}
	ch <- crsOmitted
}

// Collect implements prometheus.Collector: the series of every CR, built now. It copies the
// values under the lock and builds the series after, so that a scrape of a large fleet does
// not hold up the reconcilers that record into it.
func (f *Fleet) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	f.mu.Lock()
	entries := make([]seriesEntry, 0, len(f.crs))
	for k, s := range f.crs {
		entries = append(entries, seriesEntry{k, *s})
	}
	f.mu.Unlock()
	entries, omitted := exported(entries, f.max)
	gauge(crsOmitted, float64(omitted))
	for _, e := range entries {
		k, s := e.k, e.s
		if s.decided {
			gauge(crReady, one(s.ready), k.kind, k.namespace, k.name)
			gauge(crStalled, one(s.stalled), k.kind, k.namespace, k.name)
		}
		if s.chartKnown {
			gauge(crBehind, one(s.behind), k.kind, k.namespace, k.name)
			gauge(releaseChartInfo, 1, k.kind, k.namespace, k.name, s.version)
		}
		if s.revisionKnown {
			gauge(releaseRevision, float64(s.revision), k.kind, k.namespace, k.name)
		}
		if s.opKnown {
			gauge(helmOperationSeconds, s.opSeconds, k.kind, k.namespace, k.name)
			gauge(helmOperationSuccess, one(s.opSucceeded), k.kind, k.namespace, k.name)
		}
	}
}

// seriesEntry is a CR's series, copied for a scrape.
type seriesEntry struct {
	k crKey
	s crSeries
}

// unhealthy reports whether the CR's series say something is wrong: what alerts read.
func (e seriesEntry) unhealthy() bool {
	return (e.s.decided && (!e.s.ready || e.s.stalled)) || (e.s.opKnown && !e.s.opSucceeded)
}

// exported picks the CRs whose series a scrape exports when there are more than max (0: no
// cap), and says how many are left out. The unhealthy go first, so that alerts keep firing;
// then, in each group, the namespaces take turns, one CR each in name order, so that one
// tenant's thousands of CRs cannot push another tenant's series out.
func exported(entries []seriesEntry, max int) ([]seriesEntry, int) {
	if max <= 0 || len(entries) <= max {
		return entries, 0
	}
	slices.SortFunc(entries, func(a, b seriesEntry) int {
		return cmp.Or(cmp.Compare(a.k.namespace, b.k.namespace), cmp.Compare(a.k.kind, b.k.kind), cmp.Compare(a.k.name, b.k.name))
	})
	kept := make([]seriesEntry, 0, max)
	for _, group := range [][]seriesEntry{
		slices.DeleteFunc(slices.Clone(entries), func(e seriesEntry) bool { return !e.unhealthy() }),
		slices.DeleteFunc(slices.Clone(entries), seriesEntry.unhealthy),
	} {
		kept = append(kept, inTurns(group, max-len(kept))...)
	}
	return kept, len(entries) - len(kept)
}

// inTurns takes up to n of entries (sorted by namespace), the namespaces taking turns.
func inTurns(entries []seriesEntry, n int) []seriesEntry {
	var lines [][]seriesEntry
	for i := 0; i < len(entries); {
		j := i + 1
		for j < len(entries) && entries[j].k.namespace == entries[i].k.namespace {
			j++
		}
		lines = append(lines, entries[i:j])
		i = j
	}
	var out []seriesEntry
	for round := 0; len(out) < n; round++ {
		took := false
		for _, line := range lines {
			if round < len(line) && len(out) < n {
				out, took = append(out, line[round]), true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// one is 1 for true, 0 for false.
func one(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// RolloutProgress sets a kind's rollout series from its plan.
func RolloutProgress(kind string, p rollout.Plan) {
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
