package bench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestValuesFrom measures spec.valuesFrom (make bench-valuesfrom; make bench and make
// bench-quick run it too) with WARPDRIVE_BENCH_VALUESFROM_CRS Memcached CRs (default 100) of
// size 0, so that no pod loads the nodes, in four parts:
//
//   - shared: every CR takes its values from one Secret, whose memory limit is edited
//     WARPDRIVE_BENCH_VALUESFROM_EDITS times (default 3), one edit after the other; for each CR,
//     the time from the edit to its status.valuesFrom naming the Secret's new version with
//     Ready True at the CR's generation (the upgrade applied, and said so);
//   - own: each CR switched to a Secret of its own, then all of them edited at once; the same;
//   - memory: a fresh manager's steady-state memory with the CRs, then with
//     WARPDRIVE_BENCH_VALUESFROM_SECRETS unrelated, unlabelled Secrets of 100 KiB (default
//     5000) in other namespaces, then restarted with them: it caches only the labelled
//     Secrets' metadata, so they should not count;
//   - stock: the stock helm-operator has no valuesFrom, and its users write the value into
//     every CR: the same CRs with the limit in their spec, all edited at once, timed to each
//     Deployment showing it (WARPDRIVE_BENCH_VALUESFROM_STOCK=0 leaves it out).
//
// The figures go to valuesfrom.md (from valuesfrom.json, which keeps each number of CRs' latest
// run) in WARPDRIVE_BENCH_OUT. Timing goals are the report's, never a failure.
func TestValuesFrom(t *testing.T) {
	s := loadSettings(t)
	vs := vfSettings{
		crs:     intList(t, "WARPDRIVE_BENCH_VALUESFROM_CRS", "100")[0],
		edits:   intList(t, "WARPDRIVE_BENCH_VALUESFROM_EDITS", "3")[0],
		secrets: intList(t, "WARPDRIVE_BENCH_VALUESFROM_SECRETS", "5000")[0],
		stock:   envOr("WARPDRIVE_BENCH_VALUESFROM_STOCK", "1") != "0",
	}
	r := stored{Variant: vfVariant, N: vs.crs, Measured: measuredNow(), Figures: map[string]float64{}}
	f := r.Figures
	f["edits"], f["unrelatedSecrets"], f["secretKiB"] = float64(vs.edits), float64(vs.secrets), vfSecretKiB
	save := func() {
		if err := writeValuesFromReport(s.out, r); err != nil {
			t.Errorf("report: %v", err)
		}
	}
	defer save() // a run stopped by a failure keeps the parts it measured

	ns := "bench-vf"
	deleteMemcachedNamespace(t, ns) // left over by an interrupted run
	createNamespace(t, ns)
	defer deleteMemcachedNamespace(t, ns)
	tr := newVFTracker(t, ns)
	defer tr.stop()
	op := startVFOperator(t)
	defer func() { op.stop() }()

	// Shared: one Secret, N CRs, edits one after the other.
	shared := vfSecret(ns, "shared", memLimit("shared", 0))
	env.Create(t, shared)
	names := make([]string, vs.crs)
	for i := range names {
		names[i] = fmt.Sprintf("mc-%04d", i)
		tr.expect(names[i], vfTarget{source: shared.Name, rv: shared.ResourceVersion, limit: memLimit("shared", 0), since: time.Now()})
	}
	parallel(vs.crs, func(i int) error {
		return env.Client.Create(context.Background(), memcached(ns, names[i], "Secret", shared.Name, ""))
	})
	tr.mustApply(t, "create", names)
	waitQuiet(t, op.addr)

	var sharedLat, sharedDeploy, sharedRolled []time.Duration
	for e := 1; e <= vs.edits; e++ {
		limit := memLimit("shared", e)
		since := time.Now()
		setLimit(t, shared, limit)
		for _, n := range names {
			tr.expect(n, vfTarget{source: shared.Name, rv: shared.ResourceVersion, limit: limit, since: since})
		}
		tr.mustApply(t, fmt.Sprintf("shared edit %d", e), names)
		lat, deploy, rolled := tr.latencies(names)
		t.Logf("shared edit %d: applied p50 %.2f s, max %.2f s", e, framework.Percentile(lat, 50), framework.Percentile(lat, 100))
		f["sharedAllMax"] = max(f["sharedAllMax"], framework.Percentile(lat, 100))
		sharedLat, sharedDeploy, sharedRolled = append(sharedLat, lat...), append(sharedDeploy, deploy...), append(sharedRolled, rolled...)
		waitQuiet(t, op.addr)
	}
	putLatencies(f, "shared", sharedLat)
	putLatencies(f, "sharedDeploy", sharedDeploy)
	putLatencies(f, "sharedRolled", sharedRolled)
	f["sharedWaited"] = float64(tr.waitedCount())
	save()

	// Own: a Secret per CR, then all of them edited at once.
	own := make([]*corev1.Secret, vs.crs)
	for i, n := range names {
		own[i] = vfSecret(ns, "own-"+n, memLimit("own", 0))
	}
	parallel(vs.crs, func(i int) error { return env.Client.Create(context.Background(), own[i]) })
	for i, n := range names {
		if own[i].ResourceVersion == "" { // parallel retries, without saying whether it gave up
			t.Fatalf("Secret %s was not created", own[i].Name)
		}
		tr.expect(n, vfTarget{source: own[i].Name, rv: own[i].ResourceVersion, limit: memLimit("own", 0), since: time.Now()})
	}
	parallel(vs.crs, func(i int) error {
		patch := fmt.Sprintf(`{"spec":{"valuesFrom":[{"kind":"Secret","name":%q}]}}`, own[i].Name)
		return env.Client.Patch(context.Background(), memcached(ns, names[i], "", "", ""), client.RawPatch(types.MergePatchType, []byte(patch)))
	})
	tr.mustApply(t, "switch to own Secrets", names)
	waitQuiet(t, op.addr)
	tr.resetWaited()
	wave := time.Now()
	var mu sync.Mutex
	parallel(vs.crs, func(i int) error {
		since := time.Now()
		if err := patchLimit(own[i], memLimit("own", 1)); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		tr.expect(names[i], vfTarget{source: own[i].Name, rv: own[i].ResourceVersion, limit: memLimit("own", 1), since: since})
		return nil
	})
	f["ownEditsS"] = time.Since(wave).Seconds()
	last := tr.mustApply(t, "own edits", names)
	ownLat, ownDeploy, ownRolled := tr.latencies(names)
	putLatencies(f, "own", ownLat)
	putLatencies(f, "ownDeploy", ownDeploy)
	putLatencies(f, "ownRolled", ownRolled)
	f["ownAllS"] = last.Sub(wave).Seconds()
	f["ownWaited"] = float64(tr.waitedCount())
	t.Logf("own edits: applied p50 %.2f s, p95 %.2f s, all in %.2f s", f["ownP50"], f["ownP95"], f["ownAllS"])
	save()

	// Memory: a fresh manager, steady, then the unrelated Secrets, then a fresh manager again.
	measureMemory(t, &op, vs.secrets, f)
	save()
	op.stop()
	tr.stop()
	deleteMemcachedNamespace(t, ns)

	if vs.stock {
		stockSpecEdits(t, vs.crs, f)
	}
}

// vfVariant names TestValuesFrom's results in valuesfrom.json.
const vfVariant = "valuesFrom"

// vfSecretKiB is the size of each unrelated Secret of the memory part.
const vfSecretKiB = 100

type vfSettings struct {
	crs, edits, secrets int
	stock               bool
}

// vfOperator is this operator's pod, manager and sidecar: Ready waits for the sidecar's word
// that the release's workloads rolled out.
type vfOperator struct {
	op   *framework.Operator
	addr string // the manager's metrics
}

func startVFOperator(t *testing.T) *vfOperator {
	addr := freeAddr(t)
	op, err := env.StartOperator(framework.ProcessOptions{Name: "bench-vf-manager", MetricsAddr: addr},
		framework.ProcessOptions{Name: "bench-vf-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // caches synced before the clock starts
	return &vfOperator{op: op, addr: addr}
}

func (o *vfOperator) stop() {
	if o.op != nil {
		o.op.Stop()
		o.op = nil
	}
}

// waitQuiet waits for the manager's work queues to empty, so that the next edit starts on an
// idle manager.
func waitQuiet(t *testing.T, addr string) {
	if _, ok := waitQueuesEmpty(addr, quietWait); !ok {
		t.Logf("work queues not empty after %s; going on", quietWait)
	}
}

// memSettle is how long the manager idles before its memory is read: two looks of the idle
// memory release (--idle-memory-release=30s; docs/bench/findings.md, "The idle memory
// release") and some margin, so that what a wave left behind is returned.
const memSettle = 70 * time.Second

// memWindow is how long memory is sampled, once a second; the median is reported.
const memWindow = 20 * time.Second

// measureMemory records the manager's steady memory with the CRs alone (a fresh manager),
// then with n unrelated Secrets, then after a restart with them, and etcd's size around them.
func measureMemory(t *testing.T, op **vfOperator, n int, f map[string]float64) {
	restart := func() {
		(*op).stop()
		*op = startVFOperator(t)
		// The start-up pass reconciles every CR again, and upgrades none: the releases are
		// as their sources say.
		waitQuiet(t, (*op).addr)
	}
	steady := func(key string) {
		time.Sleep(memSettle)
		m := sampleMemory((*op).op.Manager.Pid(), (*op).addr)
		f[key+"RSS"], f[key+"Anon"], f[key+"Heap"], f[key+"Free"] = m.rss, m.anon, m.heap, m.free
		t.Logf("memory %s: VmRSS %.1f MiB, RssAnon %.1f MiB, heap in use %.1f MiB, free heap kept %.1f MiB", key, m.rss, m.anon, m.heap, m.free)
	}
	restart()
	steady("memBase")

	noise := make([]string, 5)
	for i := range noise {
		noise[i] = fmt.Sprintf("bench-vf-noise-%d", i)
		deleteMemcachedNamespace(t, noise[i])
		createNamespace(t, noise[i])
	}
	defer func() {
		for _, ns := range noise {
			deleteMemcachedNamespace(t, ns)
		}
	}()
	f["etcdBeforeMiB"] = etcdMiB(t)
	t0 := time.Now()
	createUnrelatedSecrets(t, noise, n)
	f["secretsCreateS"] = time.Since(t0).Seconds()
	f["etcdAfterMiB"] = etcdMiB(t)
	t.Logf("%d Secrets of %d KiB in %.0f s; etcd in use %.0f -> %.0f MiB", n, vfSecretKiB, f["secretsCreateS"], f["etcdBeforeMiB"], f["etcdAfterMiB"])
	waitQuiet(t, (*op).addr)
	steady("memNoise")

	restart()
	steady("memNoiseRestart")
}

// createUnrelatedSecrets creates n unlabelled Secrets of vfSecretKiB each, spread over
// namespaces, with 32 writers and a client that does not throttle them.
func createUnrelatedSecrets(t *testing.T, namespaces []string, n int) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	blob := make([]byte, vfSecretKiB<<10)
	if _, err := rand.Read(blob); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed sync.Map
	next := make(chan int)
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				s := &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: namespaces[i%len(namespaces)], Name: fmt.Sprintf("unrelated-%05d", i)},
					Data:       map[string][]byte{"blob": blob},
				}
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if _, err = cs.CoreV1().Secrets(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err == nil {
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
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	failed.Range(func(k, v any) bool {
		t.Fatalf("Secret %d: %v", k, v)
		return false
	})
}

// memory is a process's memory, each the median of the window's samples.
type memory struct {
	rss, anon, heap float64 // VmRSS, RssAnon and the Go heap in use, MiB
	// free is the heap the Go runtime holds free and has not returned to the kernel (heap
	// idle less released), MiB: resident, in RssAnon, yet no live data.
	free float64
}

func sampleMemory(pid int, addr string) memory {
	var rss, anon, heap, free []float64
	for t0 := time.Now(); time.Since(t0) < memWindow; time.Sleep(time.Second) {
		if v, err := framework.ProcStatusMiB(pid, "VmRSS", "RssAnon"); err == nil {
			rss, anon = append(rss, v[0]), append(anon, v[1])
		}
		if b, err := framework.Metric(addr, "go_memstats_heap_inuse_bytes"); err == nil && b > 0 {
			heap = append(heap, b/(1<<20))
		}
		idle, err1 := framework.Metric(addr, "go_memstats_heap_idle_bytes")
		released, err2 := framework.Metric(addr, "go_memstats_heap_released_bytes")
		if err1 == nil && err2 == nil && idle > 0 {
			free = append(free, (idle-released)/(1<<20))
		}
	}
	return memory{rss: median(rss), anon: median(anon), heap: median(heap), free: median(free)}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

// stockSpecEdits is what a stock helm-operator user does instead of editing one source: the
// limit written into every CR's spec, all edited at once, timed to each Deployment showing
// it. The stock operator writes no status.valuesFrom nor a Ready of ours: the Deployment is
// the comparable end, and the report gives this operator's own Deployment times beside it.
func stockSpecEdits(t *testing.T, n int, f map[string]float64) {
	ns := "bench-vf-stock"
	deleteMemcachedNamespace(t, ns)
	createNamespace(t, ns)
	defer deleteMemcachedNamespace(t, ns)
	tr := newVFTracker(t, ns)
	defer tr.stop()
	addr := freeAddr(t)
	p, err := env.StartManager(framework.ProcessOptions{Name: "bench-vf-stock", Stock: true, MetricsAddr: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	time.Sleep(3 * time.Second)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("mc-%04d", i)
		tr.expect(names[i], vfTarget{limit: memLimit("spec", 0), since: time.Now()})
	}
	parallel(n, func(i int) error {
		return env.Client.Create(context.Background(), memcached(ns, names[i], "", "", memLimit("spec", 0)))
	})
	tr.mustApply(t, "stock create", names)
	waitQuiet(t, addr)
	wave := time.Now()
	var mu sync.Mutex
	parallel(n, func(i int) error {
		since := time.Now()
		err := env.Client.Patch(context.Background(), memcached(ns, names[i], "", "", ""),
			client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"resources":{"limits":{"memory":%q}}}}`, memLimit("spec", 1)))))
		if err == nil {
			mu.Lock()
			defer mu.Unlock()
			tr.expect(names[i], vfTarget{limit: memLimit("spec", 1), since: since})
		}
		return err
	})
	last := tr.mustApply(t, "stock spec edits", names)
	_, deploy, rolled := tr.latencies(names)
	putLatencies(f, "stockDeploy", deploy)
	putLatencies(f, "stockRolled", rolled)
	f["stockAllS"] = last.Sub(wave).Seconds()
	t.Logf("stock spec edits: Deployment p50 %.2f s, p95 %.2f s, all in %.2f s", f["stockDeployP50"], f["stockDeployP95"], f["stockAllS"])
	p.Stop()
	// The stock operator is gone: its finalizers are taken off with the namespace.
}

func putLatencies(f map[string]float64, key string, ds []time.Duration) {
	f[key+"P50"], f[key+"P95"], f[key+"Max"] = framework.Percentile(ds, 50), framework.Percentile(ds, 95), framework.Percentile(ds, 100)
}

// memcached is a Memcached CR of size 0 (no pods) taking its values from the source of kind
// and name, or with the memory limit in its spec; kind and limit empty: a bare object for
// patches.
func memcached(ns, name, kind, source, limit string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(framework.GVK("Memcached"))
	u.SetNamespace(ns)
	u.SetName(name)
	switch {
	case kind != "":
		u.Object["spec"] = map[string]any{"size": int64(0), valuesfrom.Field: []any{map[string]any{"kind": kind, "name": source}}}
	case limit != "":
		u.Object["spec"] = map[string]any{"size": int64(0), "resources": map[string]any{"limits": map[string]any{"memory": limit}}}
	}
	return u
}

// The value edited is the pods' memory limit (resources.limits.memory), which the chart
// renders into the Deployment, and which the stock operator's CRs can carry in their specs
// for the comparison.
func memLimit(what string, edit int) string {
	base := map[string]int{"shared": 200, "own": 300, "spec": 400}[what]
	return fmt.Sprintf("%dMi", base+edit)
}

func limitValues(limit string) string {
	return "resources:\n  limits:\n    memory: " + limit + "\n"
}

// vfSecret is a chart-readable Secret whose values.yaml sets the memory limit.
func vfSecret(ns, name, limit string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{valuesfrom.ReadableLabel: "true"}},
		StringData: map[string]string{valuesfrom.DefaultValuesKey: limitValues(limit)},
	}
}

func setLimit(t *testing.T, s *corev1.Secret, limit string) {
	if err := patchLimit(s, limit); err != nil {
		t.Fatal(err)
	}
}

// patchLimit sets the memory limit of s's values.yaml; s gets the new version.
func patchLimit(s *corev1.Secret, limit string) error {
	patch, err := json.Marshal(map[string]any{"stringData": map[string]string{valuesfrom.DefaultValuesKey: limitValues(limit)}})
	if err != nil {
		return err
	}
	return env.Client.Patch(context.Background(), s, client.RawPatch(types.MergePatchType, patch))
}

func createNamespace(t *testing.T, ns string) {
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
}

// deleteMemcachedNamespace removes ns and waits until it is gone. Its Memcached CRs lose their
// finalizer first: the operator that put it there may be gone.
func deleteMemcachedNamespace(t *testing.T, ns string) {
	ctx := context.Background()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(framework.GVK("Memcached").GroupVersion().WithKind("MemcachedList"))
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
		for i := range list.Items {
			_ = env.Client.Patch(ctx, &list.Items[i], client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}
	}
	_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	err := framework.Poll(ctx, 15*time.Minute, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if err == nil {
			return fmt.Errorf("namespace %s still terminating", ns)
		}
		return client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Logf("deleting namespace %s: %v", ns, err)
	}
}

// vfTarget is what a CR waits for: its status.valuesFrom naming source at version rv, with
// Ready True at its generation (no source: only the Deployment counts), and its Deployment's
// memory limit; since is when the change was made.
type vfTarget struct {
	source, rv, limit string
	since             time.Time
}

// vfTracker watches the CRs and the Deployments of one namespace and records when each CR
// first reached its target: watching, not polling, keeps the measurement off the apiserver.
type vfTracker struct {
	mu     sync.Mutex
	crs    map[string]*unstructured.Unstructured
	limits map[string]string // Deployment (the CR's name) -> its pods' memory limit
	// current: the Deployment's controller has seen its spec (status.observedGeneration at
	// its generation).
	current  map[string]bool
	want     map[string]vfTarget
	applied  map[string]time.Time // the CR's status says so
	deployed map[string]time.Time // the Deployment shows the limit
	// rolled: the Deployment shows the limit and its controller (kube-controller-manager's)
	// has seen it, which Ready waits for: the cluster's part of the time to Ready.
	rolled map[string]time.Time
	// waited are the CRs seen not Ready with reason ValuesSourceChanged: a changed source
	// waiting for its upgrade, as the status contract says.
	waited  map[string]bool
	changed chan struct{}
	cancel  context.CancelFunc
}

func newVFTracker(t *testing.T, ns string) *vfTracker {
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &vfTracker{
		crs: map[string]*unstructured.Unstructured{}, limits: map[string]string{}, current: map[string]bool{},
		want: map[string]vfTarget{}, applied: map[string]time.Time{}, deployed: map[string]time.Time{},
		rolled: map[string]time.Time{}, waited: map[string]bool{},
		changed: make(chan struct{}, 1), cancel: cancel,
	}
	deployInf := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns)).Apps().V1().Deployments().Informer()
	_, _ = deployInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.deployment(obj) },
		UpdateFunc: func(_, obj any) { tr.deployment(obj) },
	})
	crInf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil).ForResource(env.GVR("Memcached")).Informer()
	_, _ = crInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.cr(obj) },
		UpdateFunc: func(_, obj any) { tr.cr(obj) },
	})
	go deployInf.Run(ctx.Done())
	go crInf.Run(ctx.Done())
	toolscache.WaitForCacheSync(ctx.Done(), deployInf.HasSynced, crInf.HasSynced)
	return tr
}

func (tr *vfTracker) stop() { tr.cancel() }

func (tr *vfTracker) deployment(obj any) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || len(d.Spec.Template.Spec.Containers) == 0 {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.limits[d.Name] = d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()
	tr.current[d.Name] = d.Status.ObservedGeneration >= d.Generation
	tr.check(d.Name)
}

func (tr *vfTracker) cr(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.crs[u.GetName()] = u
	if status, reason, _ := framework.Condition(u, statuscontract.Ready); status == "False" && reason == statuscontract.ReasonValuesSourceChanged {
		tr.waited[u.GetName()] = true
	}
	tr.check(u.GetName())
}

// expect sets what CR name waits for from now on.
func (tr *vfTracker) expect(name string, want vfTarget) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.want[name] = want
	delete(tr.applied, name)
	delete(tr.deployed, name)
	delete(tr.rolled, name)
	tr.check(name) // the events may have come before the change's answer
}

// check records, under the lock, whether CR name reached its target.
func (tr *vfTracker) check(name string) {
	want, ok := tr.want[name]
	if !ok {
		return
	}
	now := time.Now()
	if _, seen := tr.deployed[name]; !seen && tr.limits[name] == want.limit {
		tr.deployed[name] = now
	}
	if _, seen := tr.rolled[name]; !seen && tr.limits[name] == want.limit && tr.current[name] {
		tr.rolled[name] = now
	}
	if _, seen := tr.applied[name]; !seen && (want.source == "" || sourceApplied(tr.crs[name], want)) {
		tr.applied[name] = now
	}
	select {
	case tr.changed <- struct{}{}:
	default:
	}
}

// sourceApplied: cr's status.valuesFrom names want's source at its version, and cr is Ready
// at its generation.
func sourceApplied(cr *unstructured.Unstructured, want vfTarget) bool {
	if cr == nil {
		return false
	}
	observed, _, _ := unstructured.NestedInt64(cr.Object, "status", statuscontract.FieldObservedGeneration)
	if status, _, _ := framework.Condition(cr, statuscontract.Ready); status != "True" || observed != cr.GetGeneration() {
		return false
	}
	list, _, _ := unstructured.NestedSlice(cr.Object, "status", statuscontract.FieldValuesFrom)
	for _, item := range list {
		if m, _ := item.(map[string]any); m["name"] == want.source && m["resourceVersion"] == want.rv {
			return true
		}
	}
	return false
}

// mustApply waits until every CR of names reached its target, status and Deployment, and
// returns when the last did; it fails the test after 10 minutes, saying how far they got.
func (tr *vfTracker) mustApply(t *testing.T, what string, names []string) time.Time {
	deadline := time.After(10 * time.Minute)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		tr.mu.Lock()
		var last time.Time
		done := 0
		for _, n := range names {
			a, ok1 := tr.applied[n]
			d, ok2 := tr.deployed[n]
			r, ok3 := tr.rolled[n]
			if ok1 && ok2 && ok3 {
				done++
				last = latest(last, a, d, r)
			}
		}
		tr.mu.Unlock()
		if done == len(names) {
			return last
		}
		select {
		case <-tr.changed:
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s: %d of %d CRs applied after 10 minutes", what, done, len(names))
		}
	}
}

func latest(ts ...time.Time) time.Time {
	return slices.MaxFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
}

// latencies are, for each CR of names, the time from its change to its status saying it was
// applied (for the stock operator, none), to its Deployment showing it, and to the
// Deployment's controller having seen it.
func (tr *vfTracker) latencies(names []string) (applied, deployed, rolled []time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, n := range names {
		since := tr.want[n].since
		if a, ok := tr.applied[n]; ok && tr.want[n].source != "" {
			applied = append(applied, max(0, a.Sub(since)))
		}
		if d, ok := tr.deployed[n]; ok {
			deployed = append(deployed, max(0, d.Sub(since)))
		}
		if r, ok := tr.rolled[n]; ok {
			rolled = append(rolled, max(0, r.Sub(since)))
		}
	}
	return applied, deployed, rolled
}

func (tr *vfTracker) waitedCount() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.waited)
}

func (tr *vfTracker) resetWaited() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.waited = map[string]bool{}
}

// writeValuesFromReport writes valuesfrom.md to dir from valuesfrom.json beside it, where r
// replaces the run at the same number of CRs and the others stay.
func writeValuesFromReport(dir string, r stored) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "valuesfrom.json")
	var runs []stored
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if err := json.Unmarshal(data, &runs); err != nil {
			return err
		}
	}
	runs = slices.DeleteFunc(runs, func(o stored) bool { return o.N == r.N })
	runs = append(runs, r)
	slices.SortFunc(runs, func(a, b stored) int { return cmp.Compare(a.N, b.N) })
	if data, err = json.MarshalIndent(runs, "", "  "); err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "valuesfrom.md"), []byte(valuesFromReport(runs)), 0o644)
}

// valuesFromReport is valuesfrom.md of runs.
func valuesFromReport(runs []stored) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# spec.valuesFrom: source edits and memory\n\n"+
		"Measured by `make bench-valuesfrom` (TestValuesFrom in test/bench; `make bench-quick` runs it at 10 CRs) on %s: "+
		"Memcached CRs of size 0 (no pods) taking their values from Secrets, this operator's pod (manager + sidecar) "+
		"with the arguments of config/default. *Applied* is, for each CR, from the edit of its source to its "+
		"status.valuesFrom naming the source's new version with Ready True at the CR's generation; *Deployment* to "+
		"its Deployment showing the new value, and *seen by its controller* to the Deployment's status.observedGeneration "+
		"reaching it as well (kube-controller-manager's part, which Ready waits for). The value edited is the pods' memory limit (resources.limits.memory). The goals (p95 ≤ 10 s; memory within 5 MiB with the unrelated Secrets) "+
		"are the report's, not the test's.\n\n", host)
	for _, r := range runs {
		f := r.Figures
		fmt.Fprintf(&b, "## N = %d CRs\n\nMeasured %s: `WARPDRIVE_BENCH_VALUESFROM_CRS=%d WARPDRIVE_BENCH_VALUESFROM_EDITS=%.0f "+
			"WARPDRIVE_BENCH_VALUESFROM_SECRETS=%.0f`.\n\n", r.N, cmp.Or(r.Measured, "(date not recorded)"), r.N, f["edits"], f["unrelatedSecrets"])
		b.WriteString("| figure | p50 | p95 | max |\n|---|---|---|---|\n")
		lat := func(what, key string) {
			if f[key+"Max"] == 0 {
				fmt.Fprintf(&b, "| %s | - | - | - |\n", what)
				return
			}
			fmt.Fprintf(&b, "| %s | %s s | %s s | %s s |\n", what, figure(f[key+"P50"]), figure(f[key+"P95"]), figure(f[key+"Max"]))
		}
		lat(fmt.Sprintf("one Secret shared by the %d CRs, edited %.0f times: applied", r.N, f["edits"]), "shared")
		lat("  Deployment", "sharedDeploy")
		lat("  Deployment seen by its controller", "sharedRolled")
		lat(fmt.Sprintf("a Secret per CR, the %d edited at once: applied", r.N), "own")
		lat("  Deployment", "ownDeploy")
		lat("  Deployment seen by its controller", "ownRolled")
		lat(fmt.Sprintf("stock helm-operator (no valuesFrom): the limit edited in the %d CRs' specs at once: Deployment", r.N), "stockDeploy")
		lat("  Deployment seen by its controller", "stockRolled")
		b.WriteString("\n| figure | value |\n|---|---|\n")
		val := func(what, unit string, v float64) {
			if v == 0 {
				fmt.Fprintf(&b, "| %s | - |\n", what)
				return
			}
			fmt.Fprintf(&b, "| %s | %s %s |\n", what, figure(v), unit)
		}
		val("shared Secret: the slowest edit's last CR applied", "s", f["sharedAllMax"])
		val("Secret per CR: the edits made (16 writers)", "s", f["ownEditsS"])
		val("Secret per CR: first edit to last CR applied", "s", f["ownAllS"])
		val("stock: first spec edit to last Deployment showing it", "s", f["stockAllS"])
		// Zero is a figure here: no CR was seen waiting (the upgrade came first).
		fmt.Fprintf(&b, "| CRs seen Ready=False ValuesSourceChanged: shared edits / Secret per CR | %.0f / %.0f of %d |\n",
			f["sharedWaited"], f["ownWaited"], r.N)
		secrets := fmt.Sprintf("%.0f unrelated Secrets of %.0f KiB", f["unrelatedSecrets"], f["secretKiB"])
		for _, m := range []struct{ what, key string }{
			{"manager, fresh, steady, without the " + secrets, "memBase"},
			{"  the same manager once they were created", "memNoise"},
			{"  a fresh manager with them", "memNoiseRestart"},
		} {
			fmt.Fprintf(&b, "| %s: VmRSS / RssAnon / Go heap in use / free heap kept | %s / %s / %s / %s MiB |\n", m.what,
				figure(f[m.key+"RSS"]), figure(f[m.key+"Anon"]), figure(f[m.key+"Heap"]), figure(f[m.key+"Free"]))
		}
		if f["memBaseRSS"] > 0 {
			fmt.Fprintf(&b, "| VmRSS with them − without: same manager / fresh manager | %+.1f / %+.1f MiB |\n",
				f["memNoiseRSS"]-f["memBaseRSS"], f["memNoiseRestartRSS"]-f["memBaseRSS"])
		}
		val("  time to create them (32 writers)", "s", f["secretsCreateS"])
		val("etcd in use before them", "MiB", f["etcdBeforeMiB"])
		val("etcd in use after them", "MiB", f["etcdAfterMiB"])
		b.WriteString("\n")
	}
	b.WriteString("Memory is the manager's alone, each the median of 20 samples a second apart, read " +
		"70 s after its work queues emptied (two looks of the idle memory release): /proc/<pid>/status VmRSS and RssAnon, " +
		"go_memstats_heap_inuse_bytes, and the free heap kept (go_memstats_heap_idle_bytes less go_memstats_heap_released_bytes). The memory before the Secrets is a freshly started manager's after its start-up pass. " +
		"The stock helm-operator runs in its own stock configuration; it writes no status of the source's version, " +
		"so its figure is the Deployment's, to compare with this operator's Deployment rows. " +
		"etcd in use is etcd_mvcc_db_total_size_in_use_in_bytes, of the whole cluster.\n")
	return b.String()
}

// A run replaces the one at its number of CRs in valuesfrom.json and keeps the others, as
// results.json does: the quick run at 10 CRs does not erase the figures at 100.
func TestValuesFromReportKeepsOtherSizes(t *testing.T) {
	dir := t.TempDir()
	run := func(n int, when string, p95 float64) stored {
		return stored{Variant: vfVariant, N: n, Measured: when, Figures: map[string]float64{"sharedP50": 1, "sharedP95": p95, "sharedMax": p95}}
	}
	for _, r := range []stored{run(100, "day 1", 18), run(10, "day 2", 2), run(100, "day 3", 9)} {
		if err := writeValuesFromReport(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	report, err := os.ReadFile(filepath.Join(dir, "valuesfrom.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## N = 10 CRs\n\nMeasured day 2", "## N = 100 CRs\n\nMeasured day 3", "edited 0 times: applied | 1 s | 9 s | 9 s |"} {
		if !strings.Contains(string(report), want) {
			t.Errorf("valuesfrom.md lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(string(report), "day 1") {
		t.Errorf("valuesfrom.md still shows the replaced run:\n%s", report)
	}
}
