package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/gen/addkind"
	"transwarp.io/tos/warpdrive-operator/internal/operator/values"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

var webInfoGVK = schema.GroupVersionKind{Group: "web.example.com", Version: "v1alpha1", Kind: "WebInfo"}

// openSpecShape is one way to fill the CRs of the measurement: count CRs, each with
// spec.ingress.annotations set to note(size). The inferred schema leaves that field open, and
// the chart renders it only with ingress.enabled, which the sample leaves false: the releases
// deploy, and what the manager holds of each CR is as large as the note makes its spec.
type openSpecShape struct {
	name  string
	count int
	note  func(size int) any
	// refused: the spec holds more values than the manager's --max-spec-values, and the CRs
	// are refused (Stalled SpecTooLarge) instead of deployed.
	refused bool
}

// emptyObjects is a note of n empty objects.
func emptyObjects(n int) any {
	list := make([]any, n)
	for i := range list {
		list[i] = map[string]any{}
	}
	return map[string]any{"note": list}
}

// openSpecShapes are measured one after the other, on one manager. small is the per-CR
// baseline: the same kind, release and path through the manager, with a spec of a few hundred
// bytes. "one string" is as large as the apiserver admits in the shape that costs least in a
// Go heap per byte of JSON (about 1 byte per byte); a list of empty objects (3 bytes each in
// JSON, a map of its own each once decoded) is one of those that cost most, measured at the
// manager's bound on a spec's values and as large as the apiserver admits.
var openSpecShapes = []openSpecShape{
	{"small", 50, func(int) any { return map[string]any{"note": uniqueHex(16)} }, false},
	{"one string", 50, func(size int) any { return map[string]any{"note": uniqueHex(size)} }, false},
	// The most values a spec may hold for the manager to deploy it (--max-spec-values, less
	// room for the sample's own values): the largest cost per CR a tenant can give the manager.
	{"empty objects at the bound", 20, func(int) any { return emptyObjects(values.DefaultMaxSpecValues - 1000) }, false},
	// Before the bound, each of these cost 32 MiB of heap, and 5 took the manager to a peak
	// of 1,483 MiB. Now refused, and held without their spec.
	{"empty objects over the bound", 5, func(size int) any { return emptyObjects(size / 3) }, true},
}

// openSpecHeadroom is how much smaller than the largest CR the apiserver admits the large CRs
// are: room for what the manager adds to each (its finalizer, status and their managed
// fields), without which its writes to the CR would be refused as too large.
const openSpecHeadroom = 16 << 10

// openSpecIdle is how long the manager is left idle before its RSS is read: past the Go
// runtime's forced collection (every 2 minutes) and its own idle memory releases
// (--idle-memory-release, 30s), so that the RSS and the heap in use are what it holds
// rather than what a burst of work left. The refused CRs' retries (with back-off) can keep
// the idle release from running; the forced collection still runs.
const openSpecIdle = 130 * time.Second

// The manager's memory with the largest CRs a tenant may create of a kind whose spec is open,
// as make add-kind makes of a chart without values.schema.json (issue: where a schema stays
// open, the memory per CR of the largest admitted spec is measured and stated). A spec there
// is bounded only by the apiserver: the test finds the largest CR it admits by creating ever
// larger ones, then measures the manager's RSS (VmRSS) as it takes CRs of each of
// openSpecShapes, and logs the MiB per CR. The figures are a measurement, for
// docs/security.md's "Open specs"; the test checks only that every CR is admitted and
// deployed (refused, for the shape over --max-spec-values) and that the manager survives. It is not part of make test; run it with
//
//	make build cluster-up
//	WARPDRIVE_SECURITY_MEASURE=1 WARPDRIVE_KUBECONFIG=$PWD/.cluster/kubeconfig \
//		go test -count=1 -timeout 40m -v -run TestManagerMemoryWithLargestOpenCRs ./test/e2e/
func TestManagerMemoryWithLargestOpenCRs(t *testing.T) {
	if os.Getenv("WARPDRIVE_SECURITY_MEASURE") == "" {
		t.Skip("a measurement: WARPDRIVE_SECURITY_MEASURE=1 runs it")
	}
	if os.Getenv("WARPDRIVE_E2E_OPERATOR") == "stock" {
		t.Skip("make add-kind makes kinds for this operator's manager")
	}
	ctx := context.Background()
	dir := repoCopy(t)
	_, err := addkind.Add(addkind.Options{Root: dir, Chart: filepath.Join(env.Root, "internal", "gen", "addkind", "testdata", "webinfo"),
		Kind: webInfoGVK.Kind, Group: webInfoGVK.Group, Version: webInfoGVK.Version, Manifests: manifests})
	if err != nil {
		t.Fatalf("make add-kind webinfo: %v", err)
	}
	installGeneratedCRD(t, dir, webInfoGVK.Group, addkind.Plural(webInfoGVK.Kind))
	if env.Impersonating() {
		grantGeneratedRole(t, dir)
	}
	c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	sample := generatedSample(t, dir, webInfoGVK.Kind)
	newWebInfo := func(ns, name string, note any) *unstructured.Unstructured {
		cr := sample.DeepCopy()
		cr.SetNamespace(ns)
		cr.SetName(name)
		if err := unstructured.SetNestedField(cr.Object, note, "spec", "ingress", "annotations"); err != nil {
			t.Fatal(err)
		}
		return cr
	}
	// The namespaces before the manager, so that their cleanups run after it has removed its
	// finalizers from the CRs (t.Cleanup runs last registered first).
	probeNS := env.Namespace(t)
	namespaces := make([]string, len(openSpecShapes))
	for i := range namespaces {
		namespaces[i] = env.Namespace(t)
	}

	// The largest CR the apiserver admits, found before any manager watches the kind, so
	// that each probe is deleted at once.
	size := largestNote(t, c, func(n int) *unstructured.Unstructured {
		return newWebInfo(probeNS, fmt.Sprintf("probe-%d", n), map[string]any{"note": uniqueHex(n)})
	})
	size -= openSpecHeadroom

	// Metrics over plain HTTP, for the Go heap in use next to the RSS.
	metrics, err := framework.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := env.StartManager(framework.ProcessOptions{Name: "manager-openspec", WatchesFile: webInfoWatches(t, dir),
		MetricsAddr: metrics, Flags: []string{"--leader-election-id=manager-openspec"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Stop)
	// The CRs go while the manager runs: it uninstalls their releases and removes its
	// finalizer, without which neither their namespaces nor the CRD would go.
	t.Cleanup(func() { deleteWebInfos(t, c, namespaces) })
	framework.Eventually(t, converge, func(context.Context) error {
		out, err := mgr.Output()
		if err != nil {
			return err
		}
		if !strings.Contains(out, `"Starting workers","controller":"webinfo-controller"`) {
			return fmt.Errorf("the manager has not started the WebInfo controller yet")
		}
		return nil
	})
	time.Sleep(openSpecIdle)
	apiserver := apiserverPid()
	before, heapBefore, apiBefore := openSpecMiB(t, mgr.Pid(), "VmRSS"), heapInUse(t, metrics), openSpecMiB(t, apiserver, "VmRSS")
	t.Logf("with no WebInfo: manager RSS %.0f MiB, Go heap in use %.0f MiB; apiserver RSS %.0f MiB", before, heapBefore, apiBefore)

	for i, shape := range openSpecShapes {
		ns := namespaces[i]
		resetManagerPeak(t, mgr.Pid())
		specBytes := 0
		for j := range shape.count {
			cr := newWebInfo(ns, fmt.Sprintf("webinfo-%03d", j), shape.note(size))
			if j == 0 {
				specBytes = jsonBytes(t, cr.Object["spec"])
			}
			if err := c.Create(ctx, cr); err != nil {
				t.Fatalf("%s: the apiserver refused CR %d of %d: %v", shape.name, j+1, shape.count, err)
			}
		}
		if shape.refused {
			waitRefused(t, c, ns, shape.count)
		} else {
			waitDeployed(t, c, ns, shape.count)
		}
		if mgr.Exited() {
			t.Fatalf("%s: the manager exited", shape.name)
		}
		stored := storedBytes(t, c, ns, "webinfo-000")
		time.Sleep(openSpecIdle)
		if mgr.Exited() {
			t.Fatalf("%s: the manager exited", shape.name)
		}
		after, heapAfter, apiAfter := openSpecMiB(t, mgr.Pid(), "VmRSS"), heapInUse(t, metrics), openSpecMiB(t, apiserver, "VmRSS")
		n := float64(shape.count)
		t.Logf("%s: %d WebInfos with specs of %d bytes of JSON (%d bytes stored with status): manager RSS %.0f -> %.0f MiB, "+
			"%.2f MiB per CR, peak %.0f MiB while it took them; Go heap in use %.0f -> %.0f MiB, %.2f MiB per CR; "+
			"apiserver RSS %.0f -> %.0f MiB, %.2f MiB per CR",
			shape.name, shape.count, specBytes, stored, before, after, (after-before)/n, openSpecMiB(t, mgr.Pid(), "VmHWM"),
			heapBefore, heapAfter, (heapAfter-heapBefore)/n, apiBefore, apiAfter, (apiAfter-apiBefore)/n)
		before, heapBefore, apiBefore = after, heapAfter, apiAfter
	}
}

// largestNote finds, by bisection, the longest note of the CRs newCR(n) makes that the
// apiserver admits, and logs what refuses the next one and one over 3 MiB. Each probe admitted
// is deleted at once.
func largestNote(t *testing.T, c client.Client, newCR func(n int) *unstructured.Unstructured) int {
	t.Helper()
	ctx := context.Background()
	// create creates the CR with a note of n bytes and deletes it, and returns its size.
	create := func(n int) (int, error) {
		cr := newCR(n)
		err := c.Create(ctx, cr)
		if err == nil {
			if err := c.Delete(ctx, cr); err != nil {
				t.Fatal(err)
			}
		}
		return jsonBytes(t, cr.Object), err
	}
	lo, hi := 1<<20, 3<<20 // admitted, refused
	if _, err := create(lo); err != nil {
		t.Fatalf("a CR with a note of %d bytes is refused: %v", lo, err)
	}
	overSize, over := create(hi)
	if over == nil {
		t.Fatalf("a CR with a note of %d bytes is admitted", hi)
	}
	var refused error
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if _, err := create(mid); err != nil {
			hi, refused = mid, err
		} else {
			lo = mid
		}
	}
	t.Logf("the largest CR the apiserver admits is %d bytes of JSON (a note of %d bytes); one byte more is refused: %v; "+
		"a CR of %d bytes: %v", jsonBytes(t, newCR(lo).Object), lo, refused, overSize, over)
	return lo
}

// waitDeployed waits until the manager has deployed the release of each of the count
// WebInfos of ns and written its last condition, ChartRollout. It counts their release records
// by their labels, which costs little, and lists the CRs, as large as they are, only once all
// are there, to check their conditions.
func waitDeployed(t *testing.T, c client.Client, ns string, count int) {
	t.Helper()
	framework.Eventually(t, 10*time.Minute, func(ctx context.Context) error {
		records := &metav1.PartialObjectMetadataList{}
		records.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
		if err := c.List(ctx, records, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "status": "deployed"}); err != nil {
			return err
		}
		deployed := map[string]bool{}
		for _, r := range records.Items {
			deployed[r.Labels["name"]] = true
		}
		if len(deployed) < count {
			return fmt.Errorf("%d of %d releases deployed", len(deployed), count)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(webInfoGVK.GroupVersion().WithKind(webInfoGVK.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range list.Items {
			for _, typ := range []string{"Deployed", statuscontract.ChartRollout} {
				if s, reason, msg := framework.Condition(&list.Items[i], typ); s != "True" {
					return fmt.Errorf("WebInfo %s: %s=%q (%s: %s)", list.Items[i].GetName(), typ, s, reason, msg)
				}
			}
		}
		return nil
	})
}

// waitRefused waits until each of the count WebInfos of ns reads Stalled, reason
// SpecTooLarge: the manager refused its spec as holding more values than its bound.
func waitRefused(t *testing.T, c client.Client, ns string, count int) {
	t.Helper()
	framework.Eventually(t, 10*time.Minute, func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(webInfoGVK.GroupVersion().WithKind(webInfoGVK.Kind + "List"))
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) < count {
			return fmt.Errorf("%d of %d WebInfos", len(list.Items), count)
		}
		for i := range list.Items {
			if s, reason, msg := framework.Condition(&list.Items[i], statuscontract.Stalled); s != "True" || reason != "SpecTooLarge" {
				return fmt.Errorf("WebInfo %s: Stalled=%q (%s: %s), want True SpecTooLarge", list.Items[i].GetName(), s, reason, msg)
			}
		}
		return nil
	})
}

// storedBytes is the size of the CR ns/name as the apiserver returns it, status and managed
// fields included: how close to the limit the manager's writes brought it.
func storedBytes(t *testing.T, c client.Client, ns, name string) int {
	t.Helper()
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(webInfoGVK)
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cr); err != nil {
		t.Fatal(err)
	}
	return jsonBytes(t, cr.Object)
}

// deleteWebInfos deletes the WebInfos of namespaces and waits until they are gone, listing
// their metadata only.
func deleteWebInfos(t *testing.T, c client.Client, namespaces []string) {
	t.Helper()
	for _, ns := range namespaces {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(webInfoGVK)
		if err := c.DeleteAllOf(context.Background(), u, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the WebInfos of %s: %v", ns, err)
			return
		}
	}
	framework.Eventually(t, 10*time.Minute, func(ctx context.Context) error {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(webInfoGVK.GroupVersion().WithKind(webInfoGVK.Kind + "List"))
		if err := c.List(ctx, l); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d WebInfos left", len(l.Items))
		}
		return nil
	})
}

// webInfoWatches writes a watches file with the copy's WebInfo entry alone, its chart made
// absolute: the manager runs in the repository.
func webInfoWatches(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "watches.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var all []map[string]any
	if err := yaml.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	for _, w := range all {
		if w["kind"] == webInfoGVK.Kind {
			w["chart"] = filepath.Join(dir, filepath.FromSlash(w["chart"].(string)))
			out, err := yaml.Marshal([]map[string]any{w})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "watches.yaml")
			if err := os.WriteFile(path, out, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	t.Fatalf("the copy's watches.yaml has no WebInfo:\n%s", data)
	return ""
}

// uniqueHex is n random hexadecimal characters: no two CRs share a note, which the manager's
// cache would otherwise keep once for all (internal/sharedstrings).
func uniqueHex(n int) string {
	b := make([]byte, (n+1)/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

func jsonBytes(t *testing.T, v any) int {
	t.Helper()
	b, err := (&unstructured.Unstructured{Object: map[string]any{"v": v}}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return len(b) - len(`{"v":}`)
}

// apiserverPid is the local cluster's kube-apiserver (make cluster-up keeps its pid next to
// the kubeconfig), or 0 when it is not known.
func apiserverPid() int {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(env.Kubeconfig), "pids", "kube-apiserver"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// heapInUse is the manager's Go heap in use, in MiB, from its metrics at addr: what it holds,
// where the RSS also counts what the runtime has not given back yet.
func heapInUse(t *testing.T, addr string) float64 {
	t.Helper()
	b, err := framework.Metric(addr, "go_memstats_heap_inuse_bytes")
	if err != nil {
		t.Fatal(err)
	}
	return b / (1 << 20)
}

// resetManagerPeak sets process pid's peak RSS, VmHWM, back to its RSS now (Linux:
// clear_refs 5), so that each shape's peak is its own.
func resetManagerPeak(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}

// openSpecMiB is the field of /proc/<pid>/status given in kB (VmRSS, VmHWM), in MiB; 0 for
// pid 0.
func openSpecMiB(t *testing.T, pid int, field string) float64 {
	t.Helper()
	if pid == 0 {
		return 0
	}
	v, err := framework.ProcStatusMiB(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return v[0]
}
