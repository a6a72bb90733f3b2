package workloadstatus

import (
	"context"
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var poolGVK = schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"}

// newCR returns a WarpdrivePool pool-a in ns1 as the helm-operator leaves it
// after its first reconcile, with the given extra status fields.
func newCR(generation int64, owned map[string]interface{}) *unstructured.Unstructured {
	status := map[string]interface{}{
		"conditions":      []interface{}{map[string]interface{}{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}},
		"deployedRelease": map[string]interface{}{"name": "pool-a"},
	}
	for k, v := range owned {
		status[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"spec":   map[string]interface{}{"replicaCount": int64(3)},
		"status": status,
	}}
	u.SetGroupVersionKind(poolGVK)
	u.SetNamespace("ns1")
	u.SetName("pool-a")
	u.SetUID("uid-a")
	u.SetGeneration(generation)
	u.SetLabels(map[string]string{"shard": "a"})
	return u
}

func poolOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")}
}

func readyDeployment(name string, refs []metav1.OwnerReference, ann map[string]string, replicas, ready, available int32) *appsv1.Deployment {
	d := deployment("ns1", name, refs, ann)
	d.Spec.Selector = selector("app", name)
	d.Status = appsv1.DeploymentStatus{Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: available}
	return d
}

// syncHarness runs one Reconcile against a fake client and records the status
// patches it sends.
type syncHarness struct {
	client  client.Client
	patches []string
}

func newHarness(t *testing.T, objs ...client.Object) *syncHarness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	h := &syncHarness{}
	statusObj := &unstructured.Unstructured{}
	statusObj.SetGroupVersionKind(poolGVK)
	h.client = fake.NewClientBuilder().
		WithScheme(scheme).
		WithObjects(objs...).
		WithStatusSubresource(statusObj).
		WithIndex(&appsv1.Deployment{}, releaseIndex, releaseIndexValues).
		WithIndex(&appsv1.StatefulSet{}, releaseIndex, releaseIndexValues).
		WithIndex(&appsv1.DaemonSet{}, releaseIndex, releaseIndexValues).
		WithInterceptorFuncs(interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				t.Errorf("unexpected patch of the main resource of %T %s", obj, obj.GetName())
				return errors.New("main resource must not be patched")
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				t.Errorf("unexpected update of %T %s", obj, obj.GetName())
				return errors.New("must not update")
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if sub != "status" {
					t.Errorf("patch of subresource %q", sub)
				}
				if patch.Type() != types.MergePatchType {
					t.Errorf("patch type %s, want %s", patch.Type(), types.MergePatchType)
				}
				data, err := patch.Data(obj)
				if err != nil {
					return err
				}
				h.patches = append(h.patches, string(data))
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	return h
}

func (h *syncHarness) reconcile(t *testing.T, r *StatusReconciler) {
	t.Helper()
	r.Client = h.client
	if r.GVK.Empty() {
		r.GVK = poolGVK
	}
	if r.Kinds == nil {
		r.Kinds = testKinds
	}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "pool-a"}})
	if err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
}

func TestSync(t *testing.T) {
	upToDate := map[string]interface{}{
		"replicas": int64(5), "readyReplicas": int64(3), "availableReplicas": int64(2),
		"observedGeneration": int64(2), "selector": "app=web",
	}
	deleting := newCR(2, nil)
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	deleting.SetFinalizers([]string{"uninstall-helm-release"})
	unreported := newCR(1, nil)
	unstructured.RemoveNestedField(unreported.Object, "status")

	cases := []struct {
		name     string
		objs     []client.Object
		selector labels.Selector
		want     []string
	}{{
		name: "first report: all fields",
		objs: []client.Object{
			newCR(2, nil),
			readyDeployment("web", poolOwner(), helmAnnotations("pool-a", "ns1"), 3, 2, 1),
			readyDeployment("api", nil, helmAnnotations("pool-a", "ns1"), 2, 1, 1),
			func() client.Object {
				s := &appsv1.StatefulSet{ObjectMeta: deployment("ns1", "db", poolOwner(), nil).ObjectMeta}
				s.Spec.Selector = selector("app", "db")
				s.Status = appsv1.StatefulSetStatus{Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
				return s
			}(),
			func() client.Object {
				ds := &appsv1.DaemonSet{ObjectMeta: deployment("ns1", "agent", nil, helmAnnotations("pool-a", "ns1")).ObjectMeta}
				ds.Spec.Selector = selector("app", "agent")
				ds.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 4, NumberReady: 4, NumberAvailable: 3}
				return ds
			}(),
			// Not part of the release: another release, another namespace,
			// another CR kind with the same release name, a stale owner.
			readyDeployment("other", nil, helmAnnotations("pool-b", "ns1"), 9, 9, 9),
			func() client.Object {
				d := readyDeployment("elsewhere", nil, helmAnnotations("pool-a", "ns2"), 9, 9, 9)
				d.Namespace = "ns2"
				return d
			}(),
			readyDeployment("memcached", []metav1.OwnerReference{ownerRef("cache.example.com/v1alpha1", "Memcached", "pool-a", "uid-m")}, helmAnnotations("pool-a", "ns1"), 9, 9, 9),
			readyDeployment("stale", []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "old-uid")}, nil, 9, 9, 9),
		},
		// api sorts before web, so its selector is the scale selector.
		want: []string{`{"status":{"availableReplicas":6,"observedGeneration":2,"readyReplicas":8,"replicas":10,"selector":"app=api"}}`},
	}, {
		name: "nothing changed: no patch",
		objs: []client.Object{newCR(2, upToDate), readyDeployment("web", poolOwner(), nil, 5, 3, 2)},
		want: nil,
	}, {
		name: "one pod became ready: only readyReplicas",
		objs: []client.Object{newCR(2, upToDate), readyDeployment("web", poolOwner(), nil, 5, 4, 2)},
		want: []string{`{"status":{"readyReplicas":4}}`},
	}, {
		name: "spec changed: only observedGeneration",
		objs: []client.Object{newCR(3, upToDate), readyDeployment("web", poolOwner(), nil, 5, 3, 2)},
		want: []string{`{"status":{"observedGeneration":3}}`},
	}, {
		name: "all workloads gone: zeros",
		objs: []client.Object{newCR(2, upToDate)},
		want: []string{`{"status":{"availableReplicas":0,"readyReplicas":0,"replicas":0,"selector":""}}`},
	}, {
		name: "CR deleted: nothing to do",
		objs: []client.Object{readyDeployment("web", poolOwner(), nil, 5, 3, 2)},
		want: nil,
	}, {
		name: "CR being deleted: no patch",
		objs: []client.Object{deleting, readyDeployment("web", poolOwner(), nil, 5, 3, 2)},
		want: nil,
	}, {
		name: "helm-operator has not reported yet: no patch",
		objs: []client.Object{unreported, readyDeployment("web", poolOwner(), nil, 5, 3, 2)},
		want: nil,
	}, {
		name:     "CR outside the watches selector: no patch",
		objs:     []client.Object{newCR(2, nil), readyDeployment("web", poolOwner(), nil, 5, 3, 2)},
		selector: labels.SelectorFromSet(labels.Set{"shard": "b"}),
		want:     nil,
	}, {
		name:     "CR inside the watches selector",
		objs:     []client.Object{newCR(2, upToDate), readyDeployment("web", poolOwner(), nil, 6, 3, 2)},
		selector: labels.SelectorFromSet(labels.Set{"shard": "a"}),
		want:     []string{`{"status":{"replicas":6}}`},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.objs...)
			h.reconcile(t, &StatusReconciler{Selector: tc.selector})
			if len(h.patches) != len(tc.want) {
				t.Fatalf("patches = %q, want %q", h.patches, tc.want)
			}
			for i := range tc.want {
				if h.patches[i] != tc.want[i] {
					t.Fatalf("patch %d = %s\nwant      %s", i, h.patches[i], tc.want[i])
				}
			}
		})
	}
}

// TestSyncConverges checks that the patch leaves the helm-operator's fields
// alone and that a second sync over the patched object writes nothing.
func TestSyncConverges(t *testing.T) {
	h := newHarness(t, newCR(2, nil), readyDeployment("web", poolOwner(), nil, 3, 3, 3))
	h.reconcile(t, &StatusReconciler{})
	h.reconcile(t, &StatusReconciler{})
	if len(h.patches) != 1 {
		t.Fatalf("patches = %q, want exactly one", h.patches)
	}

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(poolGVK)
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "ns1", Name: "pool-a"}, got); err != nil {
		t.Fatal(err)
	}
	if conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions"); len(conds) != 1 {
		t.Errorf("conditions = %v, want the helm-operator's condition kept", conds)
	}
	if name, _, _ := unstructured.NestedString(got.Object, "status", "deployedRelease", "name"); name != "pool-a" {
		t.Errorf("deployedRelease.name = %q, want it kept", name)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "status", "readyReplicas"); r != 3 {
		t.Errorf("readyReplicas = %d, want 3", r)
	}
	if rc, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicaCount"); rc != 3 {
		t.Errorf("spec.replicaCount = %d, want the spec untouched", rc)
	}
}

func TestCRInputsChanged(t *testing.T) {
	base := newCR(2, map[string]interface{}{"replicas": int64(3), "selector": "app=web"})
	mutate := func(f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := base.DeepCopy()
		f(u)
		return u
	}
	cases := []struct {
		name string
		new  *unstructured.Unstructured
		want bool
	}{
		{"no change", base.DeepCopy(), false},
		{"finalizer added", mutate(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"f"}) }), false},
		{"condition changed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{map[string]interface{}{"type": "Deployed", "status": "False"}}, "status", "conditions")
		}), false},
		{"generation bumped", mutate(func(u *unstructured.Unstructured) { u.SetGeneration(3) }), true},
		{"labels changed", mutate(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"shard": "b"}) }), true},
		{"owned field wiped by a status update", mutate(func(u *unstructured.Unstructured) {
			unstructured.RemoveNestedField(u.Object, "status", "replicas")
		}), true},
		{"owned field changed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "app=api", "status", "selector")
		}), true},
	}
	p := crInputsChanged()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: tc.new}); got != tc.want {
				t.Fatalf("Update = %v, want %v", got, tc.want)
			}
		})
	}

	unreported := base.DeepCopy()
	unstructured.RemoveNestedField(unreported.Object, "status", "conditions")
	if !p.Update(event.UpdateEvent{ObjectOld: unreported, ObjectNew: base}) {
		t.Error("the helm-operator's first report must trigger a sync")
	}
	if p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("deletions must not trigger a sync")
	}
	if !p.Create(event.CreateEvent{Object: base}) {
		t.Error("creations must trigger a sync")
	}
}

// recordingQueue records how requests are enqueued.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	added []reconcile.Request
	after []time.Duration
}

func (q *recordingQueue) Add(r reconcile.Request) { q.added = append(q.added, r) }
func (q *recordingQueue) AddAfter(r reconcile.Request, d time.Duration) {
	q.added = append(q.added, r)
	q.after = append(q.after, d)
}

func TestEnqueueAfterDelay(t *testing.T) {
	r := &StatusReconciler{GVK: poolGVK, Kinds: testKinds, CoalesceDelay: 150 * time.Millisecond}
	h := r.enqueueAfterDelay(func(obj client.Object) []reconcile.Request {
		return requestsForWorkload(obj, poolGVK.GroupKind(), testKinds)
	})
	q := &recordingQueue{}
	old := readyDeployment("web", poolOwner(), nil, 3, 2, 2)
	moved := old.DeepCopy()
	moved.OwnerReferences = []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-b", "uid-b")}
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: moved}, q)
	h.Create(context.Background(), event.CreateEvent{Object: readyDeployment("x", nil, nil, 1, 1, 1)}, q)

	want := []reconcile.Request{req("ns1", "pool-a"), req("ns1", "pool-b")}
	if len(q.added) != 2 || q.added[0] != want[0] || q.added[1] != want[1] {
		t.Fatalf("enqueued %v, want %v", q.added, want)
	}
	for _, d := range q.after {
		if d != 150*time.Millisecond {
			t.Fatalf("enqueued with delay %v, want the coalesce delay", d)
		}
	}
	if len(q.after) != len(q.added) {
		t.Fatal("requests must be enqueued with AddAfter, not Add")
	}
}

// TestCoalescing shows the property DefaultCoalesceDelay relies on: a burst of
// delayed adds for one key yields a single queue item.
func TestCoalescing(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[reconcile.Request](),
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Clock: clock},
	)
	defer q.ShutDown()
	r := &StatusReconciler{CoalesceDelay: DefaultCoalesceDelay}
	h := r.enqueueAfterDelay(func(obj client.Object) []reconcile.Request {
		return requestsForWorkload(obj, poolGVK.GroupKind(), testKinds)
	})
	d := readyDeployment("web", poolOwner(), nil, 3, 0, 0)
	for i := int32(0); i < 10; i++ {
		next := d.DeepCopy()
		next.Status.ReadyReplicas = i
		h.Update(context.Background(), event.UpdateEvent{ObjectOld: d, ObjectNew: next}, q)
		clock.Step(10 * time.Millisecond)
		d = next
	}
	if q.Len() != 0 {
		t.Fatalf("queue length %d before the delay elapsed, want 0", q.Len())
	}
	clock.Step(DefaultCoalesceDelay)
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // let any further (wrong) item arrive
	if q.Len() != 1 {
		t.Fatalf("queue length %d after the delay, want 1", q.Len())
	}
}
