package bench

import (
	"bytes"
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestUnownedUpdates measures what updates of objects no release owns cost each operator's
// manager (make bench-exhaustion). Each operator gets a namespace of its own with
// unownedPools WarpdrivePools, whose chart renders a ConfigMap (so the manager watches
// ConfigMaps, to repair a hand edit of the pools'), and unownedApps AppServices of 0
// replicas. Once they are installed, unownedConfigMaps ConfigMaps of no chart are created
// beside them and updated unownedRounds times each by unownedWriters writers: 10,000 updates.
//
// Over a window of unownedWindow from the first update (at least unownedSettle after the
// last: the drift check holds an update half a second before it reads,
// internal/operator/drift/drift.go), then over a quiet window as long, it records the manager's GET requests (its client-go's
// rest_client_requests_total{method="GET"}: the LISTs it makes and the watches it re-opens are
// GETs too, which is what the quiet window shows), the API server's GETs of ConfigMaps from
// every client (apiserver_request_total; no other client of the local cluster reads them) and
// the manager's CPU seconds. Then a hand edit of a pool's ConfigMap, timed to its repair,
// shows that the manager did watch ConfigMaps.
//
// The figures go to exhaustion.md in WARPDRIVE_BENCH_OUT, section "Updates of ConfigMaps no
// chart owns"; they are the report's, never a failure.
func TestUnownedUpdates(t *testing.T) {
	exhaustionTest(t, unownedTitle, unownedUpdates, unownedReport)
}

const (
	unownedPools      = 10
	unownedApps       = 10
	unownedConfigMaps = 100
	unownedRounds     = 100 // updates of each ConfigMap
	unownedWriters    = 4
	unownedSettle     = 10 * time.Second
	// unownedWindow is two of the stock operator's reconcile periods: each window then holds
	// as many of its periodic passes over the CRs, whose GETs are none of the updates'.
	unownedWindow  = 2 * time.Minute
	unownedInstall = 10 * time.Minute // bound of the install, and of the wait for a repair
)

// unownedRun is what one operator's manager did.
type unownedRun struct {
	operator        string
	updates, failed int64   // the updates made, and those the API server refused
	updatesS        float64 // how long the updates took
	busy, quiet     window  // the updates' window, and a quiet one as long after it
	repairS         float64 // a hand edit of a pool's ConfigMap to its repair; 0: not repaired
}

// window is what the manager did in one window.
type window struct {
	seconds      float64
	managerGETs  float64 // the manager's own count of its GET requests
	apiserverGET float64 // the API server's count of GETs of ConfigMaps, every client's
	cpu          float64 // the manager's CPU seconds
	load         string  // the load average (1, 5, 15 minutes) at the window's end
}

func unownedUpdates(t *testing.T, v variant) unownedRun {
	ctx := context.Background()
	run := unownedRun{operator: v.name}
	ns := "unowned-" + strings.Fields(v.name)[0]
	clearNamespace(t, ns) // left over by an interrupted run
	createNamespace(t, ns)
	defer clearNamespace(t, ns)

	procs, addr, stop := startOperator(t, v)
	manager := processes{procs[0]}
	// Deferred after stop, so run first: the CRs are uninstalled while the operator runs,
	// their StorageClasses with them.
	defer stop()
	defer func() {
		if err := env.DeleteCRs(ctx, ns); err != nil {
			t.Logf("%s: uninstalling: %v", v.name, err)
		}
	}()

	var crs []client.Object
	for i := range unownedPools {
		crs = append(crs, pool(ns, fmt.Sprintf("pool-%02d", i)))
	}
	for i := range unownedApps {
		crs = append(crs, appService(ns, i, 0))
	}
	install(t, ns, addr, crs...)

	names := make([]string, unownedConfigMaps)
	for i := range names {
		names[i] = fmt.Sprintf("unowned-%03d", i)
		env.Create(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i]}, Data: map[string]string{"n": "0"}})
	}
	time.Sleep(unownedSettle) // the creates seen and done with before the window opens

	cs := fastClient(t)
	run.busy = measureWindow(t, addr, manager, func() {
		t0 := time.Now()
		var wg sync.WaitGroup
		for w := range unownedWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Each writer has its own share of the ConfigMaps and goes round them, so
				// that every update changes the object it writes.
				for r := 1; r <= unownedRounds; r++ {
					patch := []byte(fmt.Sprintf(`{"data":{"n":"%d"}}`, r))
					for i := w; i < len(names); i += unownedWriters {
						_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, names[i], types.MergePatchType, patch, metav1.PatchOptions{})
						if err != nil {
							atomic.AddInt64(&run.failed, 1)
							continue
						}
						atomic.AddInt64(&run.updates, 1)
					}
				}
			}()
		}
		wg.Wait()
		run.updatesS = time.Since(t0).Seconds()
		time.Sleep(max(unownedSettle, unownedWindow-time.Since(t0)))
	})
	t.Logf("%s: %d updates (%d refused) in %.0f s, window %.0f s: manager GETs %.0f, API server GETs of ConfigMaps %.0f, manager CPU %.2f s; load %s",
		v.name, run.updates, run.failed, run.updatesS, run.busy.seconds, run.busy.managerGETs, run.busy.apiserverGET, run.busy.cpu, run.busy.load)
	run.quiet = measureWindow(t, addr, manager, func() { time.Sleep(time.Duration(run.busy.seconds * float64(time.Second))) })
	t.Logf("%s: quiet %.0f s: manager GETs %.0f, API server GETs of ConfigMaps %.0f, manager CPU %.2f s; load %s",
		v.name, run.quiet.seconds, run.quiet.managerGETs, run.quiet.apiserverGET, run.quiet.cpu, run.quiet.load)

	run.repairS = repairConfigMap(t, ns, "pool-00")
	t.Logf("%s: a hand edit of a pool's ConfigMap repaired in %.2f s (0: not within %s)", v.name, run.repairS, unownedInstall)
	return run
}

// measureWindow runs body and returns what the manager (metrics at addr) did meanwhile.
func measureWindow(t *testing.T, addr string, manager processes, body func()) window {
	gets := func() float64 {
		// A metric the manager does not serve sums to 0: its requests of every method say
		// that it does.
		all, err := framework.Metric(addr, "rest_client_requests_total")
		if err != nil || all == 0 {
			t.Fatalf("the manager's metrics at %s: no rest_client_requests_total (%v)", addr, err)
		}
		n, err := framework.Metric(addr, "rest_client_requests_total", `method="GET"`)
		if err != nil {
			t.Fatalf("the manager's metrics: %v", err)
		}
		return n
	}
	get0, api0, cpu0, t0 := gets(), apiserverMetric(t, "apiserver_request_total", `verb="GET"`, `resource="configmaps"`), manager.cpu(), time.Now()
	body()
	// The manager's GETs are read first: the reads of the API server's and its metrics are
	// the test's own, and come after.
	return window{
		managerGETs:  gets() - get0,
		apiserverGET: apiserverMetric(t, "apiserver_request_total", `verb="GET"`, `resource="configmaps"`) - api0,
		cpu:          manager.cpu() - cpu0,
		seconds:      time.Since(t0).Seconds(),
		load:         loadAverage(),
	}
}

// repairConfigMap edits a pool's ConfigMap by hand and returns how long the operator took to
// set it back; 0 if it did not within unownedInstall.
func repairConfigMap(t *testing.T, ns, name string) float64 {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	want := cm.Data["POOL_OVERCOMMIT_RATIO"]
	t0 := time.Now()
	if err := env.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"POOL_OVERCOMMIT_RATIO":"9"}}`))); err != nil {
		t.Fatal(err)
	}
	err := framework.Poll(ctx, unownedInstall, func(ctx context.Context) error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		if got := cm.Data["POOL_OVERCOMMIT_RATIO"]; got != want {
			return fmt.Errorf("POOL_OVERCOMMIT_RATIO is %q, want %q", got, want)
		}
		return nil
	})
	if err != nil {
		return 0
	}
	return time.Since(t0).Seconds()
}

// pool is a WarpdrivePool of one server.
func pool(ns, name string) *unstructured.Unstructured {
	gvr := env.GVR("WarpdrivePool")
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": "WarpdrivePool",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"capacity": "1Ti", "replicas": int64(1)},
	}}
}

// waitReleases waits until ns holds n Helm release records of status deployed: both operators
// keep Helm's records, so this says that n CRs are installed whichever runs.
func waitReleases(t *testing.T, ns string, n int, bound time.Duration) {
	err := framework.Poll(context.Background(), bound, func(ctx context.Context) error {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "status": "deployed"}); err != nil {
			return err
		}
		if len(list.Items) < n {
			return fmt.Errorf("%d of %d releases deployed in %s", len(list.Items), n, ns)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// clearNamespace removes ns and waits until it is gone. Its CRs lose their finalizers first,
// and the StorageClasses of its pools go: the operator that would uninstall them may be gone.
func clearNamespace(t *testing.T, ns string) {
	ctx := context.Background()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(env.GVR("WarpdrivePool").GroupVersion().WithKind("WarpdrivePoolList"))
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
		for i := range list.Items {
			_ = env.Client.Patch(ctx, &list.Items[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			_ = env.Client.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "." + list.Items[i].GetName()}})
		}
	}
	deleteNamespace(t, ns) // the AppServices' finalizers, then the namespace
}

// fastClient is a client that the client-side rate limit does not slow: the writers are to
// reach the API server as fast as it takes them.
func fastClient(t *testing.T) kubernetes.Interface {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// apiserverMetric sums the API server's samples of metric name with labels.
func apiserverMetric(t *testing.T, name string, labels ...string) float64 {
	body, err := env.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("apiserver metrics: %v", err)
	}
	n, err := framework.SumMetric(bytes.NewReader(body), name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes: the operators share
// the cores with the control plane and whatever else runs.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// exhaustionTest runs measure with this operator, then with the stock helm-operator, and
// after each writes the section titled title of exhaustionFile from report of the runs so
// far, so that a run that fails on the second keeps the first.
func exhaustionTest[R any](t *testing.T, title string, measure func(*testing.T, variant) R, report func(measured string, runs []R) string) {
	s := loadSettings(t)
	ops, err := pickVariants("warpdrive,stock")
	if err != nil {
		t.Fatal(err)
	}
	measured := exhaustionMeasured()
	var runs []R
	for _, v := range ops {
		runs = append(runs, measure(t, v))
		writeSection(t, s, exhaustionFile, title, report(measured, runs))
	}
}

// startOperator starts operator v's processes, the manager first, and returns them with the
// manager's metrics address once their caches have synced, before any CR comes.
func startOperator(t *testing.T, v variant) (procs processes, addr string, stop func()) {
	procs, _, addr, stop = v.start(t, nil)
	time.Sleep(3 * time.Second)
	return procs, addr, stop
}

// install creates crs, and waits until their releases are deployed and the work queues of
// the manager (metrics at addr) are empty.
func install(t *testing.T, ns, addr string, crs ...client.Object) {
	for _, cr := range crs {
		env.Create(t, cr)
	}
	waitReleases(t, ns, len(crs), unownedInstall)
	waitQuiet(t, addr)
}

// exhaustionMeasured is the date and commit of both tests' figures, read once, as the first
// begins: make bench-exhaustion builds the binaries just before, and read again as the second
// begins, it would name what was committed meanwhile.
var exhaustionMeasured = sync.OnceValue(measuredNow)

// exhaustionFile holds the sections of TestUnownedUpdates, TestPlantedRecords and
// TestTemplateBombs; each test rewrites its own, so that any of them can run alone.
const exhaustionFile = "exhaustion.md"

const unownedTitle = "Updates of ConfigMaps no chart owns"

// benchCommand is the command that produced the figures: go test with the -run pattern this
// run was given (make bench-exhaustion's is
// 'TestUnownedUpdates|TestPlantedRecords|TestTemplateBombs').
func benchCommand() string {
	run := ""
	if f := flag.Lookup("test.run"); f != nil {
		run = f.Value.String()
	}
	return fmt.Sprintf("`WARPDRIVE_BENCH=1 go test -run '%s' ./test/bench/`", run)
}

// writeSection replaces the section titled title (from its "## " heading to the next one) of
// file in s.out with body, and keeps the others; the file begins with exhaustionHead, and the
// sections come in the order of exhaustionSections.
func writeSection(t *testing.T, s settings, file, title, body string) {
	sections := map[string]string{}
	for _, sec := range readSections(t, s, file) {
		sections[sec.heading] = sec.text
	}
	sections[title] = "## " + title + "\n\n" + body
	var b strings.Builder
	b.WriteString(exhaustionHead)
	for _, h := range exhaustionSections {
		if sections[h] != "" {
			b.WriteString("\n" + sections[h])
		}
	}
	writeTune(t, s, file, b.String())
}

// exhaustionSections are the titles of exhaustion.md's sections, in order.
var exhaustionSections = []string{unownedTitle, plantedTitle, bombsTitle}

const exhaustionHead = "# Exhaustion: noise, planted records and template bombs against the manager\n\n" +
	"Written by `make bench-exhaustion` (TestUnownedUpdates, TestPlantedRecords and TestTemplateBombs in test/bench, about 25 minutes), " +
	"each operator in namespaces of its own on the local cluster, this operator's manager and sidecar beside the stock " +
	"helm-operator in one run. Each test rewrites its own section, so that any of them can be run again alone " +
	"(`WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=.cluster/kubeconfig go test -count=1 -v -run TestPlantedRecords ./test/bench/`). " +
	"Both operators run as in TestCompare: this operator with the arguments of config/default, the stock " +
	"helm-operator with its scaffold's (a reconcile of every CR every minute). The control plane, kwok and the " +
	"operator share the machine's cores with whatever else runs: each section gives the load average. " +
	"The template bombs run each operator on a kind of their own, the manager alone, against values a tenant writes " +
	"where the chart's tpl evaluates them.\n"

// unownedReport is the section of TestUnownedUpdates.
func unownedReport(measured string, runs []unownedRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by %s, %s, on this machine's %d cores.\n\n", benchCommand(), cmp.Or(measured, "(date not recorded)"), runtime.NumCPU())
	fmt.Fprintf(&b, "Each operator installs %d WarpdrivePools, whose chart renders a ConfigMap (so this operator's manager watches "+
		"ConfigMaps, to repair a hand edit of the pools'), and %d AppServices of 0 replicas. Then %d ConfigMaps that no chart "+
		"renders are created beside them and updated %d times each, a merge patch of their data, by %d writers at once: "+
		"%d updates, as fast as the API server takes them. The window lasts %.0f minutes from the first update (two of the "+
		"stock operator's reconcile periods, so that both windows hold as many of its periodic passes); the quiet window, "+
		"as long, follows it.\n\n",
		unownedPools, unownedApps, unownedConfigMaps, unownedRounds, unownedWriters, unownedConfigMaps*unownedRounds, unownedWindow.Minutes())
	b.WriteString("| operator | updates | updates took | manager GETs in the window | API server GETs of ConfigMaps | manager CPU | " +
		"quiet window: manager GETs | ConfigMap GETs | manager CPU | load average at the windows' ends (1, 5, 15 min) | " +
		"a pool's ConfigMap edited by hand: repaired in |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		updates := fmt.Sprintf("%d", r.updates)
		if r.failed > 0 {
			updates += fmt.Sprintf(" (%d refused)", r.failed)
		}
		repair := "not within " + unownedInstall.String()
		if r.repairS > 0 {
			repair = figure(r.repairS) + " s"
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f s | %.0f | %.0f | %s s | %.0f | %.0f | %s s | %s; %s | %s |\n", r.operator, updates,
			r.updatesS, r.busy.managerGETs, r.busy.apiserverGET, figure(r.busy.cpu),
			r.quiet.managerGETs, r.quiet.apiserverGET, figure(r.quiet.cpu), r.busy.load, r.quiet.load, repair)
	}
	b.WriteString("\nThe manager's GETs are its own count, client-go's `rest_client_requests_total{method=\"GET\"}` from its " +
		"metrics endpoint: every GET the process sent, of any resource, LISTs and the watches it opens again included (they " +
		"are GETs too), hence the quiet window beside. The API server's are `apiserver_request_total{verb=\"GET\",resource=\"configmaps\"}`, " +
		"every client's, but reads of single ConfigMaps only; no other client of the local cluster reads these. CPU is " +
		"the manager's user + system time (`/proc/<pid>/stat`), the sidecar's not included. The hand edit, after the windows, " +
		"timed to the operator setting the ConfigMap back, shows whether the manager watched ConfigMaps.\n\n" +
		"The stock helm-operator (v0.9.1) watches no release objects: its run command passes `watchDependentResources: true`, " +
		"the default, as \"skip\" (docs/architecture.md). The updates do not reach it, so its GETs and CPU in both windows are " +
		"those of its periodic reconcile of every CR, and the hand edit waits for that pass. This operator's manager does " +
		"watch the ConfigMaps, as metadata; it drops an update of one that no CR owns before any read " +
		"(internal/operator/drift/drift.go), and its CPU in the window is what taking 10,000 watch events in costs it.\n")
	return b.String()
}
