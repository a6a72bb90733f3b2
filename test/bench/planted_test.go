package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestPlantedRecords is the planted-records attack of the security suite
// (TestPlantedRecordsDoNotExhaustTheManager in test/security) at a larger scale, against this
// operator's manager and then the stock helm-operator (make bench-exhaustion; alone with -run
// TestPlantedRecords). Each operator installs an AppService of 0 replicas in a namespace of
// its own; then a tenant who may write Secrets there plants plantedRecords Secrets of
// plantedKiB each, labelled as records of that CR's Helm release (owner=helm, its name,
// status superseded, versions from 100; type helm.sh/release.v1; a "release" key of base64
// text that decodes to no release), and forces plantedReconciles reconciles of the CR with
// statuscontract.RequestAnnotation (the stock operator reconciles on any update of the CR).
//
// It records the manager's peak RSS (VmHWM, reset with clear_refs 5) over a quiet window
// before, through the planting and through the reconciles; each reconcile's time to done
// (this operator: status.lastHandledReconcileAt echoes the request; the stock one: a
// reconcile of the kind finished after it); whether the processes stayed up; and the CR's
// conditions after. The bench runs processes, not pods: nothing limits their memory, so a
// peak over the pod's limit (podLimitMiB) is reported as the OOM kill it would have been. The
// planted Secrets are deleted at the end.
//
// The figures go to exhaustion.md in WARPDRIVE_BENCH_OUT, section "Planted release records";
// the goal (a rise of at most plantedGoalMiB) is the report's, never a failure.
func TestPlantedRecords(t *testing.T) {
	exhaustionTest(t, plantedTitle, plantRecords, plantedReport)
}

const (
	plantedRecords    = 300
	plantedKiB        = 900 // the "release" key's text; a Secret's data may hold 1 MiB
	plantedReconciles = 3
	plantedWriters    = 8
	plantedQuiet      = 10 * time.Second // the window the peak before is read over
	plantedBound      = 3 * time.Minute  // a forced reconcile not done by then counts as not done
	plantedGoalMiB    = 20
	podLimitMiB       = 512 // config/manager/manager.yaml: the manager container's memory limit
)

const plantedTitle = "Planted release records"

// plantedRun is what the attack did to one operator's manager. Memory in MiB.
type plantedRun struct {
	operator   string
	plantS     float64   // the planting, first create to last
	base, rss  float64   // VmHWM over the quiet window before, and VmRSS at its end
	peakPlant  float64   // VmHWM through the planting and plantedSettle after it
	rssForced  float64   // VmRSS as the forced reconciles begin
	peakForced float64   // VmHWM through the forced reconciles and settle after them
	rssAfter   float64   // VmRSS at the end
	done       []float64 // seconds from each forced reconcile's request to done; 0: not done within plantedBound
	errors     float64   // the kind's reconciles that ended in an error, from the planting to the end
	exited     []string  // the processes that exited, with their exit status
	conditions string    // the CR's status conditions at the end
	load       string    // the load average at the end
}

// plantedSettle lets the manager's informers take the planted Secrets in before the peak is read.
const plantedSettle = 5 * time.Second

func plantRecords(t *testing.T, v variant) plantedRun {
	ctx := context.Background()
	run := plantedRun{operator: v.name}
	stock := strings.HasPrefix(v.name, "stock")
	ns := "planted-" + strings.Fields(v.name)[0]
	deleteNamespace(t, ns) // left over by an interrupted run
	createNamespace(t, ns)
	defer deleteNamespace(t, ns)

	procs, addr, stop := startOperator(t, v)
	pid := procs[0]
	defer stop()
	cr := appService(ns, 0, 0)
	install(t, ns, addr, cr)
	release := cr.GetName()

	resetPeak(t, pid)
	time.Sleep(plantedQuiet)
	run.rss, run.base = mustRSS(t, pid)

	reconciles := func(labels ...string) float64 {
		n, _ := framework.Metric(addr, "controller_runtime_reconcile_total", append(labels, `controller="appservice-controller"`)...)
		return n
	}
	errors0 := reconciles(`result="error"`)
	resetPeak(t, pid)
	t0 := time.Now()
	names := plant(t, ns, release)
	defer deletePlanted(t, ns, names)
	run.plantS = time.Since(t0).Seconds()
	time.Sleep(plantedSettle)
	_, run.peakPlant, _ = rssMiB(pid) // 0 if the manager is gone
	t.Logf("%s: %d records of %d KiB planted in %.0f s; manager peak RSS %.0f MiB before, %.0f MiB through the planting",
		v.name, plantedRecords, plantedKiB, run.plantS, run.base, run.peakPlant)

	resetPeak(t, pid)
	run.rssForced, _, _ = rssMiB(pid)
	for i := range plantedReconciles {
		request := fmt.Sprintf("planted-%d", i)
		r0 := reconciles()
		at := time.Now()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statuscontract.RequestAnnotation, request)
		if err := env.Client.Patch(ctx, appService(ns, 0, -1), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		done := func() bool {
			if stock {
				return reconciles() > r0
			}
			got := appService(ns, 0, -1)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
				return false
			}
			h, _, _ := unstructured.NestedString(got.Object, "status", statuscontract.FieldLastHandledReconcileAt)
			return h == request
		}
		took := 0.0
		for time.Since(at) < plantedBound && running(pid) {
			if done() {
				took = time.Since(at).Seconds()
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		run.done = append(run.done, took)
		t.Logf("%s: forced reconcile %d done in %.1f s (0: not within %s)", v.name, i, took, plantedBound)
	}
	time.Sleep(settle)
	if running(pid) {
		run.rssAfter, run.peakForced = mustRSS(t, pid)
	}
	run.errors = reconciles(`result="error"`) - errors0
	for _, p := range procs {
		if !running(p) {
			run.exited = append(run.exited, fmt.Sprintf("pid %d", p))
		}
	}
	run.conditions = conditions(ns, release)
	run.load = loadAverage()
	t.Logf("%s: manager peak RSS %.0f MiB through the forced reconciles (%.0f before the planting), RSS %.0f MiB after; "+
		"reconcile errors %.0f; exited %v; conditions %s; load %s",
		v.name, run.peakForced, run.base, run.rssAfter, run.errors, run.exited, run.conditions, run.load)
	return run
}

// plant creates the planted records of release in ns, and returns their names.
func plant(t *testing.T, ns, release string) []string {
	raw := make([]byte, plantedKiB<<10*3/4) // base64 makes 4 bytes of every 3
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	blob := []byte(base64.StdEncoding.EncodeToString(raw))
	names := make([]string, plantedRecords)
	for i := range names {
		names[i] = fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, 100+i)
	}
	cs := fastClient(t)
	var wg sync.WaitGroup
	var failed sync.Map
	next := make(chan int)
	for range plantedWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s := &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names[i], Labels: map[string]string{
						"owner": "helm", "name": release, "status": "superseded", "version": strconv.Itoa(100 + i)}},
					Type: "helm.sh/release.v1",
					Data: map[string][]byte{"release": blob},
				}
				var err error
				for range 5 {
					if _, err = cs.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err == nil {
						break
					}
					time.Sleep(time.Second)
				}
				if err != nil {
					failed.Store(i, err)
				}
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Fatalf("planting record %d: %v", k, v)
		return false
	})
	return names
}

// deletePlanted deletes the planted records: 270 MB in etcd, which the rest of a run should
// not carry, and which the release's uninstall would otherwise read.
func deletePlanted(t *testing.T, ns string, names []string) {
	cs := fastClient(t)
	parallel(len(names), func(i int) error {
		err := cs.CoreV1().Secrets(ns).Delete(context.Background(), names[i], metav1.DeleteOptions{})
		return client.IgnoreNotFound(err)
	})
}

// resetPeak resets process pid's peak resident set size, VmHWM, to its RSS now (Linux:
// clear_refs 5). A process that is gone is the report's to tell, not a failure.
func resetPeak(t *testing.T, pid int) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("resetting the peak RSS of pid %d: %v", pid, err)
	}
}

// mustRSS is process pid's VmRSS and VmHWM in MiB.
func mustRSS(t *testing.T, pid int) (now, peak float64) {
	now, peak, err := rssMiB(pid)
	if err != nil {
		t.Fatalf("the RSS of pid %d: %v", pid, err)
	}
	return now, peak
}

// running reports whether process pid is still there and not a zombie.
func running(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

// conditions are the conditions of AppService name in ns that are True (a failure's is), with
// the reason of each.
func conditions(ns, name string) string {
	cr := appService(ns, 0, -1)
	cr.SetName(name)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cr), cr); err != nil {
		return err.Error()
	}
	list, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
	var out []string
	for _, c := range list {
		if m, _ := c.(map[string]any); m["status"] == "True" {
			out = append(out, fmt.Sprintf("%v (%v)", m["type"], m["reason"]))
		}
	}
	return strings.Join(out, ", ")
}

// plantedReport is the section of TestPlantedRecords.
func plantedReport(measured string, runs []plantedRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured by %s, %s, on this machine's %d cores.\n\n", benchCommand(), cmp.Or(measured, "(date not recorded)"), runtime.NumCPU())
	fmt.Fprintf(&b, "Each operator installs an AppService of 0 replicas. Then %d Secrets of %d KiB (%.0f MB in all) are planted beside it "+
		"as a tenant who may write Secrets in the namespace would: labelled as records of the CR's Helm release (`owner=helm`, its "+
		"name, status `superseded`, versions from 100), of type `helm.sh/release.v1`, with a `release` key of base64 text that "+
		"decodes to no release; %d writers. Then %d reconciles of the CR are forced, one after the other, each waited for "+
		"(at most %.0f minutes) with the `%s` annotation, a fresh value each: this operator echoes it in "+
		"`status.lastHandledReconcileAt` once done; the stock operator reconciles on any update of the CR, and a reconcile of "+
		"the kind that finished after the request counts as done. The goal: the manager's peak RSS rises by at most %d MiB, "+
		"and nothing restarts.\n\n",
		plantedRecords, plantedKiB, float64(plantedRecords*plantedKiB<<10)/1e6, plantedWriters, plantedReconciles,
		plantedBound.Minutes(), statuscontract.RequestAnnotation, plantedGoalMiB)
	b.WriteString("| operator | peak RSS before | planting took | peak through the planting | RSS as the forced reconciles begin | " +
		"peak through them | rise of the peak | RSS after | forced reconciles done in | reconcile errors | over the pod's 512 MiB? | stays up | " +
		"the CR's conditions True after | load average at the end (1, 5, 15 min) |\n" +
		"|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		peak := max(r.peakPlant, r.peakForced)
		var done []string
		for _, d := range r.done {
			if d == 0 {
				done = append(done, "not done")
			} else {
				done = append(done, figure(d)+" s")
			}
		}
		over := "no"
		if peak > podLimitMiB {
			over = fmt.Sprintf("**yes**: OOM-killed in the pod, at %.0f MiB", peak)
		}
		up := "yes"
		if len(r.exited) > 0 {
			up = "**no**: exited (" + strings.Join(r.exited, ", ") + ")"
		}
		fmt.Fprintf(&b, "| %s | %.0f MiB | %.0f s | %.0f MiB | %.0f MiB | %.0f MiB | %+.0f MiB | %.0f MiB | %s | %.0f | %s | %s | %s | %s |\n",
			r.operator, r.base, r.plantS, r.peakPlant, r.rssForced, r.peakForced, peak-r.base, r.rssAfter, strings.Join(done, ", "),
			r.errors, over, up, r.conditions, r.load)
	}
	b.WriteString("\nPeak RSS is the manager's VmHWM (`/proc/<pid>/status`), reset with `clear_refs` 5: over a quiet window of " +
		"10 s before the planting (\"before\"), then again from the planting's start to 5 s after its end, then again from " +
		"the first forced reconcile to 10 s after the last (from the RSS then); the rise is the larger of the two peaks less " +
		"the one before. " +
		"This operator's manager runs with the Go runtime's soft memory limit set from the pod's (80% of 512 MiB); the stock " +
		"one with none, as its scaffold sets none. The bench runs processes, not pods: nothing kills one over the limit, so " +
		"the table says which would have been. Reconcile errors are the kind's `controller_runtime_reconcile_total{result=\"error\"}` " +
		"from the planting to the end. The planted Secrets are deleted at the end.\n\n" +
		"The stock helm-operator's reconciler watches the Secrets its releases own, through a cache of every Secret whole: " +
		"the planting alone puts the planted records in its memory. Each of its reconciles then reads the release's last " +
		"record through Helm's storage, which lists all of the release's records and decodes each.\n")
	return b.String()
}
