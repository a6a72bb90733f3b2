package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestPoolStatusLatency measures the sidecar's pool bookkeeping (sidecar/internal/poolstatus): the
// time from a claim's creation to its pool's status.pool counting it, p50 and p99, with
// WARPDRIVE_BENCH_POOL_CLAIMS claims (default 10,000) across 10 pools, and the sidecar's
// RSS holding them. Two phases:
//
//   - fill: the claims created as fast as the apiserver takes them (one writer per pool,
//     ten in parallel), each timed;
//   - steady: with all of them in place, 10 more claims per pool at 2 per second per pool.
//
// A claim's creation time is when the apiserver answered its create. Within a pool the
// claims are created one after the other, so the k-th is counted exactly when the pool's
// status.pool.claims.total first reaches k; that moment is when the status, watched here,
// first showed it.
//
// Run with: WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=.cluster/kubeconfig \
// go test -count=1 -timeout 60m -v -run TestPoolStatusLatency ./test/bench/
// The result is one markdown table row, printed and appended to docs/bench/pool.md.
func TestPoolStatusLatency(t *testing.T) {
	needCluster(t)
	const pools, steadyPerPool = 10, 10
	claims := 10000
	if v := os.Getenv("WARPDRIVE_BENCH_POOL_CLAIMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < pools {
			t.Fatalf("WARPDRIVE_BENCH_POOL_CLAIMS=%q: want a number of claims, at least %d", v, pools)
		}
		claims = n
	}
	perPool := claims / pools
	ctx := context.Background()

	// The pools live in one namespace, their claims in ten others.
	ns := fmt.Sprintf("bench-pool-%d", time.Now().Unix()%100000)
	claimNS := make([]string, pools)
	for i := range claimNS {
		claimNS[i] = fmt.Sprintf("%s-c%d", ns, i)
	}
	for _, n := range append([]string{ns}, claimNS...) {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}

	op, err := env.StartOperator(framework.ProcessOptions{Name: "bench-pool-manager"}, framework.ProcessOptions{Name: "bench-pool-sidecar"})
	if err != nil {
		t.Fatal(err)
	}
	manager, sidecar := op.Manager, op.Sidecar
	defer func() {
		poolBenchCleanup(t, ns, claimNS)
		op.Stop()
	}()

	gvr := env.GVR("WarpdrivePool")
	dc, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < pools; p++ {
		pool := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gvr.GroupVersion().String(), "kind": "WarpdrivePool",
			"metadata": map[string]any{"name": poolBenchName(p), "namespace": ns},
			"spec":     map[string]any{"capacity": "100Ti", "replicas": int64(1), "storageClassName": ns + "-" + poolBenchName(p)},
		}}
		if _, err := dc.Resource(gvr).Namespace(ns).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	obs := newPoolObserver(t, dc.Resource(gvr).Namespace(ns))
	defer obs.stop()
	if !obs.waitTotals(pools, 0, 5*time.Minute) {
		t.Fatalf("the pools' status.pool did not appear: %v", obs.totals())
	}

	// A fast client: 10,000 creates at the default 5 QPS would take half an hour.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	create := func(p, k int, pace time.Duration, created []time.Time) {
		for i := 0; i < len(created); i++ {
			class := ns + "-" + poolBenchName(p)
			c := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d-%05d", p, k+i), Namespace: claimNS[(p+k+i)%pools]},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: &class,
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			for attempt := 1; ; attempt++ {
				_, err := cs.CoreV1().PersistentVolumeClaims(c.Namespace).Create(ctx, c, metav1.CreateOptions{})
				if err == nil {
					break
				}
				if apierrors.IsAlreadyExists(err) || attempt == 20 {
					t.Errorf("creating claim %s: %v", c.Name, err) // its pool never counts it: waitTotals fails
					return
				}
				time.Sleep(100 * time.Millisecond) // throttled or timed out: the same claim again
			}
			created[i] = time.Now()
			if pace > 0 {
				time.Sleep(pace)
			}
		}
	}

	rss0, _, err := rssMiB(sidecar.Pid())
	if err != nil {
		t.Fatal(err)
	}

	// Phase 1: fill.
	fillCreated := make([][]time.Time, pools)
	cpu0 := processes{sidecar.Pid()}.cpu()
	mcpu0 := processes{manager.Pid()}.cpu()
	t0 := time.Now()
	var wg sync.WaitGroup
	for p := 0; p < pools; p++ {
		fillCreated[p] = make([]time.Time, perPool)
		wg.Add(1)
		go func(p int) { defer wg.Done(); create(p, 0, 0, fillCreated[p]) }(p)
	}
	wg.Wait()
	fillSeconds := time.Since(t0).Seconds()
	if !obs.waitTotals(pools, perPool, 10*time.Minute) {
		t.Fatalf("the pools do not count all claims: %v", obs.totals())
	}
	sidecarCPU := processes{sidecar.Pid()}.cpu() - cpu0
	managerCPU := processes{manager.Pid()}.cpu() - mcpu0
	fill := obs.latencies(fillCreated, 0)

	// Phase 2: steady, on top of the full books.
	steadyCreated := make([][]time.Time, pools)
	for p := 0; p < pools; p++ {
		steadyCreated[p] = make([]time.Time, steadyPerPool)
		wg.Add(1)
		go func(p int) { defer wg.Done(); create(p, perPool, 500*time.Millisecond, steadyCreated[p]) }(p)
	}
	wg.Wait()
	if !obs.waitTotals(pools, perPool+steadyPerPool, 5*time.Minute) {
		t.Fatalf("the pools do not count all claims: %v", obs.totals())
	}
	steady := obs.latencies(steadyCreated, perPool)

	rss, peak, err := rssMiB(sidecar.Pid())
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	row := fmt.Sprintf("| %s | %s, %d CPUs | %d | %d | %.0f/s | %.3f s | %.3f s | %.3f s | %.3f s | %.1f MiB | %.1f MiB | %.1f MiB | %.1f | %.1f |",
		time.Now().UTC().Format("2006-01-02"), host, runtime.NumCPU(), pools*(perPool+steadyPerPool), pools,
		float64(pools*perPool)/fillSeconds,
		framework.Percentile(fill, 50), framework.Percentile(fill, 99), framework.Percentile(steady, 50), framework.Percentile(steady, 99),
		rss0, rss, peak, sidecarCPU, managerCPU)
	fmt.Println(poolBenchHeader + row)
	if err := appendPoolBench(row); err != nil {
		t.Fatal(err)
	}
}

const poolBenchHeader = `| date | machine | claims | pools | fill rate | fill p50 | fill p99 | steady p50 | steady p99 | sidecar RSS, no claims | sidecar RSS | sidecar peak RSS | sidecar CPU-s (fill) | manager CPU-s (fill) |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
`

// appendPoolBench appends a result row to docs/bench/pool.md, which it starts if needed.
func appendPoolBench(row string) error {
	path := filepath.Join(framework.RepoRoot(), "docs", "bench", "pool.md")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(path); os.IsNotExist(err) {
		intro := "# Pool bookkeeping: claim to status latency and sidecar memory\n\n" +
			"`TestPoolStatusLatency` (test/bench/pool_test.go): the time from a PersistentVolumeClaim's creation " +
			"(the apiserver's answer) to its WarpdrivePool's status.pool counting it, seen through a watch, with the " +
			"claims spread over 10 pools and 10 namespaces. fill: all claims created as fast as the apiserver takes them, " +
			"one writer per pool; steady: 10 more per pool at 2/s per pool on top of them. RSS is the sidecar's VmRSS " +
			"once the pools are ready (no claims yet), then its VmRSS and VmHWM after both phases. CPU-s are the processes' " +
			"CPU seconds during the fill (the manager skips status-only updates, so status writes cost it little). " +
			"Goals: p99 under 1 s, RSS under 100 MiB.\n\n" +
			"Run: `WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=.cluster/kubeconfig go test -count=1 -timeout 60m -v " +
			"-run TestPoolStatusLatency ./test/bench/`\n\n" + poolBenchHeader
		if err := os.WriteFile(path, []byte(intro), 0o644); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(row + "\n")
	return err
}

func poolBenchName(p int) string { return fmt.Sprintf("pool-%02d", p) }

// poolObserver watches the pools and records, for each, when its status.pool.claims.total
// first reached each value.
type poolObserver struct {
	mu      sync.Mutex
	reached map[string][]poolSighting // pool -> sightings, in time order
	changed chan struct{}
	w       watch.Interface
	done    chan struct{}
}

type poolSighting struct {
	at    time.Time
	total int64
}

func newPoolObserver(t *testing.T, ri dynamic.ResourceInterface) *poolObserver {
	w, err := ri.Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := &poolObserver{reached: map[string][]poolSighting{}, changed: make(chan struct{}, 1), w: w, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			total, found, _ := unstructured.NestedInt64(u.Object, "status", "pool", "claims", "total")
			if !found {
				continue
			}
			now := time.Now()
			o.mu.Lock()
			s := o.reached[u.GetName()]
			if len(s) == 0 || total > s[len(s)-1].total {
				o.reached[u.GetName()] = append(s, poolSighting{at: now, total: total})
			}
			o.mu.Unlock()
			select {
			case o.changed <- struct{}{}:
			default:
			}
		}
	}()
	return o
}

func (o *poolObserver) stop() { o.w.Stop(); <-o.done }

func (o *poolObserver) totals() map[string]int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]int64{}
	for name, s := range o.reached {
		out[name] = s[len(s)-1].total
	}
	return out
}

// waitTotals waits until each of the pools' status counts at least want claims.
func (o *poolObserver) waitTotals(pools, want int, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		totals := o.totals()
		ok := len(totals) == pools
		for _, n := range totals {
			ok = ok && n >= int64(want)
		}
		if ok {
			return true
		}
		select {
		case <-o.changed:
		case <-deadline:
			return false
		}
	}
}

// latencies are, for each claim, the time from its creation to the first status of its
// pool counting it: the k-th claim of pool p (after skip earlier ones) is counted when the
// total first reaches skip+k+1.
func (o *poolObserver) latencies(created [][]time.Time, skip int) []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []time.Duration
	for p, times := range created {
		s := o.reached[poolBenchName(p)]
		for k, at := range times {
			want := int64(skip + k + 1)
			i := sort.Search(len(s), func(i int) bool { return s[i].total >= want })
			if i == len(s) {
				continue // never seen: waitTotals made sure it was
			}
			d := s[i].at.Sub(at)
			if d < 0 {
				d = 0 // the status watch beat the create's answer
			}
			out = append(out, d)
		}
	}
	return out
}

// poolBenchCleanup deletes the pools (their releases uninstall while the manager runs) and
// the namespaces, with their claims, and waits until they are gone, so that the next
// benchmark starts on a quiet cluster.
func poolBenchCleanup(t *testing.T, ns string, claimNS []string) {
	ctx := context.Background()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(env.GVR("WarpdrivePool").GroupVersion().WithKind("WarpdrivePoolList"))
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err == nil {
		for i := range list.Items {
			_ = env.Client.Delete(ctx, &list.Items[i])
		}
	}
	_ = framework.Poll(ctx, 5*time.Minute, func(ctx context.Context) error {
		if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil || len(list.Items) > 0 {
			return fmt.Errorf("%d pools left (%v)", len(list.Items), err)
		}
		return nil
	})
	for _, n := range append([]string{ns}, claimNS...) {
		_ = env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	err := framework.Poll(ctx, 15*time.Minute, func(ctx context.Context) error {
		for _, n := range append([]string{ns}, claimNS...) {
			if err := env.Client.Get(ctx, client.ObjectKey{Name: n}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (%v)", n, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Logf("cleanup: %v", err)
	}
}
