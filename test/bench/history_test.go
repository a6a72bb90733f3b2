package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/watchfile"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestHistoryFootprint measures what the release history costs etcd (make bench-history; make
// bench runs it too). WARPDRIVE_BENCH_HISTORY_CRS AppService CRs of 0 replicas (default 100)
// are created, then edited WARPDRIVE_BENCH_HISTORY_EDITS times each (default 10), one wave
// after the other, each edit a new CPU request of the pods (a Helm upgrade, a new revision),
// under:
//
//   - kubectl apply of the manifests the chart renders (the floor: no CR, no release record);
//   - the stock helm-operator, which keeps helm-operator-plugins' 10 revisions;
//   - this operator's pod (manager + sidecar) with --max-release-history at each of
//     WARPDRIVE_BENCH_HISTORY_LIMITS (default "10,5,3,2").
//
// Each variant runs alone, in a namespace of its own. After the creates, after the first edit
// wave and after the last, with the operator's work queues empty, it reads etcd directly
// (etcdGateway): the sizes, key and value, of the keys the variant writes (the CRs, the release
// records, the Deployments and Services), and of the rest of the namespace (the ReplicaSets the
// Deployment controller keeps, Events), summed by key, so that neither MVCC's old revisions nor
// free pages count; and, as a check of the whole database, etcd's size in use once compacted
// and defragmented, less the same at the variant's start. It also takes one release record
// apart (recordParts) and sizes the chart part that every revision of each chart of
// watches.yaml carries.
//
// The figures go to history.md in WARPDRIVE_BENCH_OUT; its sections other than those the test
// writes are kept. The goal (after the last edit, within 2x of kubectl apply) is the report's,
// never a failure.
func TestHistoryFootprint(t *testing.T) {
	s := loadSettings(t)
	hs := historySettings{
		crs:    intList(t, "WARPDRIVE_BENCH_HISTORY_CRS", "100")[0],
		edits:  intList(t, "WARPDRIVE_BENCH_HISTORY_EDITS", "10")[0],
		limits: intList(t, "WARPDRIVE_BENCH_HISTORY_LIMITS", "10,5,3,2"),
	}
	rep := historyReport{settings: hs, measured: measuredNow(), charts: chartParts(t)}
	for _, v := range historyVariants(hs.limits) {
		t.Logf("%s", v.name)
		run := footprint(t, hs, v)
		rep.runs = append(rep.runs, run)
		writeHistory(t, s, rep)
	}
}

type historySettings struct {
	crs, edits int
	limits     []int // this operator's --max-release-history, one run each
}

// historyVariant is one way of keeping the CRs' objects. start is nil for kubectl apply; it
// returns the metrics addresses of the processes whose work queues a reading waits for.
type historyVariant struct {
	name, ns string
	history  int // revisions kept per release; 0: no release
	start    func(t *testing.T) (metrics []string, stop func())
}

// stockHistory is the stock helm-operator's history: helm-operator-plugins' default, which its
// `run` command has no flag for.
const stockHistory = 10

func historyVariants(limits []int) []historyVariant {
	vs := []historyVariant{
		{name: floorName, ns: "history-kubectl"},
		{name: stockName, ns: "history-stock", history: stockHistory, start: func(t *testing.T) ([]string, func()) {
			stock, err := pickVariants("stock")
			if err != nil {
				t.Fatal(err)
			}
			_, _, addr, stop := stock[0].start(t, nil)
			return []string{addr}, stop
		}},
	}
	for _, h := range limits {
		vs = append(vs, historyVariant{
			name:    fmt.Sprintf("%s --max-release-history=%d", ourName, h),
			ns:      fmt.Sprintf("history-%d", h),
			history: h,
			start:   func(t *testing.T) ([]string, func()) { return startWithHistory(t, h) },
		})
	}
	return vs
}

// startWithHistory runs this operator's pod with the pod's command line and
// --max-release-history=history added last (the last one given wins). It is added here rather
// than through ProcessOptions.Flags: the history is what this bench measures, and
// framework.SuiteFlags lets no suite change it.
func startWithHistory(t *testing.T, history int) ([]string, func()) {
	mAddr, sAddr := freeAddr(t), freeAddr(t)
	o := framework.ProcessOptions{Name: fmt.Sprintf("bench-history-%d", history), MetricsAddr: mAddr}
	args, err := env.ManagerArgs(o)
	if err != nil {
		t.Fatal(err)
	}
	args = append(args, fmt.Sprintf("--max-release-history=%d", history))
	m, err := env.RunWithEnv(o.Name, framework.ManagerBinary(false), env.ManagerEnv(o), args...)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := env.StartSidecar(framework.ProcessOptions{Name: o.Name + "-sidecar", MetricsAddr: sAddr})
	if err != nil {
		m.Stop()
		t.Fatal(err)
	}
	return []string{mAddr, sAddr}, func() { sc.Stop(); m.Stop() }
}

// historyPoints are the moments each variant is read at: after the creates, the first edit
// wave and the last.
const historyPoints = 3

// historyRun is what one variant left in etcd at each point.
type historyRun struct {
	variant string
	history int
	at      [historyPoints]nsBytes
	record  *recordSize // one release record after the last edit; nil without releases
}

// nsBytes is what a namespace holds in etcd, in bytes (key and value) unless said otherwise.
type nsBytes struct {
	records, crs, objects float64 // the release records, the CRs, the Deployments and Services
	recordCount           float64
	rest                  float64 // every other key of the namespace
	dbGrowth              float64 // etcd in use after compaction and defrag, less at the start
}

// kept is what the variant itself writes: the CRs, their release records and the objects.
func (b nsBytes) kept() float64 { return b.records + b.crs + b.objects }

func footprint(t *testing.T, hs historySettings, v historyVariant) historyRun {
	ctx := context.Background()
	run := historyRun{variant: v.name, history: v.history}
	ns := v.ns
	deleteNamespace(t, ns) // left over by an interrupted run
	createNamespace(t, ns)
	defer deleteNamespace(t, ns)
	tr, err := newTracker(env.Config, ns, env.GVR(kind))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.stop()

	var metrics []string
	if v.start != nil {
		var stop func()
		metrics, stop = v.start(t)
		defer stop()
		time.Sleep(3 * time.Second) // caches synced before the CRs come
	}
	gw := etcdGateway{addr: etcdAddr}
	// The readings compact and defragment that etcd: it must be this cluster's
	// (WARPDRIVE_BENCH_ETCD), not another local cluster's.
	if !gw.has(t, "/registry/namespaces/"+ns) {
		t.Fatalf("the etcd at %s does not hold namespace %s: set WARPDRIVE_BENCH_ETCD to the cluster's", etcdAddr, ns)
	}
	base := gw.compactedInUse(t)

	// change makes edit e of every CR (0: the creates), and waits until every Deployment
	// shows it and the operator is quiet.
	dir := t.TempDir()
	change := func(e int) {
		cpu := historyCPU(e)
		if v.start == nil {
			values := map[string]any{"replicas": 0, "resources": map[string]any{"requests": map[string]any{"cpu": cpu, "memory": "64Mi"}}}
			path := filepath.Join(dir, fmt.Sprintf("edit-%d.yaml", e))
			if err := os.WriteFile(path, []byte(render(t, ns, hs.crs, values)), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := env.Kubectl("apply", "-n", ns, "-f", path); err != nil {
				t.Fatal(err)
			}
		} else if e == 0 {
			parallel(hs.crs, func(i int) error { return env.Client.Create(ctx, appService(ns, i, 0)) })
		} else {
			patch := fmt.Sprintf(`{"spec":{"resources":{"requests":{"cpu":%q}}}}`, cpu)
			parallel(hs.crs, func(i int) error {
				return env.Client.Patch(ctx, appService(ns, i, -1), client.RawPatch(types.MergePatchType, []byte(patch)))
			})
		}
		mustWait(t, tr, fmt.Sprintf("%s: edit %d", v.name, e), hs.crs, tr.withCPU(cpu))
	}
	read := func(point int) {
		for _, addr := range metrics {
			waitQuiet(t, addr)
		}
		time.Sleep(historySettle)
		b := gw.namespaceBytes(t, ns)
		b.dbGrowth = gw.compactedInUse(t) - base
		run.at[point] = b
		n := float64(hs.crs)
		t.Logf("%s, point %d: %.0f B per CR kept (records %.0f, %.2f per CR; CRs %.0f; objects %.0f), rest %.0f, db growth %.0f",
			v.name, point, b.kept()/n, b.records/n, b.recordCount/n, b.crs/n, b.objects/n, b.rest/n, b.dbGrowth/n)
	}

	change(0)
	read(0)
	for e := 1; e <= hs.edits; e++ {
		change(e)
		if e == 1 {
			read(1)
		}
	}
	read(2)
	if v.history > 0 {
		run.record = latestRecord(t, gw, ns, name(0))
	}
	return run
}

// historySettle lets the last status writes of a wave land once the work queues are empty.
const historySettle = 5 * time.Second

// historyCPU is the pods' CPU request after edit e (0: the chart's default).
func historyCPU(e int) string { return fmt.Sprintf("%dm", 50+e) }

// etcdGateway reads the local cluster's etcd through its JSON gateway (the v3 API over HTTP,
// on the client port), so that the bench needs no etcd client of its own. Integers are
// strings on the gateway, and keys and values base64.
type etcdGateway struct{ addr string }

func (g etcdGateway) call(path string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.Post("http://"+g.addr+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer r.Body.Close()
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	if r.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, r.Status, data)
	}
	if resp == nil {
		return nil
	}
	return json.Unmarshal(data, resp)
}

type etcdKV struct {
	Key   []byte `json:"key"`
	Value []byte `json:"value"`
}

// scan calls f with every key under prefix and its value, a page at a time, and returns the
// store's revision.
func (g etcdGateway) scan(prefix string, f func(kv etcdKV)) (int64, error) {
	end := []byte(prefix)
	end[len(end)-1]++ // the prefix's range: every key that starts with it
	from := []byte(prefix)
	for {
		var resp struct {
			Header struct {
				Revision string `json:"revision"`
			} `json:"header"`
			Kvs  []etcdKV `json:"kvs"`
			More bool     `json:"more"`
		}
		if err := g.call("/v3/kv/range", map[string]any{"key": from, "range_end": end, "limit": 500}, &resp); err != nil {
			return 0, err
		}
		for _, kv := range resp.Kvs {
			f(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return strconv.ParseInt(resp.Header.Revision, 10, 64)
		}
		from = append(slices.Clone(resp.Kvs[len(resp.Kvs)-1].Key), 0)
	}
}

// has reports whether etcd holds key.
func (g etcdGateway) has(t *testing.T, key string) bool {
	found := false
	if _, err := g.scan(key, func(kv etcdKV) { found = found || string(kv.Key) == key }); err != nil {
		t.Fatal(err)
	}
	return found
}

// namespaceBytes sums the keys of namespace ns, by what they hold. The apiserver keeps an
// object of a namespace under /registry/<resource>/<namespace>/<name> (Services under
// /registry/services/specs/...), a custom resource under /registry/<group>/<plural>/....
func (g etcdGateway) namespaceBytes(t *testing.T, ns string) nsBytes {
	gvr := env.GVR(kind)
	crs := "/registry/" + gvr.Group + "/" + gvr.Resource + "/" + ns + "/"
	records := "/registry/secrets/" + ns + "/sh.helm.release.v1."
	objects := []string{"/registry/deployments/" + ns + "/", "/registry/services/specs/" + ns + "/"}
	var b nsBytes
	_, err := g.scan("/registry/", func(kv etcdKV) {
		key, size := string(kv.Key), float64(len(kv.Key)+len(kv.Value))
		switch {
		case strings.HasPrefix(key, records):
			b.records += size
			b.recordCount++
		case strings.HasPrefix(key, crs):
			b.crs += size
		case slices.ContainsFunc(objects, func(p string) bool { return strings.HasPrefix(key, p) }):
			b.objects += size
		case strings.Contains(key, "/"+ns+"/"):
			b.rest += size
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compactedInUse compacts etcd to its current revision, defragments it, and returns its size
// in use: without the old revisions MVCC keeps until the apiserver's next compaction (every
// 5 minutes) and the pages they leave free.
func (g etcdGateway) compactedInUse(t *testing.T) float64 {
	rev, err := g.scan("/registry/namespaces/default", func(etcdKV) {})
	if err != nil {
		t.Fatal(err)
	}
	err = g.call("/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
	if err != nil && !strings.Contains(err.Error(), "required revision has been compacted") {
		t.Fatal(err)
	}
	if err := g.call("/v3/maintenance/defragment", map[string]any{}, nil); err != nil {
		t.Fatal(err)
	}
	inUse, err := framework.Metric(g.addr, "etcd_mvcc_db_total_size_in_use_in_bytes")
	if err != nil {
		t.Fatal(err)
	}
	return inUse
}

// recordSize is one release record taken apart: its parts as JSON and each gzipped alone
// (Helm gzips the whole; the parts say what weighs), the whole gzipped, as base64 (the
// Secret's data), and the Secret as etcd stores it (key and value).
type recordSize struct {
	name            string
	parts           []recordPart
	json, gzip, b64 int
	stored          int
	meta            int // the Secret's labels and annotations, keys and values
}

type recordPart struct {
	name       string
	json, gzip int
}

// latestRecord is the newest release record of release in ns, taken apart.
func latestRecord(t *testing.T, gw etcdGateway, ns, release string) *recordSize {
	list, err := env.Clientset.CoreV1().Secrets(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("release records of %s/%s: %d, %v", ns, release, len(list.Items), err)
	}
	version := func(s corev1.Secret) int { v, _ := strconv.Atoi(s.Labels["version"]); return v }
	s := slices.MaxFunc(list.Items, func(a, b corev1.Secret) int { return version(a) - version(b) })
	r, err := recordParts(s)
	if err != nil {
		t.Fatal(err)
	}
	key := "/registry/secrets/" + ns + "/" + s.Name
	if _, err := gw.scan(key, func(kv etcdKV) {
		if string(kv.Key) == key {
			r.stored = len(kv.Key) + len(kv.Value)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return r
}

// recordParts takes a release record Secret apart: Helm's Secret driver stores the release as
// JSON, gzipped, then base64 in data.release.
func recordParts(s corev1.Secret) (*recordSize, error) {
	gz, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, err
	}
	whole, err := io.ReadAll(zr)
	if err != nil {
		return nil, err
	}
	var rel map[string]json.RawMessage
	if err := json.Unmarshal(whole, &rel); err != nil {
		return nil, err
	}
	var chrt map[string]json.RawMessage
	if err := json.Unmarshal(rel["chart"], &chrt); err != nil {
		return nil, err
	}
	r := &recordSize{name: s.Name, json: len(whole), gzip: len(gz), b64: len(s.Data["release"])}
	for k, v := range s.Labels {
		r.meta += len(k) + len(v)
	}
	for k, v := range s.Annotations {
		r.meta += len(k) + len(v)
	}
	add := func(name string, data []byte) {
		r.parts = append(r.parts, recordPart{name: name, json: len(data), gzip: gzipSize(data)})
	}
	// The chart's parts first, biggest first, then the release's own.
	for _, k := range sortedBySize(chrt) {
		add("chart."+k, chrt[k])
	}
	delete(rel, "chart")
	for _, k := range sortedBySize(rel) {
		add(k, rel[k])
	}
	return r, nil
}

func sortedBySize(m map[string]json.RawMessage) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if d := len(m[b]) - len(m[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	return keys
}

// gzipSize is the size of data gzipped as Helm gzips a release (best compression).
func gzipSize(data []byte) int {
	var buf bytes.Buffer
	w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = w.Write(data)
	_ = w.Close()
	return buf.Len()
}

// chartSize is the part of every release record that is the chart of a kind: its templates,
// values, schema, metadata and files, as Helm's release JSON holds them (the files' contents
// base64 inside the JSON).
type chartSize struct {
	kind, chart string
	json, gzip  int
}

// chartParts sizes the chart of every kind of watches.yaml.
func chartParts(t *testing.T) []chartSize {
	watches, err := watchfile.Load(filepath.Join(env.Root, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []chartSize
	for _, w := range watches {
		c, err := loader.Load(filepath.Join(env.Root, w.Chart))
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, chartSize{kind: w.Kind, chart: w.Chart, json: len(data), gzip: gzipSize(data)})
	}
	return out
}

// historyReport is history.md's figures.
type historyReport struct {
	settings historySettings
	measured string
	runs     []historyRun
	charts   []chartSize
}

// historyFile is the report's name in WARPDRIVE_BENCH_OUT; historyGenerated the titles of the
// sections the test writes. Any other section of the file (a reading of the figures) is kept,
// after them.
const historyFile = "history.md"

var historyGenerated = []string{"Bytes per CR", "One revision", "The chart in every revision"}

func writeHistory(t *testing.T, s settings, rep historyReport) {
	var kept strings.Builder
	for _, sec := range readSections(t, s, historyFile) {
		if !slices.Contains(historyGenerated, sec.heading) {
			kept.WriteString("\n" + sec.text)
		}
	}
	writeTune(t, s, historyFile, rep.String()+kept.String())
}

func (rep historyReport) String() string {
	hs := rep.settings
	var b strings.Builder
	limits := make([]string, len(hs.limits))
	for i, l := range hs.limits {
		limits[i] = strconv.Itoa(l)
	}
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Release history: etcd bytes per CR\n\n"+
		"Written by `make bench-history` (TestHistoryFootprint in test/bench) on %s, measured %s, with "+
		"`WARPDRIVE_BENCH_HISTORY_CRS=%d WARPDRIVE_BENCH_HISTORY_EDITS=%d WARPDRIVE_BENCH_HISTORY_LIMITS=%s`: "+
		"%d AppService CRs of 0 replicas created, then edited %d times each, one wave after the other, each edit a new "+
		"CPU request of the pods (a Helm upgrade: a new revision). Each variant alone, in a namespace of its own: "+
		"`kubectl apply` of the manifests the chart renders, the stock helm-operator (helm-operator-plugins' %d revisions) "+
		"and this operator's pod with each `--max-release-history`, every other flag the pod's (config/default). "+
		"Each reading waits for every Deployment to show the edit and for the operator's work queues to be empty.\n\n",
		host, rep.measured, hs.crs, hs.edits, strings.Join(limits, ","), hs.crs, hs.edits, stockHistory)

	kib := func(v float64) string { return figure(v/float64(hs.crs)/1024) + " KiB" }
	floor := slices.IndexFunc(rep.runs, func(r historyRun) bool { return r.variant == floorName })
	b.WriteString("## Bytes per CR\n\n")
	fmt.Fprintf(&b, "What each variant keeps in etcd, per CR: its CR, its release records, its Deployment and Service, "+
		"keys and values as etcd holds them (read with a range over /registry, so neither the old revisions MVCC keeps "+
		"until a compaction nor free pages count). The goal: after the %d edits, within 2x of `kubectl apply`.\n\n", hs.edits)
	fmt.Fprintf(&b, "| variant | revisions kept | after the creates | after 1 edit | after %d edits | ÷ kubectl apply, after %d edits |\n"+
		"|---|---|---|---|---|---|\n", hs.edits, hs.edits)
	for _, r := range rep.runs {
		kept, ratioFloor := "-", "-"
		if r.history > 0 {
			kept = strconv.Itoa(r.history)
		}
		if floor >= 0 {
			ratioFloor = ratio(r.at[2].kept(), rep.runs[floor].at[2].kept())
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.variant, kept, kib(r.at[0].kept()), kib(r.at[1].kept()), kib(r.at[2].kept()), ratioFloor)
	}
	fmt.Fprintf(&b, "\nAfter the %d edits, what it is made of, per CR; beside it the rest of the namespace, which is the "+
		"same whatever deploys the objects (the ReplicaSets the Deployment controller keeps, 10 old ones by its "+
		"revisionHistoryLimit, Events, the namespace's ConfigMap and ServiceAccount), and the growth of etcd's whole "+
		"database, compacted and defragmented before each reading, from the variant's start:\n\n", hs.edits)
	b.WriteString("| variant | release records | records per CR | CR | Deployment + Service | rest of the namespace | etcd in use, compacted: growth after the creates / 1 edit / all |\n" +
		"|---|---|---|---|---|---|---|\n")
	for _, r := range rep.runs {
		a := r.at[2]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s / %s / %s |\n", r.variant, kib(a.records),
			figure(a.recordCount/float64(hs.crs)), kib(a.crs), kib(a.objects), kib(a.rest),
			kib(r.at[0].dbGrowth), kib(r.at[1].dbGrowth), kib(a.dbGrowth))
	}

	b.WriteString("\n## One revision\n\n")
	for _, r := range rep.runs {
		rec := r.record
		if rec == nil {
			continue
		}
		fmt.Fprintf(&b, "**%s**: `%s`, the newest record of its release after the last edit. Helm's Secret driver "+
			"stores the release as JSON (%d B), gzipped (%d B), then base64 (%d B) in the Secret's data.release; "+
			"etcd holds the Secret, key and value, in %d B, of which %d B are its labels and annotations.\n\n",
			r.variant, rec.name, rec.json, rec.gzip, rec.b64, rec.stored, rec.meta)
	}
	if i := slices.IndexFunc(rep.runs, func(r historyRun) bool { return r.record != nil && r.variant != stockName }); i >= 0 {
		rec := rep.runs[i].record
		fmt.Fprintf(&b, "Its parts (%s), each as JSON and gzipped alone: the whole gzips better than its parts, "+
			"so the second column says what weighs rather than adding up to %d B. The chart's templates, schema and "+
			"files are base64 inside the JSON, which gzips less well than their text.\n\n| part | JSON | gzipped alone |\n|---|---|---|\n",
			rep.runs[i].variant, rec.gzip)
		for _, p := range rec.parts {
			fmt.Fprintf(&b, "| %s | %d B | %d B |\n", p.name, p.json, p.gzip)
		}
	}

	b.WriteString("\n## The chart in every revision\n\n" +
		"Every revision carries its release's whole chart, whatever changed. The chart part of a record for each kind of " +
		"watches.yaml, loaded as the operator loads it (the benchmark above uses AppService's); its base64 in etcd is 4/3 " +
		"of the gzipped size:\n\n| kind | chart | JSON | gzipped | base64 |\n|---|---|---|---|---|\n")
	for _, c := range rep.charts {
		fmt.Fprintf(&b, "| %s | %s | %d B | %d B | %d B |\n", c.kind, c.chart, c.json, c.gzip, (c.gzip+2)/3*4)
	}
	return b.String()
}
