package bench

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestNoisyNeighbour measures what a quiet tenant gets from the operator while another tenant
// floods it (make bench-fairness), for this operator's manager and sidecar, then for the
// stock helm-operator, each on namespaces of its own. Tenant A has
// WARPDRIVE_BENCH_FAIRNESS_CRS AppServices of 0 replicas (default 1000); tenant B has one, whose
// pods' CPU request B edits. Five phases, each timing B's edits from the edit to the
// Deployment's spec showing it (both operators; for this one also to Ready True at the CR's
// generation and, in the restarts, to each step between), each phase named in
// WARPDRIVE_BENCH_FAIRNESS_PHASES (default all five, in this order), for each operator named in
// WARPDRIVE_BENCH_VARIANTS (default both, this one first):
//
//   - quiet: A idle, B edits 6 times, 10 s apart;
//   - forced loop: A re-annotates all its CRs with statuscontract.RequestAnnotation, a fresh
//     value each round, from 10 writers for 70 s, while B edits 6 times, 10 s apart: a forced
//     reconcile of each for this operator, a metadata update, reconciled all the same, for the
//     stock one;
//   - edit wave: A edits the spec of all its CRs at once and B edits 1 s later, 3 times, each
//     wave waited for;
//   - restart: the operator is stopped and started again, and B edits 1 s after the start, 6
//     times, 10 s apart, while the start-up pass reconciles A's CRs;
//   - rolling restart: the same, but a new operator is started beside the old one, which is
//     stopped once the new one's processes answer /readyz, as a Deployment's rolling update
//     does (one pod more, none unavailable).
//
// The figures go to fairness.md in WARPDRIVE_BENCH_OUT. Latencies are the report's, never a
// failure; only a setup that does not come up fails the test.
//
// With WARPDRIVE_BENCH_FAIRNESS_KEEP=1 tenant A's namespace and CRs are kept at the end and
// taken as they are at the start: installing 10,000 CRs takes about 40 minutes, which a run of
// the restart phase alone then pays once. B's namespace is made afresh each run, so that its
// edits start from its install's value.
func TestNoisyNeighbour(t *testing.T) {
	s := loadSettings(t)
	n := intList(t, "WARPDRIVE_BENCH_FAIRNESS_CRS", "1000")[0]
	phases := strings.Split(envOr("WARPDRIVE_BENCH_FAIRNESS_PHASES", strings.Join(fairPhases, ",")), ",")
	keep := os.Getenv("WARPDRIVE_BENCH_FAIRNESS_KEEP") == "1"
	ops, err := pickVariants(envOr("WARPDRIVE_BENCH_VARIANTS", "warpdrive,stock"))
	if err != nil {
		t.Fatal(err)
	}
	measured, t0 := measuredNow(), time.Now()
	var runs []fairRun
	for _, v := range ops {
		runs = append(runs, noisyNeighbour(t, v, n, phases, keep))
		// Written after each operator, so that a run that fails on the second keeps the first.
		writeTune(t, s, "fairness.md", fairnessReport(measured, n, time.Since(t0), keep, runs))
	}
}

// fairPhases are the phases, in the order they run.
var fairPhases = []string{"quiet", "forced loop", "edit wave", "restart", "rolling restart"}

// Tenant B's edits per phase, and how far apart; tenant A's writers in the forced loop, and for
// how long they write.
const (
	fairEdits       = 6
	fairEditEvery   = 10 * time.Second
	fairWaves       = 3
	fairWriters     = 10
	fairForcedFor   = 70 * time.Second
	fairEditLead    = 5 * time.Second // the forced loop runs this long before B's first edit
	fairWaveLead    = time.Second     // B edits this long after A's wave begins
	fairApplyBound  = 5 * time.Minute // B's edits, or A's wave, not applied by then are counted as such
	fairQuietBound  = 2 * time.Minute // the wait for empty work queues between phases
	fairBaseCPU     = 100             // B's first edit sets its pods' CPU request to 101m, the next 102m...
	fairWaveBaseCPU = 60              // A's wave k sets its pods' CPU request to (60+k)m
	// The restart's start-up pass is waited for at most fairPassPerCR per CR (at least
	// fairApplyBound), and no longer once its work queue has not shrunk for fairPassStall.
	fairPassPerCR = 120 * time.Millisecond
	fairPassStall = 3 * time.Minute
)

// fairRun is what one operator gave tenant B in each phase.
type fairRun struct {
	operator string
	phases   []fairPhase
}

// fairPhase is one phase's figures.
type fairPhase struct {
	name string
	// deploy and ready are the latencies of B's edits that were applied: to the Deployment's
	// spec showing them, and (this operator only) to the CR Ready True at their generation.
	deploy, ready []time.Duration
	edits         int     // B's edits made
	late          int     // of them, not in the Deployment within fairApplyBound
	writes        int64   // A's requests (patches) made in the phase
	reconciles    float64 // the kind's reconciles in the phase, both tenants'
	// waves: each of A's waves to all its Deployments; for the restart, the start-up pass,
	// from the start to an empty work queue.
	waves []time.Duration
	// restarted: when the phase started the operator again (zero: it did not), whose
	// reconciles then count from 0.
	restarted time.Time
	// For the restarts: from the start to the operator's first reconcile (0: none seen), so
	// that B's edits made before and after it can be told apart; for the rolling restart,
	// from the start to the old operator's stop.
	served, oldStopped time.Duration
	// Each of B's edits on its own, with the steps on its way to Ready.
	each []fairEditFigures
}

// fairEditFigures is one of B's edits: when it was made, from the phase's start (for a
// restart, from the operator's), and its latencies (0: not seen) to each step on its way to
// Ready: the Deployment written (the manager's helm reconciler), the Deployment's rollout
// done (the deployment controller), status.observedGeneration at its generation (the
// manager's readiness controller), RolledOut True at it (the sidecar), and Ready (readiness
// again).
type fairEditFigures struct {
	made, deploy, deployDone, recorded, rolledOut, ready time.Duration
}

// readyLessRollout is the edit's latency to Ready less the Deployment's rollout, from its
// spec written to its rollout done: the issue's goal for a quiet tenant is "Ready within 5 s
// plus its rollout time". 0 if a step was not seen.
func (e fairEditFigures) readyLessRollout() time.Duration {
	if e.deploy == 0 || e.deployDone == 0 || e.ready == 0 {
		return 0
	}
	return e.ready - (e.deployDone - e.deploy)
}

// noisyNeighbour runs the phases named against operator v at n CRs of tenant A, whose
// namespace it keeps if keep (TestNoisyNeighbour).
func noisyNeighbour(t *testing.T, v variant, n int, phases []string, keep bool) fairRun {
	ctx := context.Background()
	run := fairRun{operator: v.name}
	short := strings.Fields(v.name)[0]
	nsA, nsB := "fair-"+short+"-a", "fair-"+short+"-b"
	for _, ns := range []string{nsA, nsB} {
		kept := keep && ns == nsA
		if !kept {
			deleteNamespace(t, ns) // left over by an interrupted run
		}
		err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if kept {
			err = client.IgnoreAlreadyExists(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !kept {
			defer deleteNamespace(t, ns)
		}
	}
	trA, err := newTracker(env.Config, nsA, env.GVR(kind))
	if err != nil {
		t.Fatal(err)
	}
	defer trA.stop()
	b := watchTenantB(t, nsB)
	defer b.stop()
	a := tenantClient(t)

	_, _, addr, stop := v.start(t, nil)
	// Deferred last, so run first: the operator stops before the namespaces go, rather than
	// uninstall each release. The restart phase replaces stop.
	defer func() { stop() }()
	time.Sleep(3 * time.Second) // caches synced before the clock starts

	// Install: A's CRs and B's one, to all Deployments there.
	// A CR already there is done with: kept from an earlier run, or created by an attempt
	// whose answer was lost.
	parallel(n, func(i int) error { return client.IgnoreAlreadyExists(a.Create(ctx, appService(nsA, i, 0))) })
	if err := env.Client.Create(ctx, appService(nsB, 0, 0)); err != nil {
		t.Fatal(err)
	}
	mustWait(t, trA, v.name+" install", n, trA.available(0))
	if !b.waitCPU(50, fairApplyBound) {
		t.Fatalf("%s: tenant B's Deployment not installed within %s", v.name, fairApplyBound)
	}
	reconciles := func() float64 {
		r, _ := framework.Metric(addr, "controller_runtime_reconcile_total", `controller="appservice-controller"`)
		return r
	}
	quiet := func(after string) {
		if waited, ok := waitQueuesEmpty(addr, fairQuietBound); !ok {
			t.Logf("%s: work queue not empty %s after %s; going on", v.name, fairQuietBound, after)
		} else {
			t.Logf("%s: work queue empty %.0f s after %s", v.name, waited.Seconds(), after)
		}
	}
	quiet("the install")

	seq := 0 // B's edits so far: each sets a CPU request of its own
	editB := func() fairEdit {
		seq++
		e, err := b.edit(fairBaseCPU + int64(seq))
		if err != nil {
			t.Fatalf("%s: tenant B's edit: %v", v.name, err)
		}
		return e
	}
	measure := func(name string, body func(p *fairPhase) []fairEdit) {
		if !slices.Contains(phases, name) {
			return
		}
		p := fairPhase{name: name}
		r0, started := reconciles(), time.Now()
		edits := body(&p)
		if !p.restarted.IsZero() {
			r0 = 0
		}
		p.reconciles = reconciles() - r0
		p.edits = len(edits)
		if v.name != stockName && len(edits) > 0 {
			// Ready follows the Deployment: waited for too, so that the last edit's is counted.
			b.waitReady(edits[len(edits)-1], fairApplyBound)
		}
		p.deploy, p.ready, p.late = b.latencies(edits, fairApplyBound)
		p.each = b.each(edits, cmp.Or(p.restarted, started))
		t.Logf("%s, %s: B's edits in the Deployment p50 %.2f s, max %.2f s (%d late); Ready p50 %.2f s, max %.2f s; A's writes %d; reconciles %.0f; waves %v",
			v.name, name, framework.Percentile(p.deploy, 50), framework.Percentile(p.deploy, 100), p.late,
			framework.Percentile(p.ready, 50), framework.Percentile(p.ready, 100), p.writes, p.reconciles, p.waves)
		t.Logf("%s, %s: first reconcile %.1f s after the start (0: not restarted); each edit (made, to the Deployment, "+
			"to its rollout done, to observedGeneration, to RolledOut, to Ready): %v", v.name, name, p.served.Seconds(), p.each)
		run.phases = append(run.phases, p)
		quiet(name)
	}

	measure("quiet", func(*fairPhase) []fairEdit {
		var edits []fairEdit
		for k := 0; k < fairEdits; k++ {
			edits = append(edits, editB())
			time.Sleep(fairEditEvery)
		}
		b.waitApplied(edits[len(edits)-1], fairApplyBound)
		return edits
	})

	measure("forced loop", func(p *fairPhase) []fairEdit {
		done := make(chan struct{})
		go func() {
			p.writes = forceLoop(a, nsA, n, fairForcedFor)
			close(done)
		}()
		time.Sleep(fairEditLead)
		var edits []fairEdit
		for k := 0; k < fairEdits; k++ {
			edits = append(edits, editB())
			time.Sleep(fairEditEvery)
		}
		<-done
		b.waitApplied(edits[len(edits)-1], fairApplyBound)
		return edits
	})

	measure("edit wave", func(p *fairPhase) []fairEdit {
		var edits []fairEdit
		for k := 1; k <= fairWaves; k++ {
			cpu := fmt.Sprintf("%dm", fairWaveBaseCPU+k)
			patch := []byte(fmt.Sprintf(`{"spec":{"resources":{"requests":{"cpu":%q}}}}`, cpu))
			t0 := time.Now()
			go parallel(n, func(i int) error {
				return a.Patch(ctx, appService(nsA, i, -1), client.RawPatch(types.MergePatchType, patch))
			})
			p.writes += int64(n)
			time.Sleep(fairWaveLead)
			edits = append(edits, editB())
			at, reached, ok := trA.waitFor(fairApplyBound, n, trA.withCPU(cpu))
			if !ok {
				t.Logf("%s: A's wave %d: %d of %d Deployments after %s", v.name, k, reached, n, fairApplyBound)
			}
			p.waves = append(p.waves, at.Sub(t0))
			b.waitApplied(edits[len(edits)-1], fairApplyBound)
		}
		return edits
	})

	// restartEdits is B's edits while a new operator starts at t0, and the start-up pass after
	// them; measure waits for their Ready and takes each edit's figures.
	restartEdits := func(p *fairPhase, t0 time.Time) []fairEdit {
		p.restarted = t0
		served := make(chan time.Duration, 1)
		go func() { served <- waitFirstReconcile(reconciles, t0, fairApplyBound) }()
		time.Sleep(fairWaveLead)
		var edits []fairEdit
		for k := 0; k < fairEdits; k++ {
			edits = append(edits, editB())
			time.Sleep(fairEditEvery)
		}
		b.waitApplied(edits[len(edits)-1], fairApplyBound)
		if waitStartupPass(addr, max(fairApplyBound, time.Duration(n)*fairPassPerCR), fairPassStall) {
			p.waves = append(p.waves, time.Since(t0))
		}
		p.served = <-served
		return edits
	}

	measure("restart", func(p *fairPhase) []fairEdit {
		stop()
		t0 := time.Now()
		_, _, addr, stop = v.start(t, nil)
		return restartEdits(p, t0)
	})

	measure("rolling restart", func(p *fairPhase) []fairEdit {
		probes := []string{freeAddr(t), freeAddr(t)}
		old := stop
		t0 := time.Now()
		procs, _, a, s := v.start(t, probes)
		addr, stop = a, s
		// Only the processes started serve probes: the stock operator's one, this operator's
		// manager and sidecar. Waiting for an address nobody serves would keep the old
		// operator running for the whole bound.
		probes = probes[:min(len(procs), len(probes))]
		stopped := make(chan time.Duration, 1)
		go func() {
			// The Deployment controller stops the old pod once the new one is ready.
			waitReadyz(probes, fairApplyBound)
			old()
			stopped <- time.Since(t0)
		}()
		edits := restartEdits(p, t0)
		p.oldStopped = <-stopped
		return edits
	})
	return run
}

// waitStartupPass waits for the work queues at metricsAddr to be empty, as waitQueuesEmpty
// does, and reports whether they were. It gives up after bound, or once their depth has not
// fallen below its lowest for stall: a queue that a reconcile period keeps full, the stock
// operator's, would otherwise hold the run for the whole bound, which at 10,000 CRs is 20
// minutes.
func waitStartupPass(metricsAddr string, bound, stall time.Duration) bool {
	t0 := time.Now()
	lowest, lowestAt := math.Inf(1), t0
	for time.Since(t0) < bound && time.Since(lowestAt) < stall {
		d, err := framework.Metric(metricsAddr, "workqueue_depth")
		if err == nil && d < lowest {
			lowest, lowestAt = d, time.Now()
		}
		if err == nil && d == 0 {
			_, ok := waitQueuesEmpty(metricsAddr, fairQuietBound)
			return ok
		}
		time.Sleep(2 * time.Second)
	}
	return false
}

// waitFirstReconcile polls the operator's count of reconciles until it is above 0, for at most
// bound, and returns how long after t0 that was; 0 if it was not. The operator starts
// reconciling once its caches are filled: an edit made before then waits for them.
func waitFirstReconcile(reconciles func() float64, t0 time.Time, bound time.Duration) time.Duration {
	for time.Since(t0) < bound {
		if reconciles() > 0 {
			return time.Since(t0)
		}
		time.Sleep(250 * time.Millisecond)
	}
	return 0
}

// waitReadyz waits until every process probed at addrs answers /readyz with 200 OK, or for
// bound.
func waitReadyz(addrs []string, bound time.Duration) {
	hc := http.Client{Timeout: 2 * time.Second}
	for _, a := range addrs {
		for t0 := time.Now(); time.Since(t0) < bound; time.Sleep(250 * time.Millisecond) {
			resp, err := hc.Get("http://" + a + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
		}
	}
}

// tenantClient is tenant A's client, with a rate limit of its own (the suites' 100 requests
// a second): the flood then reaches the operator, while B's client (env.Client) is not held
// up behind A's requests in a limiter they would share.
func tenantClient(t *testing.T) client.Client {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 100, 200
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// forceLoop re-annotates CRs 0..n-1 of ns with statuscontract.RequestAnnotation from
// fairWriters writers, each over its share of the CRs, round after round with a fresh value,
// for d. It returns the patches made.
func forceLoop(c client.Client, ns string, n int, d time.Duration) int64 {
	var wg sync.WaitGroup
	var writes atomic.Int64
	deadline := time.Now().Add(d)
	for w := 0; w < fairWriters; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; time.Now().Before(deadline); round++ {
				patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"w%d-r%d"}}}`, statuscontract.RequestAnnotation, w, round))
				for i := w; i < n && time.Now().Before(deadline); i += fairWriters {
					if c.Patch(context.Background(), appService(ns, i, -1), client.RawPatch(types.MergePatchType, patch)) == nil {
						writes.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	return writes.Load()
}

// fairEdit is one edit of tenant B's CR.
type fairEdit struct {
	at    time.Time // when it was sent
	milli int64     // the pods' CPU request it sets, in millicores
	gen   int64     // the CR's generation after it
}

// tenantB is tenant B's CR, app-0000 of its namespace, and a watch of it and of its
// Deployment that records when each value first showed. B's edits only raise the CPU
// request, so an edit is applied once the Deployment shows its value or a later one: an edit
// overtaken by the next before the operator got to it is applied with it.
type tenantB struct {
	ns    string
	mu    sync.Mutex
	cpuAt map[int64]time.Time // the Deployment's pods' CPU request, millicores -> first seen in its spec
	// The Deployment's pods' CPU request, millicores -> first seen with the rollout of the
	// spec that holds it done.
	doneAt  map[int64]time.Time
	readyAt map[int64]time.Time // generation -> first seen Ready True with observedGeneration equal to it
	// The steps between the Deployment and Ready, generation -> first seen: the manager's
	// status.observedGeneration, the sidecar's RolledOut True on the release it records.
	recordedAt, rolledAt map[int64]time.Time
	cancel               context.CancelFunc
}

func watchTenantB(t *testing.T, ns string) *tenantB {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &tenantB{ns: ns, cpuAt: map[int64]time.Time{}, doneAt: map[int64]time.Time{}, readyAt: map[int64]time.Time{},
		recordedAt: map[int64]time.Time{}, rolledAt: map[int64]time.Time{}, cancel: cancel}
	deployInf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns)).Apps().V1().Deployments().Informer()
	_, _ = deployInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    b.deployment,
		UpdateFunc: func(_, obj any) { b.deployment(obj) },
	})
	crInf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil).ForResource(env.GVR(kind)).Informer()
	_, _ = crInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    b.cr,
		UpdateFunc: func(_, obj any) { b.cr(obj) },
	})
	go deployInf.Run(ctx.Done())
	go crInf.Run(ctx.Done())
	toolscache.WaitForCacheSync(ctx.Done(), deployInf.HasSynced, crInf.HasSynced)
	return b
}

func (b *tenantB) stop() { b.cancel() }

// deployment records the CPU request in d's spec as soon as it is there: the operator's
// work ends with the Deployment written, whatever the deployment controller then does. It
// also records when the rollout of that spec is done, to tell the rollout's time from the
// operator's in the time to Ready.
func (b *tenantB) deployment(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || len(d.Spec.Template.Spec.Containers) == 0 {
		return
	}
	milli := d.Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
	done := rolledOut(d)
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.cpuAt[milli]; !seen {
		b.cpuAt[milli] = now
	}
	if _, seen := b.doneAt[milli]; done && !seen {
		b.doneAt[milli] = now
	}
}

// rolledOut is kstatus' word that d's rollout of its spec is done (Current), as Flux and kpt
// read a Deployment's status.
func rolledOut(d *appsv1.Deployment) bool {
	obj, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return false
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	res, err := kstatus.Compute(u)
	return err == nil && res.Status == kstatus.CurrentStatus
}

// cr records when this operator's status contract said the CR's generation was applied, and
// the steps on the way.
func (b *tenantB) cr(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	now := time.Now()
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", statuscontract.FieldObservedGeneration)
	b.mu.Lock()
	defer b.mu.Unlock()
	first := func(at map[int64]time.Time, gen int64) {
		if _, seen := at[gen]; !seen && gen > 0 {
			at[gen] = now
		}
	}
	first(b.recordedAt, observed)
	// The sidecar's word counts once it is on the release the manager recorded, as Ready's.
	c := statuscontract.Find(statuscontract.Conditions(u), statuscontract.RolledOut)
	if c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == observed {
		if revision, _ := statuscontract.JudgedRevision(c); revision == statuscontract.DeployedRevision(u) {
			first(b.rolledAt, observed)
		}
	}
	if status, _, _ := framework.Condition(u, statuscontract.Ready); status == "True" && observed == u.GetGeneration() {
		first(b.readyAt, observed)
	}
}

// edit sets B's pods' CPU request to milli millicores.
func (b *tenantB) edit(milli int64) (fairEdit, error) {
	cr := appService(b.ns, 0, -1)
	patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"cpu":"%dm"}}}}`, milli)
	at := time.Now()
	if err := env.Client.Patch(context.Background(), cr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fairEdit{}, err
	}
	return fairEdit{at: at, milli: milli, gen: cr.GetGeneration()}, nil
}

// firstAtLeast is the earliest time recorded under a key of at least min; zero if none.
func firstAtLeast(at map[int64]time.Time, min int64) time.Time {
	var first time.Time
	for k, when := range at {
		if k >= min && (first.IsZero() || when.Before(first)) {
			first = when
		}
	}
	return first
}

// applied is when e first showed in the Deployment, and in the CR's Ready; zero if not yet.
func (b *tenantB) applied(e fairEdit) (deployed, ready time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return firstAtLeast(b.cpuAt, e.milli), firstAtLeast(b.readyAt, e.gen)
}

// waitApplied waits until e shows in the Deployment, or for bound.
func (b *tenantB) waitApplied(e fairEdit, bound time.Duration) {
	for t0 := time.Now(); time.Since(t0) < bound; time.Sleep(100 * time.Millisecond) {
		if d, _ := b.applied(e); !d.IsZero() {
			return
		}
	}
}

// waitReady waits until e's generation, or a later one, is Ready, or for bound.
func (b *tenantB) waitReady(e fairEdit, bound time.Duration) {
	for t0 := time.Now(); time.Since(t0) < bound; time.Sleep(100 * time.Millisecond) {
		if _, r := b.applied(e); !r.IsZero() {
			return
		}
	}
}

// each is every edit's figures, its time made taken from t0.
func (b *tenantB) each(edits []fairEdit, t0 time.Time) []fairEditFigures {
	var out []fairEditFigures
	for _, e := range edits {
		d, r := b.applied(e)
		b.mu.Lock()
		done := firstAtLeast(b.doneAt, e.milli)
		recorded, rolled := firstAtLeast(b.recordedAt, e.gen), firstAtLeast(b.rolledAt, e.gen)
		b.mu.Unlock()
		since := func(at time.Time) time.Duration {
			if at.IsZero() {
				return 0
			}
			return max(0, at.Sub(e.at))
		}
		out = append(out, fairEditFigures{made: e.at.Sub(t0), deploy: since(d), deployDone: since(done),
			recorded: since(recorded), rolledOut: since(rolled), ready: since(r)})
	}
	return out
}

// waitCPU waits until the Deployment shows milli millicores, or for bound; false if it did not.
func (b *tenantB) waitCPU(milli int64, bound time.Duration) bool {
	b.waitApplied(fairEdit{milli: milli}, bound)
	d, _ := b.applied(fairEdit{milli: milli})
	return !d.IsZero()
}

// latencies are those of edits applied within bound, to the Deployment and to Ready, and how
// many were not in the Deployment by then.
func (b *tenantB) latencies(edits []fairEdit, bound time.Duration) (deploy, ready []time.Duration, late int) {
	for _, e := range edits {
		d, r := b.applied(e)
		if d.IsZero() || d.Sub(e.at) > bound {
			late++
			continue
		}
		deploy = append(deploy, max(0, d.Sub(e.at)))
		if !r.IsZero() {
			ready = append(ready, max(0, r.Sub(e.at)))
		}
	}
	return deploy, ready, late
}

// fairnessReport is fairness.md of runs.
func fairnessReport(measured string, n int, took time.Duration, keep bool, runs []fairRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# A noisy neighbour: what a quiet tenant gets\n\n"+
		"Measured by `make bench-fairness` (TestNoisyNeighbour in test/bench), %s, on this machine's %d cores, "+
		"with WARPDRIVE_BENCH_FAIRNESS_CRS=%d; the run took %.0f minutes.\n\n", cmp.Or(measured, "(date not recorded)"),
		runtime.NumCPU(), n, took.Minutes())
	if keep {
		b.WriteString("Tenant A's namespace was kept from an earlier run (WARPDRIVE_BENCH_FAIRNESS_KEEP=1): " +
			"its CRs were installed then, and the run's time does not count their install.\n\n")
	}
	fmt.Fprintf(&b, "Tenant A has %d AppService CRs of 0 replicas in its namespace; tenant B has one, whose pods' CPU "+
		"request it edits (a change of the rendered Deployment that needs no pod). Each operator gets namespaces of its own "+
		"and installs them, then:\n\n"+
		"- *quiet*: A idle; B edits %d times, %.0f s apart.\n"+
		"- *forced loop*: A's %d writers re-annotate all its CRs with `%s`, a fresh value each round, for %.0f s; "+
		"B edits %d times, %.0f s apart, from %.0f s in. This operator takes the annotation as a forced reconcile; "+
		"for the stock operator it is a metadata update, which it reconciles in full all the same.\n"+
		"- *edit wave*: A edits the spec (the pods' CPU request) of all its CRs at once, 16 writers, and B edits %.0f s later; "+
		"%d times, each wave waited for (at most %.0f minutes).\n"+
		"- *restart*: the operator is stopped and started again; B edits %.0f s after the start, %d times, %.0f s apart, "+
		"while the start-up pass reconciles A's CRs. Its last column is the start-up pass, from the start to an empty work queue "+
		"(\"-\": not empty within %.0f ms per CR, or its depth not falling for %.0f minutes).\n"+
		"- *rolling restart*: the same, but the new operator is started beside the old one, which is stopped once the new "+
		"one's processes answer `/readyz`, as a Deployment's rolling update (one pod more, none unavailable) does.\n\n",
		n, fairEdits, fairEditEvery.Seconds(), fairWriters, statuscontract.RequestAnnotation, fairForcedFor.Seconds(),
		fairEdits, fairEditEvery.Seconds(), fairEditLead.Seconds(), fairWaveLead.Seconds(), fairWaves, fairApplyBound.Minutes(),
		fairWaveLead.Seconds(), fairEdits, fairEditEvery.Seconds(), float64(fairPassPerCR.Milliseconds()), fairPassStall.Minutes())
	b.WriteString("B's latency is from its edit to its Deployment's spec showing the new value (the same end for both " +
		"operators); for this operator also to the CR's condition Ready True with status.observedGeneration at the edit's " +
		"generation. A phase has 6 or 3 edits per operator: with fewer than 100 samples the 99th percentile is the " +
		"largest sample, so p99 is the max, and the p50 of 6 is the third fastest. " +
		"An edit overtaken by B's next one before the operator reached it counts as applied with it.\n\n")
	b.WriteString("| phase | operator | B's edits | B: Deployment p50 | p99 | max | B: Ready p50 / max | " +
		"A's requests in the phase | reconciles in the phase | A's waves, each to all its Deployments |\n" +
		"|---|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range fairPhases {
		for _, r := range runs {
			for _, p := range r.phases {
				if p.name == name {
					b.WriteString(fairRow(r.operator, p))
				}
			}
		}
	}
	b.WriteString(editsTables(runs))
	b.WriteString("\nB's edits are applied by this operator's manager through a work queue that serves namespaces in turn " +
		"(internal/fairqueue): B's one request waits for at most one request of each busy namespace, whatever A has queued. " +
		"The stock helm-operator has one first-in first-out queue per kind: B's edit waits behind every request of A's " +
		"queued before it (each CR at most once, the queue merging repeated requests).\n\n" +
		"Both operators run as in TestCompare: this operator's manager and sidecar with the arguments of config/default, " +
		"the stock helm-operator with its scaffold's (a reconcile period of 1 minute, as many reconciles at once as the " +
		"machine has cores). A's requests are its writes (patches) made in the phase, through a client of its own limited " +
		"to 100 requests a second, so that B's client does not wait in the same client-side limiter; both clients are the " +
		"cluster's administrator, whom the API server's priority and fairness exempts. Reconciles are the kind's " +
		"controller_runtime_reconcile_total over the phase, both tenants' and the stock operator's periodic ones included. " +
		"The control plane, kwok and the operator share the machine's cores, so the figures are noisy. " +
		"The latencies are the report's, never a failure of the test.\n")
	return b.String()
}

// editsTables is each of B's edits in each phase, for each operator: the steps of an edit's
// way to Ready tell the operator's part from the deployment controller's, which the goal of a
// quiet tenant's edit (Ready within 5 s plus its rollout's time) leaves out; in the restarts,
// the edits made before the operator's first reconcile are told from those after.
func editsTables(runs []fairRun) string {
	var b strings.Builder
	for _, r := range runs {
		for _, p := range r.phases {
			if len(p.each) == 0 {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("\nEach of B's edits: when it was made, from the phase's start (in a restart, from the new operator's " +
					"start), and its latencies to each step on its way to Ready (\"-\": not seen): the Deployment written " +
					"(the manager's helm reconciler), its rollout done (the deployment controller; kstatus Current), " +
					"status.observedGeneration at its generation (the manager's readiness controller), RolledOut True at it " +
					"(the sidecar), Ready True at it (the readiness controller); then the latency to Ready less the " +
					"Deployment's rollout, from its spec written to its rollout done, which the goal of 5 s plus the " +
					"rollout's time judges.\n")
			}
			title := p.name + ", " + r.operator
			if !p.restarted.IsZero() {
				served := "none seen"
				if p.served > 0 {
					served = figure(p.served.Seconds()) + " s after its start"
				}
				if p.oldStopped > 0 {
					served += ", the old one stopped " + figure(p.oldStopped.Seconds()) + " s after it"
				}
				title += ", first reconcile " + served
			}
			fmt.Fprintf(&b, "\n%s:\n\n"+
				"| edit made | to the Deployment | to its rollout done | to observedGeneration | to RolledOut | to Ready | "+
				"Ready less the rollout |\n|---|---|---|---|---|---|---|\n", title)
			for _, e := range p.each {
				fmt.Fprintf(&b, "| %s s | %s | %s | %s | %s | %s | %s |\n", figure(e.made.Seconds()), orDash(e.deploy),
					orDash(e.deployDone), orDash(e.recorded), orDash(e.rolledOut), orDash(e.ready), orDash(e.readyLessRollout()))
			}
		}
	}
	return b.String()
}

// orDash is d in seconds, or "-" if it is 0.
func orDash(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return figure(d.Seconds()) + " s"
}

// fairRow is one phase × operator row of the table.
func fairRow(operator string, p fairPhase) string {
	sec := func(ds []time.Duration, q float64) string {
		if len(ds) == 0 {
			return "-"
		}
		return figure(framework.Percentile(ds, q)) + " s"
	}
	// Below 100 samples the 99th percentile is the largest: framework.Percentile, which
	// rounds the rank down, would give the second largest of 6.
	p99 := 99.0
	if len(p.deploy) < 100 {
		p99 = 100
	}
	applied := fmt.Sprintf("%d", p.edits)
	if p.late > 0 {
		applied = fmt.Sprintf("%d (%d not applied within %.0f min)", p.edits, p.late, fairApplyBound.Minutes())
	}
	ready := "-"
	if len(p.ready) > 0 {
		ready = sec(p.ready, 50) + " / " + sec(p.ready, 100)
	}
	writes := "-"
	if p.writes > 0 {
		writes = fmt.Sprintf("%d", p.writes)
	}
	waves := "-"
	if len(p.waves) > 0 {
		var w []string
		for _, d := range p.waves {
			w = append(w, figure(d.Seconds())+" s")
		}
		waves = strings.Join(w, ", ")
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s |\n", p.name, operator, applied,
		sec(p.deploy, 50), sec(p.deploy, p99), sec(p.deploy, 100), ready, writes, p.reconciles, waves)
}
