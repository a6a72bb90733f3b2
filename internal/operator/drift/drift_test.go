package drift

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	libhandler "github.com/operator-framework/operator-lib/handler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

func TestSubset(t *testing.T) {
	parse := func(s string) any {
		var v any
		if err := yaml.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	live := map[string]any{
		"metadata": map[string]any{"name": "d", "labels": map[string]any{"a": "1", "extra": "x"}},
		"spec": map[string]any{"replicas": int64(3), "paused": false, "template": map[string]any{
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i", "terminationMessagePath": "/dev/termination-log"}}},
		}},
		"status": map[string]any{"replicas": int64(3)},
	}
	cases := []struct {
		want string
		ok   bool
	}{
		{"spec: {replicas: 3}", true},
		{"spec: {replicas: 4}", false},
		{"metadata: {labels: {a: '1'}}", true}, // labels added by others do not count
		{"metadata: {labels: {a: '2'}}", false},
		{"spec: {template: {spec: {containers: [{name: c, image: i}]}}}", true}, // defaulted fields do not count
		{"spec: {template: {spec: {containers: [{name: c, image: j}]}}}", false},
		{"spec: {template: {spec: {containers: [{name: c}, {name: d}]}}}", false}, // a list must match in length
		{"spec: {paused: false, strategy: null}", true},
		{"spec: {minReadySeconds: 5}", false}, // set by the chart, gone live
		{"spec: {replicas: '3'}", false},
	}
	for _, tc := range cases {
		if got := subset(parse(tc.want), live); got != tc.ok {
			t.Errorf("subset(%s) = %v, want %v", tc.want, got, tc.ok)
		}
	}
}

func liveDeployment(replicas int64, owner string) *unstructured.Unstructured {
	d := &unstructured.Unstructured{}
	d.SetGroupVersionKind(actiontest.DeploymentGVK)
	d.SetNamespace("ns")
	d.SetName("m")
	_ = unstructured.SetNestedField(d.Object, replicas, "spec", "replicas")
	if owner != "" {
		_ = unstructured.SetNestedSlice(d.Object, []any{map[string]any{
			"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": owner, "uid": "u", "controller": true,
		}}, "metadata", "ownerReferences")
	}
	return d
}

func readerWith(objs ...client.Object) client.Reader {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objs...).Build()
}

func TestDrifted(t *testing.T) {
	cr := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": actiontest.MemcachedManifest}})
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	cases := []struct {
		name    string
		objects []client.Object
		want    bool
	}{
		{"as the release says: the reconciler's own change", []client.Object{cr, liveDeployment(3, "m")}, false},
		{"scaled by hand", []client.Object{cr, liveDeployment(5, "m")}, true},
		{"no owner reference", []client.Object{cr, liveDeployment(3, "")}, true},
		{"owner CR not found", []client.Object{liveDeployment(3, "m")}, true},
		{"object gone", []client.Object{cr}, true},
		{"owner has no manifest yet", []client.Object{actiontest.Memcached(nil), liveDeployment(3, "m")}, true},
	}
	for _, tc := range cases {
		inf := Filter{Manifests: statusManifests{}, Reader: readerWith(tc.objects...), Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		if got := inf.Drifted(context.Background(), key); got != tc.want {
			t.Errorf("%s: drifted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

type countingHandler struct{ updates, deleted atomic.Int32 }

func (h *countingHandler) OnAdd(any, bool)   {}
func (h *countingHandler) OnUpdate(_, _ any) { h.updates.Add(1) }
func (h *countingHandler) OnDelete(any)      { h.deleted.Add(1) }

// TestOnlyDriftForwards: an update is passed on after the settle delay when the object has
// drifted, and not at all when it is as the release says.
func TestOnlyDriftForwards(t *testing.T) {
	defer func(d time.Duration) { SettleDelay = d }(SettleDelay)
	SettleDelay = 10 * time.Millisecond
	cr := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": actiontest.MemcachedManifest}})

	for _, tc := range []struct {
		replicas int64
		want     int32
	}{{5, 1}, {3, 0}} {
		inf := Filter{Manifests: statusManifests{}, Reader: readerWith(cr, liveDeployment(tc.replicas, "m")), Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		h := &countingHandler{}
		var wrapped toolscache.ResourceEventHandler = inf.Wrap(h)
		wrapped.OnUpdate(liveDeployment(3, "m"), liveDeployment(tc.replicas, "m"))
		time.Sleep(20 * SettleDelay) // the forward happens on a timer
		if got := h.updates.Load(); got != tc.want {
			t.Errorf("live replicas %d: %d updates passed on, want %d", tc.replicas, got, tc.want)
		}
	}
}

func (h *countingHandler) deletes() int32 { return h.deleted.Load() }

// TestOnlyDriftDeletions: a deleted release object starts a reconcile, unless its CR is
// being deleted or gone (the uninstall removed it).
func TestOnlyDriftDeletions(t *testing.T) {
	deleting := actiontest.Memcached(nil)
	deleting.SetFinalizers([]string{"uninstall-helm-release"})
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	for _, tc := range []struct {
		name string
		objs []client.Object
		want int32
	}{
		{"CR alive: recreate", []client.Object{actiontest.Memcached(nil)}, 1},
		{"CR being deleted", []client.Object{deleting}, 0},
		{"CR gone", nil, 0},
	} {
		inf := Filter{Manifests: statusManifests{}, Reader: readerWith(tc.objs...), Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		h := &countingHandler{}
		inf.Wrap(h).OnDelete(liveDeployment(3, "m"))
		if got := h.deletes(); got != tc.want {
			t.Errorf("%s: %d deletions passed on, want %d", tc.name, got, tc.want)
		}
	}
}

// An update seen as metadata is dropped when it only wrote the status of an object that has a
// generation; otherwise the object is read whole and, if it drifted, the update goes on with
// an old version that holds only the name and owner references of the version before (so that the
// reconciler's update predicate, which compares the two versions it gets, lets a drift in any
// field through, and its handler maps it to the CR even when the update removed them, as a
// person's `helm upgrade` does).
func TestOnlyDriftFromMetadata(t *testing.T) {
	defer func(d time.Duration) { SettleDelay = d }(SettleDelay)
	SettleDelay = 10 * time.Millisecond
	cr := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": actiontest.MemcachedManifest}})
	meta := func(rv string, generation int64, labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", ResourceVersion: rv,
			Generation: generation, Labels: labels, OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1",
				Kind: "Memcached", Name: "m", UID: "u", Controller: ptrTo(true)}}}}
	}
	disowned := meta("2", 3, nil)
	disowned.OwnerReferences = nil
	annotated := func(rv string, annotations map[string]string) *metav1.PartialObjectMetadata {
		m := meta(rv, 2, nil)
		m.Annotations = annotations
		return m
	}
	revision := func(r string) map[string]string { return map[string]string{"deployment.kubernetes.io/revision": r} }
	for _, tc := range []struct {
		name     string
		old, new *metav1.PartialObjectMetadata
		live     *unstructured.Unstructured
		want     int32
	}{
		{"status only: dropped unread", meta("1", 2, nil), meta("2", 2, nil), liveDeployment(5, "m"), 0},
		{"spec edited (generation), drifted", meta("1", 2, nil), meta("2", 3, nil), liveDeployment(5, "m"), 1},
		{"spec edited (generation), as the release says", meta("1", 2, nil), meta("2", 3, nil), liveDeployment(3, "m"), 0},
		{"labels edited", meta("1", 2, nil), meta("2", 2, map[string]string{"x": "y"}), liveDeployment(5, "m"), 1},
		{"revision annotation moved by the deployment controller: dropped unread", annotated("1", revision("1")),
			annotated("2", revision("2")), liveDeployment(5, "m"), 0},
		{"revision annotation and another moved", annotated("1", revision("1")),
			annotated("2", map[string]string{"deployment.kubernetes.io/revision": "2", "x": "y"}), liveDeployment(5, "m"), 1},
		{"no generation (a ConfigMap): read", meta("1", 0, nil), meta("2", 0, nil), liveDeployment(5, "m"), 1},
		{"owner reference removed (a person's helm upgrade)", meta("1", 2, nil), disowned, liveDeployment(5, ""), 1},
	} {
		var gotOld, gotNew any
		h := &recordingHandler{onUpdate: func(o, n any) { gotOld, gotNew = o, n }}
		inf := Filter{Manifests: statusManifests{}, Reader: readerWith(cr), Live: readerWith(tc.live), Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		inf.Wrap(h).OnUpdate(tc.old, tc.new)
		time.Sleep(20 * SettleDelay)
		if got := h.updates.Load(); got != tc.want {
			t.Errorf("%s: %d updates passed on, want %d", tc.name, got, tc.want)
			continue
		}
		if tc.want == 0 {
			continue
		}
		o, _ := gotOld.(*unstructured.Unstructured)
		n, _ := gotNew.(*unstructured.Unstructured)
		if o == nil || o.GroupVersionKind() != actiontest.DeploymentGVK || o.GetNamespace() != "ns" || o.GetName() != "m" ||
			len(o.GetOwnerReferences()) != 1 || o.GetOwnerReferences()[0].Name != "m" || len(o.Object) != 3 {
			t.Errorf("%s: old version %#v, want the Deployment ns/m with the owner reference of the version before, and nothing else", tc.name, gotOld)
		}
		if n == nil || len(n.GetOwnerReferences()) != len(tc.new.OwnerReferences) || n.GroupVersionKind() != actiontest.DeploymentGVK {
			t.Errorf("%s: new version %#v, want the Deployment's metadata", tc.name, gotNew)
		}
	}
}

type recordingHandler struct {
	countingHandler
	onUpdate func(o, n any)
}

func (h *recordingHandler) OnUpdate(o, n any) {
	h.onUpdate(o, n)
	h.updates.Add(1)
}

func ptrTo[T any](v T) *T { return &v }

// countingReader counts its Gets and the most that ran at once, each taking a while.
type countingReader struct {
	client.Reader
	gets, running, most atomic.Int32
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	n := r.running.Add(1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	time.Sleep(5 * time.Millisecond)
	r.running.Add(-1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// Updates of objects no CR of the kind owns cost no read; those of owned objects are read by
// a bounded number of workers, each object once however often it changed meanwhile.
func TestOnlyDriftReadsOnlyOwnedObjectsBounded(t *testing.T) {
	defer func(d time.Duration) { SettleDelay = d }(SettleDelay)
	SettleDelay = 10 * time.Millisecond
	cr := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": actiontest.MemcachedManifest}})
	live := &countingReader{Reader: readerWith(liveDeployment(5, "m"))}
	inf := Filter{Manifests: statusManifests{}, Reader: readerWith(cr), Live: live, Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
	h := &countingHandler{}
	wrapped := inf.Wrap(h)
	unowned := func(i int) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("other-%d", i),
			ResourceVersion: strconv.Itoa(i)}}
	}
	for i := range 1000 {
		wrapped.OnUpdate(unowned(i), unowned(i+1))
	}
	time.Sleep(20 * SettleDelay)
	if got := live.gets.Load(); got != 0 {
		t.Errorf("1000 updates of objects no Memcached owns: %d reads, want none", got)
	}

	owned := func(name, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cache.example.com/v1alpha1", Kind: "Memcached",
				Name: "m", UID: "u", Controller: ptrTo(true)}}}}
	}
	for i := range 40 {
		wrapped.OnUpdate(owned(fmt.Sprintf("d-%d", i), "1"), owned(fmt.Sprintf("d-%d", i), "2"))
	}
	for range 10 { // the same object, again and again within the settle delay
		wrapped.OnUpdate(owned("m", "1"), owned("m", "2"))
	}
	deadline := time.Now().Add(5 * time.Second)
	for live.gets.Load() < 41 && time.Now().Before(deadline) {
		time.Sleep(SettleDelay)
	}
	time.Sleep(20 * SettleDelay)
	if got, most := live.gets.Load(), live.most.Load(); got != 41 || most > driftWorkers {
		t.Errorf("41 owned objects updated: %d reads, at most %d at once; want 41, at most %d", got, most, driftWorkers)
	}
	// d-0...d-39 are not found (so whether they drifted cannot be told) and m drifted.
	if got := h.updates.Load(); got != 41 {
		t.Errorf("%d updates passed on, want 41, each object once", got)
	}
}

// TestEqualBesideControllerAnnotations: the deployment controller's annotations are skipped
// wherever they are, and every other annotation added, removed or changed counts.
func TestEqualBesideControllerAnnotations(t *testing.T) {
	const rev = "deployment.kubernetes.io/revision"
	for _, tc := range []struct {
		name string
		a, b map[string]string
		want bool
	}{
		{"none", nil, nil, true},
		{"revision only on one side", map[string]string{rev: "1"}, nil, true},
		{"revision moved, the rest kept", map[string]string{rev: "1", "x": "y"}, map[string]string{"x": "y", rev: "2"}, true},
		{"annotation added", map[string]string{rev: "1"}, map[string]string{rev: "1", "x": "y"}, false},
		{"annotation removed", map[string]string{"x": "y", rev: "1"}, map[string]string{rev: "1"}, false},
		{"annotation changed", map[string]string{"x": "y"}, map[string]string{"x": "z"}, false},
		{"annotation renamed", map[string]string{"x": "y"}, map[string]string{"w": "y"}, false},
	} {
		if got := equalBesideControllerAnnotations(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if got := equalBesideControllerAnnotations(tc.b, tc.a); got != tc.want {
			t.Errorf("%s, reversed: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// annotationQueue is the reconciler's handler of release objects tied to their CR by the
// operator-sdk annotations (helm-operator-plugins' dependent watch of objects of a kind that a
// chart keeps, or cluster-scoped), with the queue it fills.
type annotationQueue struct {
	handler *libhandler.EnqueueRequestForAnnotation[*unstructured.Unstructured]
	queue   workqueue.TypedRateLimitingInterface[reconcile.Request]
}

func (a annotationQueue) OnAdd(obj any, _ bool) {
	a.handler.Create(context.Background(), event.TypedCreateEvent[*unstructured.Unstructured]{Object: obj.(*unstructured.Unstructured)}, a.queue)
}

func (a annotationQueue) OnUpdate(o, n any) {
	a.handler.Update(context.Background(), event.TypedUpdateEvent[*unstructured.Unstructured]{
		ObjectOld: o.(*unstructured.Unstructured), ObjectNew: n.(*unstructured.Unstructured)}, a.queue)
}

func (a annotationQueue) OnDelete(obj any) {
	a.handler.Delete(context.Background(), event.TypedDeleteEvent[*unstructured.Unstructured]{Object: obj.(*unstructured.Unstructured)}, a.queue)
}

// A namespaced object's operator-sdk annotations queue a CR of its own namespace only: a
// tenant who writes them on a ConfigMap of theirs, naming another namespace's CR, queues
// nothing, whether the ConfigMap is created, updated or deleted. A cluster-scoped object's
// name the CR of any namespace, as the reconciler writes them.
func TestPrimaryResourceAnnotationConfined(t *testing.T) {
	defer func(d time.Duration) { SettleDelay = d }(SettleDelay)
	SettleDelay = 10 * time.Millisecond
	configMapGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	tied := func(namespace, rv, owner string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "c", ResourceVersion: rv,
			Annotations: map[string]string{libhandler.NamespacedNameAnnotation: owner,
				libhandler.TypeAnnotation: actiontest.MemcachedGVK.GroupKind().String(), "n": rv}}}
	}
	for _, tc := range []struct {
		name      string
		namespace string // the ConfigMap's
		owner     string // the CR its annotations name
		want      int    // CRs queued
	}{
		{"another namespace's CR", "tenant", "ns/m", 0},
		{"a cluster-scoped CR's name", "tenant", "m", 0},
		{"a cluster-scoped CR's name, as its own namespace's", "m", "m", 0},
		{"a CR of its own namespace", "ns", "ns/m", 1},
		{"from a cluster-scoped object", "", "ns/m", 1},
	} {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		inf := Filter{Manifests: statusManifests{}, Reader: readerWith(actiontest.Memcached(nil)), Live: readerWith(), Owner: actiontest.MemcachedGVK, GVK: configMapGVK}
		h := inf.Wrap(annotationQueue{handler: &libhandler.EnqueueRequestForAnnotation[*unstructured.Unstructured]{
			Type: actiontest.MemcachedGVK.GroupKind()}, queue: q})
		h.OnAdd(tied(tc.namespace, "1", tc.owner), false)
		h.OnUpdate(tied(tc.namespace, "1", tc.owner), tied(tc.namespace, "2", tc.owner))
		h.OnDelete(tied(tc.namespace, "2", tc.owner))
		time.Sleep(20 * SettleDelay)
		if q.Len() != tc.want {
			t.Errorf("%s: %d CRs queued, want %d", tc.name, q.Len(), tc.want)
		}
		q.ShutDown()
	}
}
