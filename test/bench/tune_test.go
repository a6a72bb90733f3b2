package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestTunePeriod measures the candidates for the manager's --reconcile-period in
// config/manager/manager.yaml (make bench-tune): its idle CPU at each size of WARPDRIVE_TUNE_N
// (default "100,1000") under each period of WARPDRIVE_TUNE_PERIODS (default "1m,10h"), over
// the idle window (WARPDRIVE_BENCH_IDLE, default 2m). Every other flag is the pod's. The
// figures go to tune-period.md in WARPDRIVE_BENCH_OUT.
func TestTunePeriod(t *testing.T) {
	s := loadSettings(t)
	sizes := intList(t, "WARPDRIVE_TUNE_N", "100,1000")
	var periods []string
	for _, p := range strings.Split(envOr("WARPDRIVE_TUNE_PERIODS", "1m,10h"), ",") {
		if _, err := time.ParseDuration(p); err != nil {
			t.Fatalf("WARPDRIVE_TUNE_PERIODS: %v", err)
		}
		periods = append(periods, p)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "# Tuning the manager's --reconcile-period\n\nMeasured by `make bench-tune` on %s, one run per cell; "+
		"AppService CRs of 1 replica. Every other flag is the pod's (config/default).\n\n", time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "## Idle CPU of the manager (idle window %s, after the start-up pass)\n\n| CRs |", s.idle)
	for _, p := range periods {
		fmt.Fprintf(&b, " --reconcile-period=%s |", p)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(periods)) + "\n")
	for _, n := range sizes {
		fmt.Fprintf(&b, "| %d |", n)
		ns, tr := populate(t, fmt.Sprintf("tune-idle-%d", n), n, 1)
		for _, p := range periods {
			m := startTuned(t, "--reconcile-period="+p)
			m.waitStartPass(t, n)
			mustWait(t, tr, "install", n, tr.available(1)) // no more Deployment events
			time.Sleep(settle)
			cpu0, t0 := m.cpu(), time.Now()
			time.Sleep(s.idle)
			milli := (m.cpu() - cpu0) / time.Since(t0).Seconds() * 1000
			t.Logf("N=%d period=%s: idle %.2f millicores", n, p, milli)
			fmt.Fprintf(&b, " %.3g millicores |", milli)
			m.stop()
		}
		b.WriteString("\n")
		tr.stop()
		deleteNamespace(t, ns)
	}
	writeTune(t, s, "tune-period.md", b.String())
}

// TestTuneWorkers measures the candidates for the manager's --max-concurrent-reconciles in
// config/manager/manager.yaml (make bench-tune): for each count of WARPDRIVE_TUNE_WORKERS
// (default "2,4,8,16"), a manager with that count installs WARPDRIVE_TUNE_WAVE CRs (default
// 300) of a fresh namespace, then a wave of edits (replicas 1 -> 2 on every CR) runs to all
// available, then every CR is deleted, to all CRs and Deployments gone. An edit is CPU-bound
// (a render and an upgrade), a deletion mostly waits on the API server (a dozen calls in a
// row): the count is a trade between the two, and the peak RSS it costs.
//
// GOMAXPROCS is left as Go sets it in the pod: under the pod's CPU limit of one core Go
// (since 1.25) uses max(2, the limit rounded up), capped by the node's CPUs, so 2 on any node
// of 2 or more CPUs, which is this machine's default too.
//
// Every other flag is the pod's. The figures go to tune-workers.md in WARPDRIVE_BENCH_OUT.
func TestTuneWorkers(t *testing.T) {
	s := loadSettings(t)
	workers := intList(t, "WARPDRIVE_TUNE_WORKERS", "2,4,8,16")
	wave := intList(t, "WARPDRIVE_TUNE_WAVE", "300")[0]

	var b strings.Builder
	fmt.Fprintf(&b, "# Tuning the manager's --max-concurrent-reconciles\n\nMeasured by `make bench-tune` on %s, one run per row; "+
		"%d AppService CRs of 1 replica installed by each manager, then edited (replicas 1 -> 2), then deleted. "+
		"Every other flag is the pod's (config/default).\n\n", time.Now().UTC().Format("2006-01-02"), wave)
	b.WriteString("| --max-concurrent-reconciles | edit wave -> all available | manager CPU | reconcile p50 | reconcile p99 " +
		"| delete all -> all gone | manager CPU | manager peak RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, w := range workers {
		ns, tr := populate(t, fmt.Sprintf("tune-workers-%d", w), wave, 1)
		m := startTuned(t, "--max-concurrent-reconciles="+strconv.Itoa(w))
		m.waitStartPass(t, wave)
		mustWait(t, tr, "install", wave, tr.available(1))
		time.Sleep(settle)

		hist0 := m.reconcileHistogram(t)
		cpu0, t0 := m.cpu(), time.Now()
		parallel(wave, func(i int) error {
			return env.Client.Patch(context.Background(), appService(ns, i, -1),
				client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":2}}`)))
		})
		edited := mustWait(t, tr, "edit", wave, tr.available(2)).Sub(t0).Seconds()
		time.Sleep(settle)
		editCPU := m.cpu() - cpu0
		p50, p99 := m.reconcileHistogram(t).sub(hist0).quantiles()

		cpu0, t0 = m.cpu(), time.Now()
		parallel(wave, func(i int) error {
			return client.IgnoreNotFound(env.Client.Delete(context.Background(), appService(ns, i, -1)))
		})
		deleted := mustWait(t, tr, "delete", wave, tr.gone(wave)).Sub(t0).Seconds()
		deleteCPU := m.cpu() - cpu0
		_, peak := processes{m.p.Pid()}.rss()

		t.Logf("workers=%d: edit %.1f s, %.1f CPU-s, reconcile p50 %.2f s p99 %.2f s; delete %.1f s, %.1f CPU-s; peak RSS %.0f MiB",
			w, edited, editCPU, p50, p99, deleted, deleteCPU, peak)
		fmt.Fprintf(&b, "| %d | %.3g s | %.3g CPU-s | ≤ %.3g s | ≤ %.3g s | %.3g s | %.3g CPU-s | %.0f MiB |\n",
			w, edited, editCPU, p50, p99, deleted, deleteCPU, peak)
		m.stop()
		tr.stop()
		deleteNamespace(t, ns)
	}
	b.WriteString("\nCPU is the manager's, read from /proc; the machine's other work (the control plane, kwok) shares its 2 cores, " +
		"so the figures are noisy. Reconcile durations are the upper bounds of controller-runtime's histogram buckets.\n")
	writeTune(t, s, "tune-workers.md", b.String())
}

func writeTune(t *testing.T, s settings, file, text string) {
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.out, file), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("figures in %s", filepath.Join(s.out, file))
}

// section is a "## " section of a report: its heading, and its text from the heading to the
// next one's, ending in one newline.
type section struct{ heading, text string }

// readSections reads the sections of the report file in s.out, in order; none if the file is
// not there yet. A test that writes some sections of a report keeps the others with them.
func readSections(t *testing.T, s settings, file string) []section {
	old, err := os.ReadFile(filepath.Join(s.out, file))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []section
	for _, part := range strings.Split(string(old), "\n## ")[1:] {
		heading, _, _ := strings.Cut(part, "\n")
		out = append(out, section{heading: heading, text: "## " + strings.TrimRight(part, "\n") + "\n"})
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func intList(t *testing.T, key, def string) []int {
	var out []int
	for _, f := range strings.Split(envOr(key, def), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("%s: want positive numbers, comma-separated", key)
		}
		out = append(out, n)
	}
	return out
}

// populate creates namespace ns with n AppServices of replicas each, releases not yet
// installed (the next manager started installs them), and a tracker of them.
func populate(t *testing.T, ns string, n, replicas int) (string, *tracker) {
	ctx := context.Background()
	deleteNamespace(t, ns)
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	tr, err := newTracker(env.Config, ns, env.GVR(kind))
	if err != nil {
		t.Fatal(err)
	}
	parallel(n, func(i int) error { return env.Client.Create(ctx, appService(ns, i, replicas)) })
	return ns, tr
}

// tuned is a manager started with one flag changed.
type tuned struct {
	p    *framework.Process
	addr string
}

func startTuned(t *testing.T, flag string) *tuned {
	addr := freeAddr(t)
	p, err := env.StartManager(framework.ProcessOptions{Name: "bench-tune", MetricsAddr: addr, Flags: []string{flag}})
	if err != nil {
		t.Fatal(err)
	}
	return &tuned{p: p, addr: addr}
}

func (m *tuned) cpu() float64 { return processes{m.p.Pid()}.cpu() }
func (m *tuned) stop()        { m.p.Stop() }

// waitStartPass waits until the manager has reconciled each of the n CRs once (a new
// manager does so on start) and its queue is empty, then lets it settle.
func (m *tuned) waitStartPass(t *testing.T, n int) {
	err := framework.Poll(context.Background(), wait, func(context.Context) error {
		done, err := framework.Metric(m.addr, "controller_runtime_reconcile_total", `controller="appservice-controller"`)
		if err != nil {
			return err
		}
		depth, err := framework.Metric(m.addr, "workqueue_depth", `name="appservice-controller"`)
		if err != nil {
			return err
		}
		if done < float64(n) || depth > 0 {
			return fmt.Errorf("%.0f of %d reconciled, %.0f queued", done, n, depth)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
}

// histogram is the cumulative count of reconciles by upper bound of duration, in seconds.
type histogram map[float64]float64

func (m *tuned) reconcileHistogram(t *testing.T) histogram {
	h := histogram{}
	for _, le := range []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.15", "0.2", "0.25", "0.3", "0.35", "0.4", "0.45", "0.5", "0.6", "0.7", "0.8", "0.9", "1", "1.25", "1.5", "1.75", "2", "2.5", "3", "3.5", "4", "4.5", "5", "6", "7", "8", "9", "10", "15", "20", "25", "30", "40", "50", "60", "+Inf"} {
		v, err := framework.Metric(m.addr, "controller_runtime_reconcile_time_seconds_bucket", `controller="appservice-controller"`, `le="`+le+`"`)
		if err != nil {
			t.Fatal(err)
		}
		bound, err := strconv.ParseFloat(strings.TrimPrefix(le, "+"), 64)
		if err != nil {
			t.Fatal(err)
		}
		h[bound] = v
	}
	return h
}

func (h histogram) sub(o histogram) histogram {
	d := histogram{}
	for k, v := range h {
		d[k] = v - o[k]
	}
	return d
}

// quantiles are the upper bounds of the buckets that hold the median and the 99th percentile.
func (h histogram) quantiles() (p50, p99 float64) {
	bounds := make([]float64, 0, len(h))
	for k := range h {
		bounds = append(bounds, k)
	}
	slices.Sort(bounds)
	total := h[bounds[len(bounds)-1]]
	q := func(f float64) float64 {
		for _, b := range bounds {
			if h[b] >= f*total {
				return b
			}
		}
		return bounds[len(bounds)-1]
	}
	return q(0.5), q(0.99)
}

// A test that writes its sections of a report keeps the others: exhaustion.md's two tests
// each rewrite their own, and history.md keeps any section it does not generate.
func TestReportSectionsKeepTheOthers(t *testing.T) {
	s := settings{out: t.TempDir()}
	writeSection(t, s, exhaustionFile, plantedTitle, "planted 1\n")
	writeSection(t, s, exhaustionFile, unownedTitle, "unowned 1\n")
	writeSection(t, s, exhaustionFile, plantedTitle, "planted 2\n")
	got, err := os.ReadFile(filepath.Join(s.out, exhaustionFile))
	if err != nil {
		t.Fatal(err)
	}
	want := exhaustionHead + "\n## " + unownedTitle + "\n\nunowned 1\n" + "\n## " + plantedTitle + "\n\nplanted 2\n"
	if string(got) != want {
		t.Errorf("exhaustion.md:\n%s\nwant:\n%s", got, want)
	}

	reading := "## Reading the figures\n\nkept as written.\n"
	rep := historyReport{settings: historySettings{crs: 1}}
	if err := os.WriteFile(filepath.Join(s.out, historyFile), []byte(rep.String()+"\n"+reading), 0o644); err != nil {
		t.Fatal(err)
	}
	rep.measured = "later"
	writeHistory(t, s, rep)
	got, err = os.ReadFile(filepath.Join(s.out, historyFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := rep.String() + "\n" + reading; string(got) != want {
		t.Errorf("history.md:\n%s\nwant:\n%s", got, want)
	}
}
