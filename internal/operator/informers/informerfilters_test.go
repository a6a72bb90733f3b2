package informers

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func version(rv string, mutate func(u *unstructured.Unstructured)) *unstructured.Unstructured {
	u := actiontest.Memcached(map[string]any{"conditions": []any{map[string]any{"type": "Deployed", "status": "True"}}})
	u.SetResourceVersion(rv)
	u.SetGeneration(1)
	if mutate != nil {
		mutate(u)
	}
	return u
}

// Updates that change nothing the release is made of (status, finalizers added) are dropped;
// every other passes, a finalizer removed too.
func TestNothingForTheRelease(t *testing.T) {
	old := version("1", nil)
	withFinalizer := version("1", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"f"}) })
	if nothingForTheRelease(withFinalizer, version("2", nil)) {
		t.Error("a finalizer removed: dropped, want passed")
	}
	cases := []struct {
		name string
		new  *unstructured.Unstructured
		want bool
	}{
		{"status written", version("2", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "availableReplicas")
		}), true},
		{"status and managedFields written", version("2", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "availableReplicas")
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"manager": "sidecar"}}, "metadata", "managedFields")
		}), true},
		{"spec edited", version("2", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "size")
			u.SetGeneration(2)
		}), false},
		{"finalizer added (the reconciler's own, as it installs)", version("2", func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"f"})
		}), true},
		{"finalizer added and status written", version("2", func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"f"})
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "availableReplicas")
		}), true},
		{"finalizer added with a spec edit", version("2", func(u *unstructured.Unstructured) {
			u.SetFinalizers([]string{"f"})
			_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "size")
		}), false},
		{"annotation changed", version("2", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "b"}) }), false},
		{"resync of the same version", version("1", nil), false},
		{"no change but resourceVersion", version("2", nil), false},
	}
	for _, tc := range cases {
		if got := nothingForTheRelease(old, tc.new); got != tc.want {
			t.Errorf("%s: nothingForTheRelease = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// recorder counts the events a handler is given.
type recorder struct{ adds, updates, deletes int }

func (r *recorder) OnAdd(any, bool)   { r.adds++ }
func (r *recorder) OnUpdate(_, _ any) { r.updates++ }
func (r *recorder) OnDelete(any)      { r.deletes++ }

// stubInformer hands every handler added to it to the test.
type stubInformer struct {
	cache.Informer
	added *toolscache.ResourceEventHandler
}

func (s stubInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	*s.added = h
	return nil, nil
}

type stubCache struct {
	cache.Cache
	added *toolscache.ResourceEventHandler
	asked *[]string // the type of each informer asked for
}

func (c stubCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	if c.asked != nil {
		*c.asked = append(*c.asked, fmt.Sprintf("%T", obj))
	}
	return stubInformer{added: c.added}, nil
}

// capturing records the objects its handler methods get.
type capturing struct{ got []any }

func (c *capturing) OnAdd(obj any, _ bool)  { c.got = append(c.got, obj) }
func (c *capturing) OnUpdate(_, newObj any) { c.got = append(c.got, newObj) }
func (c *capturing) OnDelete(obj any)       { c.got = append(c.got, obj) }

// A release object's informer is a metadata informer, and the reconciler's handlers get its
// objects as unstructured ones of the kind; an update that only wrote the status (the
// generation and the rest of the metadata as they were) does not reach them.
func TestFilteringCacheReleaseObjectsAsMetadata(t *testing.T) {
	var added toolscache.ResourceEventHandler
	var asked []string
	c := filteringCache{Cache: stubCache{added: &added, asked: &asked}, gvk: actiontest.MemcachedGVK}
	d := &unstructured.Unstructured{}
	d.SetGroupVersionKind(actiontest.DeploymentGVK)
	inf, err := c.GetInformer(context.Background(), d)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(asked) != "[*v1.PartialObjectMetadata]" {
		t.Fatalf("informers asked for: %v, want a metadata one", asked)
	}
	rec := &capturing{}
	if _, err := inf.AddEventHandlerWithOptions(rec, toolscache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	meta := func(rv string, generation int64) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", ResourceVersion: rv,
			Generation: generation, Labels: map[string]string{"app": "m"}}}
	}
	added.OnAdd(meta("1", 1), false)
	added.OnUpdate(meta("1", 1), meta("2", 1)) // the status only
	added.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/m", Obj: meta("3", 1)})
	if len(rec.got) != 2 {
		t.Fatalf("the handler got %d events, want the add and the delete: %v", len(rec.got), rec.got)
	}
	u, ok := rec.got[0].(*unstructured.Unstructured)
	if !ok || u.GroupVersionKind() != actiontest.DeploymentGVK || u.GetName() != "m" || u.GetLabels()["app"] != "m" {
		t.Errorf("added: %#v, want the Deployment's metadata as an unstructured Deployment", rec.got[0])
	}
	tomb, ok := rec.got[1].(toolscache.DeletedFinalStateUnknown)
	if _, isU := tomb.Obj.(*unstructured.Unstructured); !ok || !isU {
		t.Errorf("deleted: %#v, want a tombstone of an unstructured Deployment", rec.got[1])
	}
}

// TestFilteringCache: handlers on the CR kind's informer miss status-only updates and get
// everything else; handlers on the release Secrets' informer get deletions only.
func TestFilteringCache(t *testing.T) {
	var added toolscache.ResourceEventHandler
	gvk := schema.GroupVersionKind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"}
	c := filteringCache{Cache: stubCache{added: &added}, gvk: gvk}

	statusOnly := version("2", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(3), "status", "availableReplicas")
	})
	specEdit := version("3", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedField(u.Object, int64(4), "spec", "size")
	})

	for _, tc := range []struct {
		obj                   client.Object
		wantAdds, wantUpdates int
	}{
		{version("1", nil), 1, 1}, // the CR kind: the status-only update is dropped
		{&corev1.Secret{}, 0, 0},  // the release Secrets: deletions only
	} {
		inf, err := c.GetInformer(context.Background(), tc.obj)
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		if _, err := inf.AddEventHandlerWithOptions(rec, toolscache.HandlerOptions{}); err != nil {
			t.Fatal(err)
		}
		added.OnAdd(version("1", nil), false)
		added.OnUpdate(version("1", nil), statusOnly)
		added.OnUpdate(statusOnly, specEdit)
		added.OnDelete(specEdit)
		if rec.adds != tc.wantAdds || rec.updates != tc.wantUpdates || rec.deletes != 1 {
			t.Errorf("%T: handler got %d adds, %d updates, %d deletes; want %d, %d, 1",
				tc.obj, rec.adds, rec.updates, rec.deletes, tc.wantAdds, tc.wantUpdates)
		}
	}
}

// TestReleaseSecretDeletions: the deletion of a release's current record reaches the
// reconciler, so that it puts the release back; that of a superseded one (Helm's own pruning of
// the history at each upgrade past --max-release-history) does not, nor does its tombstone. A
// record's status counts only while its signature holds: a current record a namespace editor
// relabelled "superseded", or an unsigned one, still reaches the reconciler.
func TestReleaseSecretDeletions(t *testing.T) {
	keys := releasesign.Keys{Current: releasesign.Key(bytes.Repeat([]byte("k"), releasesign.MinKeySize))}
	var added toolscache.ResourceEventHandler
	c := filteringCache{Cache: stubCache{added: &added}, gvk: actiontest.MemcachedGVK, signedRecord: func(m metav1.Object) bool {
		return keys.VerifyMetadata(m.GetNamespace(), m) == nil
	}}
	inf, err := c.GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &capturing{}
	if _, err := inf.AddEventHandlerWithOptions(rec, toolscache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	// record is the cached metadata of revision version, signed with status signedAs unless
	// that is "", and labelled status.
	record := func(version, signedAs, status string) *metav1.PartialObjectMetadata {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "sh.helm.release.v1.m.v" + version,
			Labels: map[string]string{"owner": "helm", "name": "m", "status": signedAs, "version": version}},
			Type: releasesign.RecordType, Data: map[string][]byte{"release": []byte("r" + version)}}
		if signedAs != "" {
			keys.Sign("ns", s)
		}
		s.Labels["status"] = status
		return &metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta}
	}
	tomb := func(r *metav1.PartialObjectMetadata) toolscache.DeletedFinalStateUnknown {
		return toolscache.DeletedFinalStateUnknown{Key: "ns/" + r.Name, Obj: r}
	}
	added.OnDelete(record("1", "superseded", "superseded"))
	added.OnDelete(tomb(record("2", "superseded", "superseded")))
	added.OnDelete(record("3", "deployed", "deployed"))
	added.OnDelete(tomb(record("4", "failed", "failed")))
	added.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/sh.helm.release.v1.m.v5"})
	added.OnDelete(record("6", "deployed", "superseded")) // relabelled by a namespace editor
	added.OnDelete(tomb(record("7", "deployed", "superseded")))
	added.OnDelete(record("8", "", "superseded")) // unsigned
	var got []string
	for _, obj := range rec.got {
		if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			got = append(got, tomb.Key)
			continue
		}
		got = append(got, obj.(metav1.Object).GetName())
	}
	want := []string{"sh.helm.release.v1.m.v3", "ns/sh.helm.release.v1.m.v4", "ns/sh.helm.release.v1.m.v5",
		"sh.helm.release.v1.m.v6", "ns/sh.helm.release.v1.m.v7", "sh.helm.release.v1.m.v8"}
	if !slices.Equal(got, want) {
		t.Errorf("deletions passed on: %v, want %v", got, want)
	}
}

// A reconcile forced by the request annotation passes at most once per ForcedInterval and
// CR: requests that come sooner wait, and only the latest of them passes; a spec edit never
// waits.
func TestForcedReconcilesRateLimitedPerCR(t *testing.T) {
	defer func(d time.Duration) { ForcedInterval = d }(ForcedInterval)
	ForcedInterval = 100 * time.Millisecond
	var passed []string
	var mu sync.Mutex
	h := newSkipStatusUpdates(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
		mu.Lock()
		defer mu.Unlock()
		u := n.(*unstructured.Unstructured)
		passed = append(passed, u.GetName()+":"+u.GetAnnotations()[statuscontract.RequestAnnotation]+":"+u.GetResourceVersion())
	}}, &PerCRInterval{})
	version := func(name, request, rv string, size int64) *unstructured.Unstructured {
		u := actiontest.Memcached(nil)
		u.SetName(name)
		u.SetResourceVersion(rv)
		if request != "" {
			u.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: request})
		}
		_ = unstructured.SetNestedField(u.Object, size, "spec", "size")
		return u
	}
	prev := version("a", "", "1", 3)
	for i := range 5 { // a loop of forced reconciles of CR a
		next := version("a", strconv.Itoa(i), strconv.Itoa(i+2), 3)
		h.OnUpdate(prev, next)
		prev = next
	}
	h.OnUpdate(version("b", "", "1", 3), version("b", "x", "2", 3))  // another CR's request
	h.OnUpdate(version("a", "4", "6", 3), version("a", "4", "7", 4)) // a spec edit of a
	mu.Lock()
	got := slices.Clone(passed)
	mu.Unlock()
	if want := []string{"a:0:2", "b:x:2", "a:4:7"}; !slices.Equal(got, want) {
		t.Errorf("passed at once: %v, want %v", got, want)
	}
	time.Sleep(3 * ForcedInterval)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"a:0:2", "b:x:2", "a:4:7", "a:4:6"}; !slices.Equal(passed, want) {
		t.Errorf("passed: %v, want %v (the requests 1 to 4 of a as one, after the interval)", passed, want)
	}
}

// Forced reconciles and changes of a CR's sources draw on one budget per CR: a forced
// reconcile that comes right after a source's change woke the CR waits out the interval, so
// a tenant who alternates the two gets no more reconciles than with either alone.
func TestForcedReconcilesShareTheSourcesBudget(t *testing.T) {
	defer func(d time.Duration) { ForcedInterval = d }(ForcedInterval)
	ForcedInterval = time.Hour
	budget := &PerCRInterval{}
	var passed atomic.Int32
	h := newSkipStatusUpdates(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, _ any) { passed.Add(1) }}, budget)
	old := actiontest.Memcached(nil)
	old.SetNamespace("ns")
	old.SetName("a")
	old.SetResourceVersion("1")
	forced := old.DeepCopy()
	forced.SetResourceVersion("2")
	forced.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: "now"})
	if d := budget.Wait(client.ObjectKeyFromObject(old), time.Now()); d != 0 {
		t.Fatalf("the source's change waits %v, want none: the budget was unused", d)
	}
	h.OnUpdate(old, forced)
	if n := passed.Load(); n != 0 {
		t.Errorf("the forced reconcile passed at once, right after a source's change woke the CR")
	}
	other := old.DeepCopy()
	other.SetName("b")
	forcedOther := forced.DeepCopy()
	forcedOther.SetName("b")
	h.OnUpdate(other, forcedOther)
	if n := passed.Load(); n != 1 {
		t.Errorf("%d forced reconciles passed, want another CR's, whose budget is its own", n)
	}
}

// Every update that changes no spec and no generation draws on the forced reconciles' budget,
// whatever metadata it changes: a loop that writes the request annotation with another one,
// or annotations or labels alone, gets one reconcile per interval, not one per write. The
// updates that steer the reconciler pass at once: the pause annotation set or removed, the
// chart forced, the CR deleted, a finalizer removed, and a spec edit.
func TestMetadataChurnBudgeted(t *testing.T) {
	defer func(d time.Duration) { ForcedInterval = d }(ForcedInterval)
	ForcedInterval = time.Hour
	var passed []string
	h := newSkipStatusUpdates(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(_, n any) {
		passed = append(passed, n.(*unstructured.Unstructured).GetName())
	}}, &PerCRInterval{})
	churn := map[string]func(u *unstructured.Unstructured, i int){
		"request and another annotation": func(u *unstructured.Unstructured, i int) {
			u.SetAnnotations(map[string]string{statuscontract.RequestAnnotation: strconv.Itoa(i), "n": strconv.Itoa(i)})
		},
		"another annotation": func(u *unstructured.Unstructured, i int) {
			u.SetAnnotations(map[string]string{"n": strconv.Itoa(i)})
		},
		"a label": func(u *unstructured.Unstructured, i int) { u.SetLabels(map[string]string{"n": strconv.Itoa(i)}) },
		"a finalizer added": func(u *unstructured.Unstructured, i int) {
			u.SetFinalizers(append(u.GetFinalizers(), "f"+strconv.Itoa(i)))
			u.SetAnnotations(map[string]string{"n": strconv.Itoa(i)})
		},
	}
	rv := 1
	for name, change := range churn {
		prev := actiontest.Memcached(nil)
		prev.SetName(name)
		prev.SetResourceVersion(strconv.Itoa(rv))
		for i := range 5 {
			next := prev.DeepCopy()
			change(next, i)
			rv++
			next.SetResourceVersion(strconv.Itoa(rv))
			h.OnUpdate(prev, next)
			prev = next
		}
	}
	slices.Sort(passed)
	if want := []string{"a finalizer added", "a label", "another annotation", "request and another annotation"}; !slices.Equal(passed, want) {
		t.Errorf("passed at once: %v, want the first write of each CR only", passed)
	}

	paused := map[string]string{statuscontract.PauseAnnotation: "true"}
	steering := []struct {
		name   string
		before map[string]string // the CR's annotations before
		change func(u *unstructured.Unstructured)
	}{
		{"paused", nil, func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{statuscontract.PauseAnnotation: "true", "n": "x"})
		}},
		{"unpaused", paused, func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"n": "x"}) }},
		{"chart forced", paused, func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{statuscontract.PauseAnnotation: "true", rollout.ForceAnnotation: "abc"})
		}},
		{"deleted", nil, func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}},
		{"finalizer removed", nil, func(u *unstructured.Unstructured) { u.SetFinalizers(nil) }},
		{"spec edited", nil, func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(9), "spec", "size")
			u.SetGeneration(u.GetGeneration() + 1)
		}},
	}
	for _, c := range steering {
		passed = nil
		old := actiontest.Memcached(nil)
		old.SetName("steered: " + c.name)
		old.SetResourceVersion("1")
		old.SetFinalizers([]string{"f"})
		old.SetAnnotations(c.before)
		first := old.DeepCopy() // spends the CR's budget
		first.SetResourceVersion("2")
		first.SetLabels(map[string]string{"spent": "yes"})
		h.OnUpdate(old, first)
		next := first.DeepCopy()
		next.SetResourceVersion("3")
		c.change(next)
		h.OnUpdate(first, next)
		if len(passed) != 2 {
			t.Errorf("%s: %d updates passed at once, want 2 (the budget's first, then this one)", c.name, len(passed))
		}
	}
}
