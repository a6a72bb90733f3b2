package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
// the two-object chart of the stock operator's measurements.
const kind = "AppService"

// settings of one run, from the environment so that make bench and make bench-quick share
// the code.
type settings struct {
	sizes []int         // numbers of CRs (WARPDRIVE_BENCH_N, default "100,1000")
	idle  time.Duration // idle window (WARPDRIVE_BENCH_IDLE, default 2m)
	drift int           // hand edits repaired per run
	out   string        // where the report goes (WARPDRIVE_BENCH_OUT, default docs/bench)
}

func loadSettings(t *testing.T) settings {
	s := settings{sizes: []int{100, 1000}, idle: 2 * time.Minute, drift: 10, out: filepath.Join(framework.RepoRoot(), "docs", "bench")}
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
	if v := os.Getenv("WARPDRIVE_BENCH_OUT"); v != "" {
		s.out = v
	}
	return s
}

// result is what one variant measured at one size. Zero means not measured.
type result struct {
	variant string
	n       int

	createS, createCPU float64 // CRs created -> all Deployments available; operator CPU-seconds
	editS, editCPU     float64 // replicas 2 -> 3 on every CR -> all available
	reconcilesPerEdit  float64 // helm reconciles per CR edit (all triggers, status writes included)
	idleMilli          float64 // operator CPU while nothing changes, millicores
	sidecarIdleMilli   float64
	rssMiB, peakRSSMiB float64 // operator RSS at the end of the idle window, and its peak
	sidecarRSSMiB      float64
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
	for _, n := range s.sizes {
		for _, v := range variants {
			t.Logf("N=%d: %s", n, v.name)
			r := run(t, s, v, n)
			t.Logf("%+v", r)
			results = append(results, r)
		}
	}
	if err := writeReport(s.out, s, results); err != nil {
		t.Fatal(err)
	}
	t.Logf("report in %s", s.out)
}

// variant is one way of running the workload.
type variant struct {
	name string
	// start runs the operator's processes; nil for plain kubectl apply.
	start func(t *testing.T) (procs processes, sidecar processes, metricsAddr string, stop func())
}

var variants = []variant{
	{name: "kubectl apply"},
	{name: "stock helm-operator", start: func(t *testing.T) (processes, processes, string, func()) {
		addr := freeAddr(t)
		p, err := env.StartManager(framework.ProcessOptions{Name: "bench-stock", Stock: true, MetricsAddr: addr})
		if err != nil {
			t.Fatal(err)
		}
		return processes{p.Pid()}, nil, addr, p.Stop
	}},
	{name: "warpdrive-operator", start: func(t *testing.T) (processes, processes, string, func()) {
		addr := freeAddr(t)
		op, err := env.StartOperator(framework.ProcessOptions{Name: "bench-manager", MetricsAddr: addr},
			framework.ProcessOptions{Name: "bench-sidecar"})
		if err != nil {
			t.Fatal(err)
		}
		return processes{op.Manager.Pid(), op.Sidecar.Pid()}, processes{op.Sidecar.Pid()}, addr, op.Stop
	}},
}

var env *framework.Env

func TestMain(m *testing.M) {
	if os.Getenv("WARPDRIVE_BENCH") != "1" {
		fmt.Println("benchmarks run with make bench (WARPDRIVE_BENCH=1); skipping")
		os.Exit(0)
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

const (
	wait   = 45 * time.Minute // bounds a phase of a broken run
	settle = 10 * time.Second // lets trailing reconciles finish inside a measured phase
)

func run(t *testing.T, s settings, v variant, n int) result {
	ctx := context.Background()
	r := result{variant: v.name, n: n}
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
		return runKubectl(t, tr, ns, n, r)
	}
	procs, sidecar, metricsAddr, stop := v.start(t)
	defer stop()
	time.Sleep(3 * time.Second) // caches synced before the clock starts

	// Create.
	cpu0, t0 := procs.cpu(), time.Now()
	parallel(n, func(i int) error { return env.Client.Create(ctx, appService(ns, i, 2)) })
	done := mustWait(t, tr, "create", tr.allAvailable(n, 2))
	r.createS = done.Sub(t0).Seconds()
	time.Sleep(settle)
	r.createCPU = procs.cpu() - cpu0

	// Edit every CR: replicas 2 -> 3, a Helm upgrade each.
	rec0, _ := framework.Metric(metricsAddr, "controller_runtime_reconcile_total", `controller="appservice-controller"`)
	cpu0, t0 = procs.cpu(), time.Now()
	parallel(n, func(i int) error {
		return env.Client.Patch(ctx, appService(ns, i, 0), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)))
	})
	done = mustWait(t, tr, "edit", tr.allAvailable(n, 3))
	r.editS = done.Sub(t0).Seconds()
	time.Sleep(settle)
	r.editCPU = procs.cpu() - cpu0
	rec1, _ := framework.Metric(metricsAddr, "controller_runtime_reconcile_total", `controller="appservice-controller"`)
	r.reconcilesPerEdit = (rec1 - rec0) / float64(n)
	if len(sidecar) > 0 {
		lat := tr.statusLatencies(3)
		r.statusP50, r.statusP99 = framework.Percentile(lat, 50), framework.Percentile(lat, 99)
	}

	// Idle.
	cpu0, sc0, t0 := procs.cpu(), sidecar.cpu(), time.Now()
	time.Sleep(s.idle)
	elapsed := time.Since(t0).Seconds()
	r.idleMilli = (procs.cpu() - cpu0) / elapsed * 1000
	r.sidecarIdleMilli = (sidecar.cpu() - sc0) / elapsed * 1000
	r.rssMiB, r.peakRSSMiB = procs.rss()
	r.sidecarRSSMiB, _ = sidecar.rss()

	// Drift: Deployments scaled by hand, all at once; each repaired when back at 3.
	r.driftP50, r.driftMax = drift(t, ns, min(s.drift, n))

	// Delete.
	t0 = time.Now()
	parallel(n, func(i int) error { return client.IgnoreNotFound(env.Client.Delete(ctx, appService(ns, i, 0))) })
	done = mustWait(t, tr, "delete", func() bool { return len(tr.crs) == 0 && len(tr.deployments) == 0 })
	r.deleteS = done.Sub(t0).Seconds()
	return r
}

// runKubectl is the floor: the same Deployments and Services, rendered from the same chart,
// applied with plain kubectl.
func runKubectl(t *testing.T, tr *tracker, ns string, n int, r result) result {
	dir := t.TempDir()
	manifests := func(replicas int) string {
		path := filepath.Join(dir, fmt.Sprintf("replicas-%d.yaml", replicas))
		if err := os.WriteFile(path, []byte(render(t, ns, n, replicas)), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, step := range []struct {
		replicas int32
		out      *float64
	}{{2, &r.createS}, {3, &r.editS}} {
		path := manifests(int(step.replicas))
		t0 := time.Now()
		if _, err := env.Kubectl("apply", "-n", ns, "-f", path); err != nil {
			t.Fatal(err)
		}
		*step.out = mustWait(t, tr, "apply", tr.allAvailable(n, step.replicas)).Sub(t0).Seconds()
	}
	t0 := time.Now()
	if _, err := env.Kubectl("delete", "-n", ns, "--wait=false", "-f", manifests(3)); err != nil {
		t.Fatal(err)
	}
	r.deleteS = mustWait(t, tr, "delete", func() bool { return len(tr.deployments) == 0 }).Sub(t0).Seconds()
	return r
}

// render is the AppService chart's manifest for n CRs, as Helm renders it.
func render(t *testing.T, ns string, n, replicas int) string {
	chrt, err := loader.Load(filepath.Join(env.Root, "helm-charts", "appservice"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		install := action.NewInstall(&action.Configuration{})
		install.DryRun, install.ClientOnly, install.Replace = true, true, true
		install.ReleaseName, install.Namespace = name(i), ns
		rel, err := install.Run(chrt, map[string]any{"deploymentName": name(i), "replicas": replicas})
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(rel.Manifest)
		b.WriteString("\n---\n")
	}
	return b.String()
}

func name(i int) string { return fmt.Sprintf("app-%04d", i) }

// appService is CR i; replicas 0 leaves spec empty (for patches and deletes).
func appService(ns string, i, replicas int) *unstructured.Unstructured {
	gvr := env.GVR(kind)
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(gvr.Group + "/" + gvr.Version)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name(i))
	if replicas > 0 {
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

func mustWait(t *testing.T, tr *tracker, phase string, cond func() bool) time.Time {
	at, ok := tr.waitFor(wait, cond)
	if !ok {
		t.Fatalf("%s: not done after %s", phase, wait)
	}
	return at
}

// drift scales k Deployments to 5 by hand and times how long each takes to be back at 3.
func drift(t *testing.T, ns string, k int) (p50, max float64) {
	ctx := context.Background()
	t0 := time.Now()
	for i := 0; i < k; i++ {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)}}
		if err := env.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":5}}`))); err != nil {
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
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name(i)}, d); err == nil && *d.Spec.Replicas == 3 {
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
	_ = framework.Poll(ctx, 10*time.Minute, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if err == nil {
			return fmt.Errorf("namespace %s still terminating", ns)
		}
		return client.IgnoreNotFound(err)
	})
}
