package bench

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The workload of the comparison: AppServices, each a Deployment of 2 replicas and a Service,
// the two-object chart of the stock operator's measurements; fewer replicas where the
// cluster cannot hold them (replicasFor).
const kind = "AppService"

// The chart's pod requests (helm-charts/appservice/values.yaml), which bound how many pods
// the cluster's nodes admit.
const (
	podCPUMilli = 50
	podMemMiB   = 64
)

// settings of one run, from the environment so that make bench and make bench-quick share
// the code.
type settings struct {
	sizes []int         // numbers of CRs (WARPDRIVE_BENCH_N, default "100,1000,10000")
	idle  time.Duration // idle window (WARPDRIVE_BENCH_IDLE, default 2m)
	drift int           // hand edits repaired per run
	out   string        // where the report goes (WARPDRIVE_BENCH_OUT, from the repository's root; default docs/bench)
	// variants to run, in this order (WARPDRIVE_BENCH_VARIANTS: the start of their names,
	// comma-separated, default "kubectl,stock,warpdrive"): at 10,000 CRs one variant takes
	// about an hour, so a run can measure them one at a time, the slowest last.
	variants []variant
}

func loadSettings(t *testing.T) settings {
	needCluster(t)
	s := settings{sizes: []int{100, 1000, 10000}, idle: 2 * time.Minute, drift: 10, out: filepath.Join(framework.RepoRoot(), "docs", "bench"), variants: variants}
	if v := os.Getenv("WARPDRIVE_BENCH_N"); v != "" {
		s.sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("WARPDRIVE_BENCH_N=%q: want numbers of CRs, comma-separated", v)
			}
			s.sizes = append(s.sizes, n)
		}
	}
	if v := os.Getenv("WARPDRIVE_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WARPDRIVE_BENCH_IDLE=%q: %v", v, err)
		}
		s.idle = d
	}
	if v := os.Getenv("WARPDRIVE_BENCH_PHASE_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("WARPDRIVE_BENCH_PHASE_TIMEOUT=%q: want a duration", v)
		}
		phaseCap = d
	}
	if v := os.Getenv("WARPDRIVE_BENCH_OUT"); v != "" {
		// Relative to the repository's root, where make and the docs' commands run, not to
		// this package's directory, where go test runs the benchmark.
		if !filepath.IsAbs(v) {
			v = filepath.Join(framework.RepoRoot(), v)
		}
		s.out = v
	}
	if v := os.Getenv("WARPDRIVE_BENCH_VARIANTS"); v != "" {
		var err error
		if s.variants, err = pickVariants(v); err != nil {
			t.Fatalf("WARPDRIVE_BENCH_VARIANTS=%q: %v", v, err)
		}
	}
	return s
}

// pickVariants returns the variants named in list (the start of each name, comma-separated),
// in list's order.
func pickVariants(list string) ([]variant, error) {
	var picked []variant
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		i := slices.IndexFunc(variants, func(v variant) bool { return f != "" && strings.HasPrefix(v.name, f) })
		if i < 0 {
			return nil, fmt.Errorf("no variant %q: want kubectl, stock or warpdrive", f)
		}
		picked = append(picked, variants[i])
	}
	return picked, nil
}

// result is what one variant measured at one size. Zero means not measured.
type result struct {
	variant  string
	n        int
	replicas int    // per CR, before the edit (replicasFor)
	measured string // the date and the commit (measuredNow)

	// timedOut names the phase that did not converge within phaseTimeout; the phases after it
	// were not measured.
	timedOut string
	// unfinished names the phase under way when the figures were saved: a run stopped in it
	// leaves the figures of the phases before it, and this name, in results.json.
	unfinished string
	// queueAtTimeout is the operator's workqueue depth when the phase timed out, and
	// doneAtTimeout how many CRs had reached the phase's goal by then; createQueuePeak and
	// editQueuePeak the deepest the queue was in those phases.
	queueAtTimeout, doneAtTimeout, createQueuePeak, editQueuePeak float64
	// cpuAtTimeout is the operator's CPU in the phase that timed out, and pssAtTimeoutMiB
	// its memory then: what an operator that cannot keep up costs while it tries.
	cpuAtTimeout, pssAtTimeoutMiB float64
	// timeoutS is the bound, in seconds, that the phase named by timedOut was cut off at: the
	// run's (phaseTimeout), kept with the result so that a later report does not print its own.
	timeoutS float64

	createRequests, editRequests float64 // apiserver requests (every client's) per CR created, edited
	etcdStartMiB                 float64 // etcd's database in use before the create
	etcdCreateMiB, etcdEditMiB   float64 // and after the create, after the edit wave

	createS, createCPU float64 // CRs created -> all Deployments available; operator CPU-seconds
	editS, editCPU     float64 // replicas 2 -> 3 on every CR -> all available
	reconcilesPerEdit  float64 // helm reconciles per CR edit (all triggers, status writes included)
	idleMilli          float64 // operator CPU while nothing changes, millicores
	sidecarIdleMilli   float64
	rssMiB, peakRSSMiB float64 // operator RSS at the end of the idle window, and its peak
	sidecarRSSMiB      float64
	pssMiB             float64 // operator PSS at the end of the idle window (pssMiB)
	sidecarPSSMiB      float64
	driftP50, driftMax float64 // a Deployment scaled by hand -> scaled back, seconds
	deleteS            float64 // CRs deleted -> all Deployments gone
	statusP50          float64 // a Deployment's available count changed -> the CR's status shows it
	statusP99          float64
}

// TestCompare runs the same workload under plain kubectl apply, the stock helm-operator and
// this operator, one after the other on the same cluster, and writes the report.
func TestCompare(t *testing.T) {
	s := loadSettings(t)
	var results []result
	// The commit of the binaries the run measures: the tree as the run begins. Read again at
	// each variant, it named what was committed during an hour-long run instead.
	measured := measuredNow()
	for _, n := range s.sizes {
		for _, v := range s.variants {
			t.Logf("N=%d: %s", n, v.name)
			// The report is written as each phase begins, so that a run stopped in its
			// last hours keeps the figures of the phases it finished.
			save := func(r result) {
				r.measured = measured
				if err := writeReport(s.out, s, append(slices.Clone(results), r)); err != nil {
					t.Errorf("report: %v", err)
				}
			}
			r := run(t, s, v, n, save)
			r.measured = measured
			t.Logf("%+v", r)
			save(r)
			results = append(results, r)
		}
	}
	t.Logf("report in %s", s.out)
}

// variant is one way of running the workload.
type variant struct {
	name string
	// start runs the operator's processes, each serving its probes at the address of
	// probeAddrs in turn (the manager, then the sidecar; none past the end); nil for plain
	// kubectl apply.
	start func(t *testing.T, probeAddrs []string) (procs processes, sidecar processes, metricsAddr string, stop func())
}

var variants = []variant{
	{name: "kubectl apply"},
	{name: "stock helm-operator", start: func(t *testing.T, probeAddrs []string) (processes, processes, string, func()) {
		addr := freeAddr(t)
		p, err := env.StartManager(framework.ProcessOptions{Name: "bench-stock", Stock: true, MetricsAddr: addr, ProbeAddr: nth(probeAddrs, 0)})
		if err != nil {
			t.Fatal(err)
		}
		return processes{p.Pid()}, nil, addr, p.Stop
	}},
	{name: "warpdrive-operator", start: func(t *testing.T, probeAddrs []string) (processes, processes, string, func()) {
		addr := freeAddr(t)
		op, err := env.StartOperator(framework.ProcessOptions{Name: "bench-manager", MetricsAddr: addr, ProbeAddr: nth(probeAddrs, 0)},
			framework.ProcessOptions{Name: "bench-sidecar", ProbeAddr: nth(probeAddrs, 1)})
		if err != nil {
			t.Fatal(err)
		}
		return processes{op.Manager.Pid(), op.Sidecar.Pid()}, processes{op.Sidecar.Pid()}, addr, op.Stop
	}},
}

// nth is s[i], or "" past its end.
func nth(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}

// env is the local cluster, nil unless WARPDRIVE_BENCH=1: without it only the tests of the
// report run.
var env *framework.Env

// needCluster skips a benchmark unless make bench runs it.
func needCluster(t *testing.T) {
	if env == nil {
		t.Skip("benchmarks run with make bench (WARPDRIVE_BENCH=1)")
	}
}

func TestMain(m *testing.M) {
	if os.Getenv("WARPDRIVE_BENCH") != "1" {
		os.Exit(m.Run())
	}
	var err error
	if env, err = framework.New(); err == nil {
		err = env.InstallCRDs(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func freeAddr(t *testing.T) string {
	addr, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

const settle = 10 * time.Second // lets trailing reconciles finish inside a measured phase

// wait bounds a phase of a broken run at the smaller sizes; phaseTimeout is the bound at n CRs,
// generous enough that a slow operator's time to converge is measured rather than cut off.
const wait = 45 * time.Minute

func phaseTimeout(n int) time.Duration {
	if phaseCap > 0 {
		return phaseCap
	}
	return max(wait, time.Duration(n)*500*time.Millisecond)
}

// phaseCap, from WARPDRIVE_BENCH_PHASE_TIMEOUT, replaces phaseTimeout's bound: a run at 10,000
// CRs can then record where an operator that cannot keep up stands after that long (its queue,
// the phase it did not finish) instead of waiting 83 minutes per phase.
var phaseCap time.Duration

// run measures variant v at n CRs. It calls save with the figures so far as each phase
// begins (result.unfinished names it).
func run(t *testing.T, s settings, v variant, n int, save func(result)) result {
	ctx := context.Background()
	r := result{variant: v.name, n: n, replicas: replicasFor(t, n)}
	ed := editFor(r.replicas)
	ns := fmt.Sprintf("bench-%d-%s", n, strings.Fields(v.name)[0])
	deleteNamespace(t, ns) // left over by an interrupted run
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	defer deleteNamespace(t, ns)
	tr, err := newTracker(env.Config, ns, env.GVR(kind))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.stop()

	if v.start == nil {
		return runKubectl(t, tr, ns, n, r, ed, save)
	}
	procs, sidecar, metricsAddr, stop := v.start(t, nil)
	defer stop()
	time.Sleep(3 * time.Second) // caches synced before the clock starts
	// phase runs one phase: change, then wait until done, recording the operator's queue; false
	// when it timed out (r says where, how far it got and how deep the queue was).
	phase := func(name string, change func(), done count) (seconds, cpu, requests float64, queuePeak float64, ok bool) {
		r.unfinished = name
		save(r)
		q := sampleQueue(metricsAddr)
		req0, cpu0, t0 := apiserverRequests(t), procs.cpu(), time.Now()
		change()
		at, reached, ok := tr.waitFor(phaseTimeout(n), n, done)
		queuePeak = q.stop()
		if !ok {
			r.timedOut, r.unfinished, r.doneAtTimeout = name, "", float64(reached)
			r.timeoutS = phaseTimeout(n).Seconds()
			r.queueAtTimeout, _ = framework.Metric(metricsAddr, "workqueue_depth", `name="appservice-controller"`)
			r.cpuAtTimeout, r.pssAtTimeoutMiB = procs.cpu()-cpu0, procs.pss()
			_, r.peakRSSMiB = procs.rss()
			t.Logf("%s: %s not done after %s; %d of %d CRs done, %.0f queued", v.name, name, phaseTimeout(n), reached, n, r.queueAtTimeout)
			return 0, 0, 0, queuePeak, false
		}
		time.Sleep(settle)
		return at.Sub(t0).Seconds(), procs.cpu() - cpu0, (apiserverRequests(t) - req0) / float64(n), queuePeak, true
	}

	// Create.
	r.etcdStartMiB = etcdMiB(t)
	var ok bool
	r.createS, r.createCPU, r.createRequests, r.createQueuePeak, ok = phase("create", func() {
		parallel(n, func(i int) error { return env.Client.Create(ctx, appService(ns, i, r.replicas)) })
	}, tr.available(int32(r.replicas)))
	if !ok {
		return r
	}
	r.etcdCreateMiB = etcdMiB(t)

	// Edit every CR: a Helm upgrade each.
	rec0, _ := framework.Metric(metricsAddr, "controller_runtime_reconcile_total", `controller="appservice-controller"`)
	r.editS, r.editCPU, r.editRequests, r.editQueuePeak, ok = phase("edit", func() {
		parallel(n, func(i int) error {
			return env.Client.Patch(ctx, appService(ns, i, -1), client.RawPatch(types.MergePatchType, []byte(ed.patch)))
		})
	}, ed.done(tr))
	if !ok {
		return r
	}
	r.etcdEditMiB = etcdMiB(t)
	rec1, _ := framework.Metric(metricsAddr, "controller_runtime_reconcile_total", `controller="appservice-controller"`)
	r.reconcilesPerEdit = (rec1 - rec0) / float64(n)
	if len(sidecar) > 0 && ed.replicas > 0 {
		lat := tr.statusLatencies(int32(ed.replicas))
		r.statusP50, r.statusP99 = framework.Percentile(lat, 50), framework.Percentile(lat, 99)
	}

	// Idle, from when the operator's work queues are empty: at 10,000 CRs the last
	// Deployments roll out while the manager still works through the wave's tail, which
	// the idle window would otherwise count.
	r.unfinished = "idle"
	save(r)
	if waited, ok := waitQueuesEmpty(metricsAddr, quietWait); ok {
		t.Logf("%s: work queues empty %.0f s after the edit wave", v.name, waited.Seconds())
	} else {
		t.Logf("%s: work queues still not empty %s after the edit wave; idle measured anyway", v.name, quietWait)
	}
	cpu0, sc0, t0 := procs.cpu(), sidecar.cpu(), time.Now()
	time.Sleep(s.idle)
	elapsed := time.Since(t0).Seconds()
	r.idleMilli = (procs.cpu() - cpu0) / elapsed * 1000
	r.sidecarIdleMilli = (sidecar.cpu() - sc0) / elapsed * 1000
	r.rssMiB, r.peakRSSMiB = procs.rss()
	r.sidecarRSSMiB, _ = sidecar.rss()
	r.pssMiB, r.sidecarPSSMiB = procs.pss(), sidecar.pss()

	// Drift: Deployments scaled by hand, all at once; each repaired when back to the spec.
	r.unfinished = "drift"
	save(r)
	r.driftP50, r.driftMax = drift(t, ns, min(s.drift, n), ed.replicas)

	// Delete.
	r.unfinished = "delete"
	save(r)
	cpu0, t0 = procs.cpu(), time.Now()
	parallel(n, func(i int) error { return client.IgnoreNotFound(env.Client.Delete(ctx, appService(ns, i, -1))) })
	done, reached, ok := tr.waitFor(phaseTimeout(n), n, tr.gone(n))
	r.unfinished = ""
	if !ok {
		r.timedOut, r.doneAtTimeout = "delete", float64(reached)
		r.timeoutS = phaseTimeout(n).Seconds()
		r.queueAtTimeout, _ = framework.Metric(metricsAddr, "workqueue_depth", `name="appservice-controller"`)
		r.cpuAtTimeout, r.pssAtTimeoutMiB = procs.cpu()-cpu0, procs.pss()
		return r
	}
	r.deleteS = done.Sub(t0).Seconds()
	return r
}

// replicasFor is the replicas per CR at n CRs: 2, as in the stock operator's measurements,
// when the nodes admit the 3 per CR the edit wave asks for; else 0, with an edit that needs no
// pod (editFor).
func replicasFor(t *testing.T, n int) int {
	if 3*n <= podCapacity(t) {
		return 2
	}
	return 0
}

// podCapacity is how many of the chart's pods the cluster's nodes admit, by their allocatable
// pods, CPU and memory.
func podCapacity(t *testing.T) int {
	nodes := &corev1.NodeList{}
	if err := env.Client.List(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, node := range nodes.Items {
		a := node.Status.Allocatable
		total += int(min(a.Pods().Value(), a.Cpu().MilliValue()/podCPUMilli, a.Memory().Value()/(podMemMiB<<20)))
	}
	return total
}

// edit is the change made to every CR in the edit phase: replicas R -> R+1, or, with no
// replicas, the pods' CPU request 50m -> 60m (a Helm upgrade all the same).
type edit struct {
	replicas int                     // after the edit
	patch    string                  // merge patch of the CR
	values   map[string]any          // the chart's values after it, for kubectl apply
	done     func(tr *tracker) count // the Deployments that show it
}

func editFor(replicas int) edit {
	if replicas > 0 {
		return edit{
			replicas: replicas + 1,
			patch:    fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas+1),
			values:   map[string]any{"replicas": replicas + 1},
			done:     func(tr *tracker) count { return tr.available(int32(replicas + 1)) },
		}
	}
	return edit{
		patch:  `{"spec":{"resources":{"requests":{"cpu":"60m"}}}}`,
		values: map[string]any{"replicas": 0, "resources": map[string]any{"requests": map[string]any{"cpu": "60m", "memory": "64Mi"}}},
		done:   func(tr *tracker) count { return tr.withCPU("60m") },
	}
}

// apiserverRequests is the apiserver's count of requests served so far, from every client.
func apiserverRequests(t *testing.T) float64 {
	body, err := env.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("apiserver metrics: %v", err)
	}
	n, err := framework.SumMetric(bytes.NewReader(body), "apiserver_request_total")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// etcdAddr is the local cluster's etcd (hack/cluster-up.sh: ETCD_PORT), which serves its
// metrics on its client port.
var etcdAddr = envOr("WARPDRIVE_BENCH_ETCD", "127.0.0.1:23790")

// etcdMiB is the size of etcd's database in use (the file itself only grows until it is
// defragmented, so it would carry the earlier runs).
func etcdMiB(t *testing.T) float64 {
	b, err := framework.Metric(etcdAddr, "etcd_mvcc_db_total_size_in_use_in_bytes")
	if err != nil {
		t.Logf("etcd metrics at %s: %v", etcdAddr, err)
		return 0
	}
	return b / (1 << 20)
}

// queueSampler records the deepest the operator's work queue gets while it runs.
type queueSampler struct {
	done chan struct{}
	peak chan float64
}

// quietWait bounds the wait for empty work queues before the idle window: an operator that
// never catches up (the stock one requeues every CR each minute) is measured as it is.
const quietWait = 5 * time.Minute

// waitQueuesEmpty waits until the operator's work queues, all its controllers summed, are
// empty at three samples in a row, two seconds apart, or until limit. It returns how long
// it waited and whether they emptied.
func waitQueuesEmpty(metricsAddr string, limit time.Duration) (time.Duration, bool) {
	t0, quiet := time.Now(), 0
	for time.Since(t0) < limit {
		if d, err := framework.Metric(metricsAddr, "workqueue_depth"); err == nil && d == 0 {
			if quiet++; quiet == 3 {
				return time.Since(t0), true
			}
		} else {
			quiet = 0
		}
		time.Sleep(2 * time.Second)
	}
	return time.Since(t0), false
}

func sampleQueue(metricsAddr string) *queueSampler {
	q := &queueSampler{done: make(chan struct{}), peak: make(chan float64)}
	go func() {
		peak := 0.0
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			if d, err := framework.Metric(metricsAddr, "workqueue_depth", `name="appservice-controller"`); err == nil {
				peak = max(peak, d)
			}
			select {
			case <-q.done:
				q.peak <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return q
}

func (q *queueSampler) stop() float64 {
	close(q.done)
	return <-q.peak
}

// runKubectl is the floor: the same Deployments and Services, rendered from the same chart,
// applied with plain kubectl.
func runKubectl(t *testing.T, tr *tracker, ns string, n int, r result, ed edit, save func(result)) result {
	dir := t.TempDir()
	manifests := func(name string, values map[string]any) string {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(render(t, ns, n, values)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	r.etcdStartMiB = etcdMiB(t)
	for _, step := range []struct {
		name, path    string
		done          count
		out, requests *float64
		etcd          *float64
	}{
		{"create", manifests("create", map[string]any{"replicas": r.replicas}), tr.available(int32(r.replicas)), &r.createS, &r.createRequests, &r.etcdCreateMiB},
		{"edit", manifests("edit", ed.values), ed.done(tr), &r.editS, &r.editRequests, &r.etcdEditMiB},
	} {
		r.unfinished = step.name
		save(r)
		req0, t0 := apiserverRequests(t), time.Now()
		if _, err := env.Kubectl("apply", "-n", ns, "-f", step.path); err != nil {
			t.Fatal(err)
		}
		*step.out = mustWait(t, tr, "apply", n, step.done).Sub(t0).Seconds()
		time.Sleep(settle)
		*step.requests = (apiserverRequests(t) - req0) / float64(n)
		*step.etcd = etcdMiB(t)
	}
	r.unfinished = "delete"
	save(r)
	t0 := time.Now()
	if _, err := env.Kubectl("delete", "-n", ns, "--wait=false", "-f", filepath.Join(dir, "edit.yaml")); err != nil {
		t.Fatal(err)
	}
	r.deleteS = mustWait(t, tr, "delete", n, tr.gone(n)).Sub(t0).Seconds()
	r.unfinished = ""
	return r
}

// render is the AppService chart's manifest for n CRs with values, as Helm renders it.
func render(t *testing.T, ns string, n int, values map[string]any) string {
	chrt, err := loader.Load(filepath.Join(env.Root, "helm-charts", "appservice"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		install := action.NewInstall(&action.Configuration{})
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.ReleaseName, install.Namespace = name(i), ns
		vals := maps.Clone(values)
		vals["deploymentName"] = name(i)
		rel, err := install.Run(chrt, vals)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(rel.Manifest)
		b.WriteString("\n---\n")
	}
	return b.String()
}

func name(i int) string { return fmt.Sprintf("app-%04d", i) }

// appService is CR i; replicas below 0 leave spec empty (for patches and deletes).
func appService(ns string, i, replicas int) *unstructured.Unstructured {
	gvr := env.GVR(kind)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.Group + "/" + gvr.Version)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name(i))
	if replicas >= 0 {
		u.Object["spec"] = map[string]any{"deploymentName": name(i), "replicas": int64(replicas)}
	}
	return u
}

// parallel runs f(0..n-1) on 16 workers, as many clients would.
func parallel(n int, f func(i int) error) {
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				for attempt := 0; attempt < 5; attempt++ {
					if err := f(i); err == nil {
						break
					}
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}

func mustWait(t *testing.T, tr *tracker, phase string, n int, c count) time.Time {
	at, reached, ok := tr.waitFor(phaseTimeout(n), n, c)
	if !ok {
		t.Fatalf("%s: not done after %s (%d of %d)", phase, phaseTimeout(n), reached, n)
	}
	return at
}

// drift scales k Deployments to want+3 by hand and times how long each takes to be back at
// want.
func drift(t *testing.T, ns string, k, want int) (p50, max float64) {
	ctx := context.Background()
	t0 := time.Now()
	for i := 0; i < k; i++ {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
		if err := env.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, want+3)))); err != nil {
			t.Fatal(err)
		}
	}
	repaired := make([]time.Duration, k)
	for left := k; left > 0 && time.Since(t0) < 5*time.Minute; time.Sleep(100 * time.Millisecond) {
		for i := 0; i < k; i++ {
			if repaired[i] != 0 {
				continue
			}
			d := &appsv1.Deployment{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, d); err == nil && int(*d.Spec.Replicas) == want {
				repaired[i] = time.Since(t0)
				left--
			}
		}
	}
	for i, d := range repaired {
		if d == 0 {
			t.Errorf("Deployment %s not repaired within 5 minutes", name(i))
			repaired[i] = 5 * time.Minute
		}
	}
	return framework.Percentile(repaired, 50), framework.Percentile(repaired, 100)
}

// deleteNamespace removes a run's namespace and waits, so that the next run starts on a quiet
// cluster. CRs left by a failed run lose their finalizer: their operator is gone.
func deleteNamespace(t *testing.T, ns string) {
	ctx := context.Background()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(env.GVR(kind).GroupVersion().WithKind(kind + "List"))
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
		for i := range list.Items {
			_ = env.Client.Patch(ctx, &list.Items[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
	}
	_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	_ = framework.Poll(ctx, 30*time.Minute, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if err == nil {
			return fmt.Errorf("namespace %s still terminating", ns)
		}
		return client.IgnoreNotFound(err)
	})
}
