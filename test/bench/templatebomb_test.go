package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestTemplateBombs is the security suite's TestTemplateBombsRefused against this operator's
// manager and the stock helm-operator side by side (make bench-exhaustion; alone with -run
// TestTemplateBombs). A tenant's values are code once a chart runs tpl over them: each bomb
// is a greeting that the test chart renders through tpl, written into one tenant's CR; the
// CR of another tenant, of the same kind, is edited right after. Each bomb has an operator
// process of its own, started fresh (a stock operator stuck in the CPU bomb is stopped, not
// waited for), and CRs of its own.
//
// It records the manager's peak RSS rise (VmHWM, reset with clear_refs 5) over the bomb,
// whether the manager exited (and whether its peak passed the pod's limit, podLimitMiB: the
// OOM kill it would have had), when the other tenant's edit was served (at most bombBound),
// when the bombed CR's outcome showed (refused, failed or applied), the reconciles of the
// kind still running at the end, and the bombed CR's conditions. This operator runs with its
// default render bounds (--render-max-memory=160Mi, --render-timeout=30s,
// --render-max-output=16Mi, --render-workers=2).
//
// The figures go to exhaustion.md in WARPDRIVE_BENCH_OUT, section "Template bombs"; they are
// the report's, never a failure.
func TestTemplateBombs(t *testing.T) {
	needCluster(t)
	env.InstallChartKind(t, bombKind)
	exhaustionTest(t, bombsTitle, bombOperator, bombsReport)
}

// bombKind binds a kind of the bench's own to test/e2e's passwordchart, the security suite's
// lookup chart (Bitnami's shape: its greeting is rendered through tpl). Not the security
// suite's group: the suites may run at once on one cluster.
var bombKind = framework.ChartKind{
	GVK:   schema.GroupVersionKind{Group: "bench.warpdrive.transwarp.io", Version: "v1", Kind: "PasswordHolder"},
	Chart: filepath.Join(framework.RepoRoot(), "test", "e2e", "testdata", "passwordchart"),
}

// bombController is the kind's controller in the managers' metrics.
const bombController = `controller="passwordholder-controller"`

// bomb is a value a tenant writes where the chart's tpl evaluates it.
type bomb struct{ name, greeting string }

// bombs are TestTemplateBombsRefused's, the CPU bomb's loops built with until, as any Helm's
// template engine runs them.
var bombs = []bomb{
	{"memory", `{{ len (repeat 300000000 "x") }}`},                                // 300 MB allocated, 9 bytes rendered
	{"CPU", `{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}`}, // 10^10 turns of an empty loop
	{"output", `{{ repeat 20000000 "x" }}`},                                       // 20 MB rendered
}

const (
	// bombBound bounds each wait for the other tenant's edit and for the bombed CR's
	// outcome: far past this operator's 30 s render deadline.
	bombBound = 3 * time.Minute
	// bombTimeout is the CPU bomb's deadline here: the default of config/default.
	bombTimeout = 30 * time.Second
)

const bombsTitle = "Template bombs"

// bombsRun is what the bombs did to one operator.
type bombsRun struct {
	operator string
	bombs    []bombRun
}

// bombRun is what one bomb did to one operator's manager. Memory in MiB.
type bombRun struct {
	bomb       string
	base       float64 // VmHWM over the quiet window before the bomb
	peak       float64 // VmHWM from the bomb to the end of its window; 0: the manager is gone
	cpu        float64 // the manager's CPU seconds over the window
	servedS    float64 // the other tenant's edit to its ConfigMap; 0: not within bombBound
	outcomeS   float64 // the bomb to its CR's outcome; 0: none within bombBound
	running    float64 // reconciles of the kind running at the window's end (controller_runtime_active_workers)
	exited     string  // how the manager ended within the window; "": it stayed up
	conditions string  // the bombed CR's conditions True at the end, with their reasons
	greeting   string  // what the bombed CR's ConfigMap greets with at the end
	load       string
}

// bombOperator sets off every bomb against operator v: two tenants' namespaces, a fresh
// operator process per bomb.
func bombOperator(t *testing.T, v variant) bombsRun {
	run := bombsRun{operator: v.name}
	ns := "bombs-" + strings.Fields(v.name)[0]
	neighbour := ns + "-neighbour"
	for _, n := range []string{ns, neighbour} {
		deleteNamespace(t, n) // left over by an interrupted run
		createNamespace(t, n)
		defer deleteNamespace(t, n)
	}
	watches := bombKind.WatchesFile(t)
	for _, b := range bombs {
		run.bombs = append(run.bombs, setOff(t, v, b, watches, ns, neighbour))
	}
	return run
}

// setOff starts operator v on the bomb kind alone, installs a CR in ns and one in neighbour,
// writes bomb b into the first and edits the second right after, and records what followed.
func setOff(t *testing.T, v variant, b bomb, watches, ns, neighbour string) bombRun {
	run := bombRun{bomb: b.name}
	stock := strings.HasPrefix(v.name, "stock")
	op := strings.Fields(v.name)[0]
	id := "bench-bombs-" + op + "-" + strings.ToLower(b.name)
	addr := freeAddr(t)
	// A Lease of each process's own: a stock operator killed in the CPU bomb keeps its Lease
	// until it expires, which the next process would wait for.
	p, err := env.StartManager(framework.ProcessOptions{Name: id, Stock: stock, MetricsAddr: addr, WatchesFile: watches,
		Flags: []string{"--leader-election-id=" + id}})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.Pid()
	cr := bombHolder(ns, "x-"+strings.ToLower(b.name))
	theirs := bombHolder(neighbour, "y-"+strings.ToLower(b.name))
	// The operator stops first (cleanups run last first), so that it does not hold the CRs'
	// finalizers; the CRs go without their uninstall, the namespaces take the rest.
	defer dropBombHolders(t, cr, theirs)
	defer p.Stop()

	time.Sleep(3 * time.Second) // the caches synced before any CR comes, as startOperator
	hello := func(u *unstructured.Unstructured) string { return "hello from " + u.GetName() }
	for _, u := range []*unstructured.Unstructured{cr, theirs} {
		env.Create(t, u.DeepCopy())
	}
	for _, u := range []*unstructured.Unstructured{cr, theirs} {
		if _, ok := waitGreeting(u, hello(u), unownedInstall, pid); !ok {
			t.Fatalf("%s: %s/%s not installed within %s", v.name, u.GetNamespace(), u.GetName(), unownedInstall)
		}
	}
	waitQuiet(t, addr)

	resetPeak(t, pid)
	time.Sleep(plantedQuiet)
	_, run.base = mustRSS(t, pid)
	resetPeak(t, pid)
	cpu0, _ := cpuSeconds(pid)
	t0 := time.Now()
	patchGreeting(t, cr, b.greeting)
	edited := fmt.Sprintf("edited beside the %s bomb", b.name)
	patchGreeting(t, theirs, edited)
	run.servedS, _ = waitGreeting(theirs, edited, bombBound, pid)
	t.Logf("%s, %s bomb: the other tenant's edit served in %.1f s (0: not within %s)", v.name, b.name, run.servedS, bombBound)

	for time.Since(t0) < bombBound && running(pid) {
		if bombOutcome(cr, hello(cr)) {
			run.outcomeS = time.Since(t0).Seconds()
			break
		}
		time.Sleep(time.Second)
	}
	time.Sleep(settle)
	if running(pid) {
		_, run.peak = mustRSS(t, pid)
		cpu1, _ := cpuSeconds(pid)
		run.cpu = cpu1 - cpu0
		run.running, _ = framework.Metric(addr, "controller_runtime_active_workers", bombController)
	} else {
		// Its exit is read once Stop has nothing to signal: the process ended of itself.
		time.Sleep(time.Second)
		run.exited = "exited"
		if p.Exited() {
			run.exited = fmt.Sprintf("exited (status %d)", p.ExitCode())
		}
	}
	run.conditions = trueConditions(cr)
	run.greeting = greetingNow(cr, hello(cr))
	run.load = loadAverage()
	t.Logf("%s, %s bomb: manager peak RSS %.0f MiB (%.0f before), CPU %.1f s, outcome in %.1f s (0: none within the bound), %.0f reconciles running; "+
		"exited %q; conditions %s; greeting %s; load %s",
		v.name, b.name, run.peak, run.base, run.cpu, run.outcomeS, run.running, run.exited, run.conditions, run.greeting, run.load)
	return run
}

// bombHolder is a CR of the bomb kind whose spec leaves the chart's defaults.
func bombHolder(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetGroupVersionKind(bombKind.GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// patchGreeting writes greeting into cr's spec, as its tenant would.
func patchGreeting(t *testing.T, cr *unstructured.Unstructured, greeting string) {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"greeting": greeting}})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(context.Background(), cr.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// greetingNow is what the ConfigMap of cr's release greets with: the chart renders the
// greeting there. A long one is given by its size.
func greetingNow(cr *unstructured.Unstructured, original string) string {
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: cr.GetNamespace(), Name: cr.GetName() + "-settings"}, cm); err != nil {
		return err.Error()
	}
	switch g := cm.Data["greeting"]; {
	case g == original:
		return "unchanged"
	case len(g) > 40:
		return fmt.Sprintf("%d bytes", len(g))
	default:
		return fmt.Sprintf("%q", g)
	}
}

// waitGreeting waits until cr's ConfigMap greets with want, at most bound and while process pid
// runs, and returns how long that took.
func waitGreeting(cr *unstructured.Unstructured, want string, bound time.Duration, pid int) (float64, bool) {
	t0 := time.Now()
	key := client.ObjectKey{Namespace: cr.GetNamespace(), Name: cr.GetName() + "-settings"}
	for time.Since(t0) < bound && running(pid) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), key, cm); err == nil && cm.Data["greeting"] == want {
			return time.Since(t0).Seconds(), true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, false
}

// bombOutcome reports whether the bomb in cr has had an outcome: this operator's Stalled,
// the stock operator's ReleaseFailed or Irreconcilable (helm-operator-plugins' condition
// types), or a ConfigMap that no longer greets with original (the bomb's render applied).
func bombOutcome(cr *unstructured.Unstructured, original string) bool {
	got := cr.DeepCopy()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cr), got); err != nil {
		return false
	}
	for _, c := range []string{statuscontract.Stalled, "ReleaseFailed", "Irreconcilable"} {
		if status, _, _ := framework.Condition(got, c); status == "True" {
			return true
		}
	}
	return greetingNow(cr, original) != "unchanged"
}

// trueConditions are the conditions of cr that are True, with the reason of each that has one.
func trueConditions(cr *unstructured.Unstructured) string {
	got := cr.DeepCopy()
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cr), got); err != nil {
		return err.Error()
	}
	list, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	var out []string
	for _, c := range list {
		m, _ := c.(map[string]any)
		switch {
		case m["status"] != "True":
		case m["reason"] == nil:
			out = append(out, fmt.Sprint(m["type"]))
		default:
			out = append(out, fmt.Sprintf("%v (%v)", m["type"], m["reason"]))
		}
	}
	return strings.Join(out, ", ")
}

// dropBombHolders deletes crs without their operator: their finalizers go first.
func dropBombHolders(t *testing.T, crs ...*unstructured.Unstructured) {
	ctx := context.Background()
	for _, cr := range crs {
		u := cr.DeepCopy()
		_ = env.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		if err := client.IgnoreNotFound(env.Client.Delete(ctx, u)); err != nil {
			t.Logf("deleting %s/%s: %v", cr.GetNamespace(), cr.GetName(), err)
		}
	}
}

// bombsReport is the section of TestTemplateBombs.
func bombsReport(measured string, runs []bombsRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by %s, %s, on this machine's %d cores.\n\n", benchCommand(), cmp.Or(measured, "(date not recorded)"), runtime.NumCPU())
	b.WriteString("A tenant's values are code once a chart runs `tpl` over them, as Bitnami's charts do. The test chart " +
		"(test/e2e/testdata/passwordchart, the security suite's lookup chart) renders `spec.greeting` through `tpl` into a " +
		"ConfigMap; its kind is served by the manager alone, started on a watches file of that kind. For each bomb a fresh " +
		"operator process installs two CRs, one in each of two tenants' namespaces; then the first tenant writes the bomb " +
		"as their greeting, and the second edits their own greeting right after. The bombs are the security suite's " +
		"(TestTemplateBombsRefused):\n\n")
	for _, bm := range bombs {
		fmt.Fprintf(&b, "- %s: `%s`\n", bm.name, bm.greeting)
	}
	fmt.Fprintf(&b, "\nThe other tenant's edit is waited for until their ConfigMap greets with it, the bombed CR's outcome until "+
		"it shows (this operator's `Stalled`, the stock operator's `ReleaseFailed` or `Irreconcilable`, or a ConfigMap "+
		"rendered from the bomb), each at most %.0f minutes; the window ends %.0f s after the outcome or the bound. This "+
		"operator runs with its default render bounds: `--render-max-memory=160Mi`, `--render-timeout=%s`, "+
		"`--render-max-output=16Mi`, `--render-workers=2`.\n\n", bombBound.Minutes(), settle.Seconds(), bombTimeout)
	b.WriteString("| operator | bomb | peak RSS before | peak through the bomb | rise of the peak | over the pod's 512 MiB? | " +
		"stays up | manager CPU in the window | the other tenant's edit served in | the bomb's outcome in | " +
		"reconciles of the kind running at the end | the bombed CR's conditions True after | its ConfigMap's greeting after | " +
		"load average at the end (1, 5, 15 min) |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	seconds := func(s float64) string {
		if s == 0 {
			return fmt.Sprintf("**not within %.0f min**", bombBound.Minutes())
		}
		return figure(s) + " s"
	}
	for _, r := range runs {
		for _, bm := range r.bombs {
			peak, rise, over, up, cpu, busy := "gone", "-", "no", "yes", "-", "-"
			if bm.exited != "" {
				up = "**no**: " + bm.exited
			} else {
				peak, rise = fmt.Sprintf("%.0f MiB", bm.peak), fmt.Sprintf("%+.0f MiB", bm.peak-bm.base)
				cpu, busy = figure(bm.cpu)+" s", fmt.Sprintf("%.0f", bm.running)
				if bm.peak > podLimitMiB {
					over = fmt.Sprintf("**yes**: OOM-killed in the pod, at %.0f MiB", bm.peak)
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f MiB | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				r.operator, bm.bomb, bm.base, peak, rise, over, up, cpu, seconds(bm.servedS), seconds(bm.outcomeS), busy,
				cmp.Or(bm.conditions, "none"), bm.greeting, bm.load)
		}
	}
	fmt.Fprintf(&b, "\nPeak RSS is the manager's VmHWM (`/proc/<pid>/status`), reset with `clear_refs` 5: over a quiet window of "+
		"10 s before the bomb (\"before\"), then from the bomb to the window's end. The bench runs processes, not pods: "+
		"nothing kills one over the limit, so the table says which would have been. Reconciles running are the kind's "+
		"`controller_runtime_active_workers` at the window's end; CPU is the manager's user + system time over the window. "+
		"Both are the manager process's alone: this operator's render workers are processes of their own, each bounded "+
		"by `--render-max-memory`, which in the pod count towards its limit beside the manager.\n\n"+
		"This operator renders each release in a worker process (`--render-workers`), under the bounds: a worker that passes "+
		"one is killed, the CR is `Stalled` with the reason naming the bound (`RenderMemoryExceeded`, `RenderTimeExceeded`, "+
		"`RenderOutputExceeded`) and its release left as it was, and the manager's own memory is not where the bomb goes off. "+
		"The other worker renders the other tenant's edit meanwhile.\n\n"+
		"The stock helm-operator renders in its own process, with no bound: the memory bomb's 300 MB string is allocated in "+
		"the manager at every render (the dry run, the upgrade, and again at every reconcile period), and the release takes "+
		"its rendering; the CPU bomb holds one of its reconcile workers (as many as the node's CPUs, %d here) for as long as "+
		"the loop runs, which nothing cancels, and the loop (with the garbage of `until`'s lists) keeps about a core "+
		"busy; the output bomb is rendered whole in the process and then refused by the API server, and retried.\n",
		runtime.NumCPU())
	return b.String()
}
