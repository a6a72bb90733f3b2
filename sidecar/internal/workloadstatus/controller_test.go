package workloadstatus

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/kube-openapi/pkg/validation/spec"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/queuetest"
)

var poolGVK = schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"}

// t0 is the lastTransitionTime of the conditions the test CRs start with.
const t0 = "2025-01-01T00:00:00Z"

// justNow, as the lastTransitionTime of an expected condition, stands for a
// time set by the sync under test.
const justNow = "<now>"

// newCR returns a WarpdrivePool pool-a in ns1 as the manager leaves it, with
// the helm-operator's Deployed condition followed by conds and the given extra
// status fields (the manager's observedGeneration among them).
func newCR(generation int64, owned map[string]interface{}, conds ...map[string]interface{}) *unstructured.Unstructured {
	conditions := []interface{}{map[string]interface{}{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"}}
	for _, c := range conds {
		conditions = append(conditions, c)
	}
	status := map[string]interface{}{
		"conditions":      conditions,
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

// atRevision is status fields with the manager's status.chart at release revision.
func atRevision(fields map[string]interface{}, revision int64) map[string]interface{} {
	fields["chart"] = map[string]interface{}{"version": "0.1.0", "digest": "d", "revision": revision}
	return fields
}

// rolledOutEntry is a RolledOut condition as it stands in a CR's status.
func rolledOutEntry(status, reason, message string, observedGeneration int64, lastTransitionTime string) map[string]interface{} {
	return map[string]interface{}{
		"type": "RolledOut", "status": status, "reason": reason, "message": message,
		"observedGeneration": observedGeneration, "lastTransitionTime": lastTransitionTime,
	}
}

// readyEntry is the manager's Ready condition.
func readyEntry(status, reason string) map[string]interface{} {
	return map[string]interface{}{"type": "Ready", "status": status, "reason": reason, "observedGeneration": int64(2), "lastTransitionTime": t0}
}

func poolOwner() []metav1.OwnerReference {
	return []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")}
}

// readyDeployment returns a Deployment at generation 1, seen by its controller,
// that wants replicas replicas and runs them all with its latest spec, ready
// of them ready and available of them available.
func readyDeployment(name string, refs []metav1.OwnerReference, ann map[string]string, replicas, ready, available int32) *appsv1.Deployment {
	d := deployment("ns1", name, refs, ann)
	d.Generation = 1
	d.Spec.Selector = selector("app", name)
	d.Spec.Replicas = ptr.To(replicas)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 1, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: available,
	}
	return d
}

// rolledOutStatefulSet returns a rolled out StatefulSet of n replicas.
func rolledOutStatefulSet(name string, refs []metav1.OwnerReference, ann map[string]string, n int32) *appsv1.StatefulSet {
	s := &appsv1.StatefulSet{ObjectMeta: deployment("ns1", name, refs, ann).ObjectMeta}
	s.Generation = 1
	s.Spec.Selector = selector("app", name)
	s.Spec.Replicas = ptr.To(n)
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	return s
}

// daemonSet returns a DaemonSet at generation 1, seen by its controller, that
// should run on nodes nodes, with its latest spec on all of them.
func daemonSet(name string, refs []metav1.OwnerReference, ann map[string]string, nodes, ready, available int32) *appsv1.DaemonSet {
	ds := &appsv1.DaemonSet{ObjectMeta: deployment("ns1", name, refs, ann).ObjectMeta}
	ds.Generation = 1
	ds.Spec.Selector = selector("app", name)
	ds.Status = appsv1.DaemonSetStatus{
		ObservedGeneration: 1, DesiredNumberScheduled: nodes, CurrentNumberScheduled: nodes, UpdatedNumberScheduled: nodes,
		NumberReady: ready, NumberAvailable: available,
	}
	return ds
}

// statusApply is one write to a CR's status subresource, as sent.
type statusApply struct {
	Subresource string
	Type        types.PatchType
	FieldOwner  string
	Force       bool
	Object      map[string]interface{}
}

// sidecarApply is the status apply the sidecar sends for pool-a: its four
// fields and RolledOut, under its field manager, forced.
func sidecarApply(replicas, ready, available int64, selector string, rolledOut map[string]interface{}) statusApply {
	return statusApply{
		Subresource: "status",
		Type:        types.ApplyPatchType,
		FieldOwner:  "warpdrive-sidecar",
		Force:       true,
		Object: map[string]interface{}{
			"apiVersion": "tos.transwarp.io/v1alpha1",
			"kind":       "WarpdrivePool",
			"metadata":   map[string]interface{}{"name": "pool-a", "namespace": "ns1"},
			"status": map[string]interface{}{
				"replicas":          replicas,
				"readyReplicas":     ready,
				"availableReplicas": available,
				"selector":          selector,
				"conditions":        []interface{}{rolledOut},
			},
		},
	}
}

// poolTypeConverter gives the fake client the field schema of the generated
// WarpdrivePool CRD for its server-side applies. Without it the fake deduces
// a schema from the objects, in which status.conditions is one atomic value:
// an apply of RolledOut alone would then drop the manager's conditions, where
// the API server merges the list by type. metadata and spec are left
// schemaless: the API server takes metadata's schema from ObjectMeta, and the
// test CRs carry a stub spec.
func poolTypeConverter(t *testing.T) managedfields.TypeConverter {
	t.Helper()
	data, err := os.ReadFile("../../../config/crd/bases/tos.transwarp.io_warpdrivepools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != poolGVK.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		props := v.Schema.OpenAPIV3Schema.DeepCopy()
		props.Properties["metadata"] = apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		props.Properties["spec"] = apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		var internal apiext.JSONSchemaProps
		if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, &internal, nil); err != nil {
			t.Fatal(err)
		}
		structural, err := structuralschema.NewStructural(&internal)
		if err != nil {
			t.Fatal(err)
		}
		s := structural.ToKubeOpenAPI()
		s.AddExtension("x-kubernetes-group-version-kind", []interface{}{map[string]interface{}{
			"group": poolGVK.Group, "version": poolGVK.Version, "kind": poolGVK.Kind,
		}})
		tc, err := managedfields.NewTypeConverter(map[string]*spec.Schema{poolGVK.Kind: s}, false)
		if err != nil {
			t.Fatal(err)
		}
		return tc
	}
	t.Fatalf("the WarpdrivePool CRD has no schema for %s", poolGVK.Version)
	return nil
}

// syncHarness runs Reconcile against a fake client standing for the cache and
// the API server, and a second one standing for the API server as StatusReconciler.Live
// reads it. It records the status applies and the live reads.
type syncHarness struct {
	client   client.Client
	live     client.Reader
	applies  []statusApply
	liveGets []string
}

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

func newHarness(t *testing.T, objs ...client.Object) *syncHarness {
	t.Helper()
	h := &syncHarness{}
	statusObj := &unstructured.Unstructured{}
	statusObj.SetGroupVersionKind(poolGVK)
	h.client = fake.NewClientBuilder().
		WithScheme(testScheme(t)).
		WithObjects(objs...).
		WithStatusSubresource(statusObj).
		WithTypeConverters(poolTypeConverter(t), managedfields.NewDeducedTypeConverter()).
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
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				t.Errorf("unexpected update of subresource %q of %T %s", sub, obj, obj.GetName())
				return errors.New("must not update")
			},
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				u, ok := obj.(*unstructured.Unstructured)
				if !ok {
					t.Errorf("status write of a %T, want an unstructured apply configuration", obj)
					return errors.New("not unstructured")
				}
				o := client.SubResourcePatchOptions{}
				o.ApplyOptions(opts)
				h.applies = append(h.applies, statusApply{
					Subresource: sub,
					Type:        patch.Type(),
					FieldOwner:  o.FieldManager,
					Force:       o.Force != nil && *o.Force,
					Object:      u.DeepCopy().Object,
				})
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).
		Build()
	return h
}

// withLive sets up the reader for StatusReconciler.Live, holding objs. When
// getErr is set, every read fails with it.
func (h *syncHarness) withLive(t *testing.T, getErr error, objs ...client.Object) *syncHarness {
	t.Helper()
	copies := make([]client.Object, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopyObject().(client.Object)
	}
	h.live = fake.NewClientBuilder().
		WithScheme(testScheme(t)).
		WithObjects(copies...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				h.liveGets = append(h.liveGets, reflect.TypeOf(obj).Elem().Name()+" "+key.String())
				if getErr != nil {
					return getErr
				}
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				t.Errorf("unexpected live list of %T", list)
				return errors.New("must not list live")
			},
		}).
		Build()
	return h
}

func (h *syncHarness) reconcile(r *StatusReconciler) error {
	r.Client = h.client
	if h.live != nil {
		r.Live = h.live
	}
	if r.GVK.Empty() {
		r.GVK = poolGVK
	}
	if r.Kinds == nil {
		r.Kinds = testKinds
	}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns1", Name: "pool-a"}})
	return err
}

// settleTransitionTimes checks that every RolledOut lastTransitionTime in got
// that want gives as justNow lies between from and to, and replaces it with
// justNow.
func settleTransitionTimes(t *testing.T, got, want []statusApply, from, to time.Time) {
	t.Helper()
	for i := range got {
		if i >= len(want) {
			return
		}
		gotConds, _, _ := unstructured.NestedFieldNoCopy(got[i].Object, "status", "conditions")
		wantConds, _, _ := unstructured.NestedFieldNoCopy(want[i].Object, "status", "conditions")
		g, _ := gotConds.([]interface{})
		w, _ := wantConds.([]interface{})
		if len(g) != 1 || len(w) != 1 {
			continue
		}
		settleTransitionTime(t, g[0], w[0], from, to)
	}
}

// settleTransitionTime does settleTransitionTimes for one condition.
func settleTransitionTime(t *testing.T, got, want interface{}, from, to time.Time) {
	t.Helper()
	g, _ := got.(map[string]interface{})
	w, _ := want.(map[string]interface{})
	if g == nil || w == nil || w["lastTransitionTime"] != justNow {
		return
	}
	s, _ := g["lastTransitionTime"].(string)
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Errorf("lastTransitionTime %q: %v", s, err)
		return
	}
	if at.Before(from.Truncate(time.Second)) || at.After(to) {
		t.Errorf("lastTransitionTime %s, want the time of the sync (%s to %s)", s, from.Format(time.RFC3339), to.Format(time.RFC3339))
		return
	}
	g["lastTransitionTime"] = justNow
}

func TestSync(t *testing.T) {
	// pool-a at generation 2, deployed and rolled out with its one Deployment web.
	upToDate := func() map[string]interface{} {
		return map[string]interface{}{
			"observedGeneration": int64(2),
			"replicas":           int64(3), "readyReplicas": int64(3), "availableReplicas": int64(3), "selector": "app=web",
		}
	}
	rolledOut2 := rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 2, t0)
	web := func() *appsv1.Deployment { return readyDeployment("web", poolOwner(), nil, 3, 3, 3) }
	// pool-a at generation 2, deployed, with web still rolling out.
	rollingOut := func() *unstructured.Unstructured {
		return newCR(2, map[string]interface{}{
			"observedGeneration": int64(2),
			"replicas":           int64(3), "readyReplicas": int64(2), "availableReplicas": int64(2), "selector": "app=web",
		}, rolledOutEntry("False", "RollingOut", "Deployment web: 2 of 3 replicas available", 2, t0))
	}

	deleting := newCR(2, upToDate())
	now := metav1.Now()
	deleting.SetDeletionTimestamp(&now)
	deleting.SetFinalizers([]string{"uninstall-helm-release"})
	unreported := newCR(1, nil)
	unstructured.RemoveNestedField(unreported.Object, "status")

	cases := []struct {
		name string
		// objs are in the cache and the API server alike.
		objs []client.Object
		// live, when not nil, replaces the workloads of objs in the API
		// server as Live reads it; an empty slice means they are gone.
		live    []client.Object
		noLive  bool // StatusReconciler.Live unset
		liveErr error
		// selector is the watches.yaml selector.
		selector     labels.Selector
		want         []statusApply
		wantLiveGets []string
		wantErr      bool
	}{{
		name: "first report: all fields",
		objs: []client.Object{
			newCR(2, map[string]interface{}{"observedGeneration": int64(2)}),
			readyDeployment("web", poolOwner(), helmAnnotations("pool-a", "ns1"), 3, 2, 1),
			readyDeployment("api", nil, helmAnnotations("pool-a", "ns1"), 2, 1, 1),
			rolledOutStatefulSet("db", poolOwner(), nil, 1),
			daemonSet("agent", nil, helmAnnotations("pool-a", "ns1"), 4, 4, 3),
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
		// api sorts before web, so its selector is the scale selector and
		// it is the workload RolledOut names.
		want: []statusApply{sidecarApply(10, 8, 6, "app=api",
			rolledOutEntry("False", "RollingOut", "Deployment api: 1 of 2 replicas available (and 2 more workload(s) rolling out)", 2, justNow))},
	}, {
		name: "nothing changed: no write",
		objs: []client.Object{newCR(2, upToDate(), rolledOut2), web()},
	}, {
		name: "the manager's conditions are no input",
		objs: []client.Object{newCR(2, upToDate(), readyEntry("False", "RollingOut"), rolledOut2), web()},
	}, {
		name: "spec edited, not deployed yet: no write",
		objs: []client.Object{newCR(3, upToDate(), rolledOut2), web()},
	}, {
		// The upgrade to generation 3 has changed web; the manager has not said so yet.
		name: "spec edited, its upgrade not recorded, web rolling: RolledOut kept, no write",
		objs: []client.Object{newCR(3, upToDate(), rolledOut2), func() client.Object {
			d := web()
			d.Generation = 2 // its controller has not seen the new spec
			return d
		}()},
	}, {
		name: "spec edited, its upgrade not recorded, a pod unavailable: the counts written, RolledOut kept",
		objs: []client.Object{newCR(3, upToDate(), rolledOut2), readyDeployment("web", poolOwner(), nil, 3, 2, 2)},
		want: []statusApply{sidecarApply(3, 2, 2, "app=web", rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 2, t0))},
	}, {
		name: "a pod became unavailable: RolledOut stays False, its lastTransitionTime is kept",
		objs: []client.Object{rollingOut(), readyDeployment("web", poolOwner(), nil, 3, 1, 1)},
		want: []statusApply{sidecarApply(3, 1, 1, "app=web",
			rolledOutEntry("False", "RollingOut", "Deployment web: 1 of 3 replicas available", 2, t0))},
	}, {
		name: "rolled out: confirmed by a live read before RolledOut becomes True",
		objs: []client.Object{rollingOut(), web()},
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 2, justNow))},
		wantLiveGets: []string{"Deployment ns1/web"},
	}, {
		name:   "rolled out, Live unset: the cache's view is written",
		objs:   []client.Object{rollingOut(), web()},
		noLive: true,
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 2, justNow))},
	}, {
		name: "new generation deployed: RolledOut at it after a live read, lastTransitionTime kept",
		objs: []client.Object{newCR(3, map[string]interface{}{
			"observedGeneration": int64(3),
			"replicas":           int64(3), "readyReplicas": int64(3), "availableReplicas": int64(3), "selector": "app=web",
		}, rolledOut2), web()},
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 3, t0))},
		wantLiveGets: []string{"Deployment ns1/web"},
	}, {
		name: "upgraded with no new generation (a source of valuesFrom changed): RolledOut names the new release revision, after a live read",
		objs: []client.Object{newCR(2, atRevision(upToDate(), 4),
			rolledOutEntry("True", "RolloutComplete", "release revision 3: 1 workload(s) rolled out", 2, t0)), web()},
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("True", "RolloutComplete", "release revision 4: 1 workload(s) rolled out", 2, t0))},
		wantLiveGets: []string{"Deployment ns1/web"},
	}, {
		name: "upgraded with no new generation, the cache behind: the API server's new spec, unseen, is judged",
		objs: []client.Object{newCR(2, atRevision(upToDate(), 4),
			rolledOutEntry("True", "RolloutComplete", "release revision 3: 1 workload(s) rolled out", 2, t0)), web()},
		live: []client.Object{func() client.Object {
			d := readyDeployment("web", poolOwner(), nil, 3, 3, 3)
			d.Generation = 2
			return d
		}()},
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("False", "RollingOut", "release revision 4: Deployment web: its controller has not seen the new spec yet", 2, justNow))},
		wantLiveGets: []string{"Deployment ns1/web"},
	}, {
		name: "live state wins: the cache has the rolled out Deployment, the API server its new spec, unseen",
		objs: []client.Object{newCR(3, map[string]interface{}{
			"observedGeneration": int64(3),
			"replicas":           int64(3), "readyReplicas": int64(3), "availableReplicas": int64(3), "selector": "app=web",
		}, rolledOut2), web()},
		live: []client.Object{func() client.Object {
			d := readyDeployment("web", poolOwner(), nil, 3, 3, 3)
			d.Generation = 2
			d.Status.Replicas = 4 // a surge pod already, counted from the live object too
			return d
		}()},
		want: []statusApply{sidecarApply(4, 3, 3, "app=web",
			rolledOutEntry("False", "RollingOut", "Deployment web: its controller has not seen the new spec yet", 3, justNow))},
		wantLiveGets: []string{"Deployment ns1/web"},
	}, {
		name: "first rolled out: every workload is read again, and the live counts are written",
		objs: []client.Object{
			rollingOut(),
			web(),
			rolledOutStatefulSet("db", poolOwner(), nil, 1),
			daemonSet("agent", nil, helmAnnotations("pool-a", "ns1"), 4, 4, 4),
			readyDeployment("other", nil, helmAnnotations("pool-b", "ns1"), 9, 9, 9),
		},
		live: []client.Object{
			web(),
			rolledOutStatefulSet("db", poolOwner(), nil, 2),
			daemonSet("agent", nil, helmAnnotations("pool-a", "ns1"), 5, 5, 5), // a node joined
			readyDeployment("other", nil, helmAnnotations("pool-b", "ns1"), 9, 9, 9),
		},
		want: []statusApply{sidecarApply(10, 10, 10, "app=web",
			rolledOutEntry("True", "RolloutComplete", "3 workload(s) rolled out", 2, justNow))},
		// Found by owner first, then by release name; kinds in list order.
		wantLiveGets: []string{"Deployment ns1/web", "StatefulSet ns1/db", "DaemonSet ns1/agent"},
	}, {
		name: "live Deployment gone: left out",
		objs: []client.Object{rollingOut(), web()},
		live: []client.Object{},
		want: []statusApply{sidecarApply(0, 0, 0, "",
			rolledOutEntry("True", "RolloutComplete", "0 workload(s) rolled out", 2, justNow))},
		wantLiveGets: []string{"Deployment ns1/web"},
	}, {
		name:         "live read fails: error, no write",
		objs:         []client.Object{rollingOut(), web()},
		liveErr:      errors.New("connection refused"),
		wantLiveGets: []string{"Deployment ns1/web"},
		wantErr:      true,
	}, {
		name: "owned fields wiped, RolledOut the same: no live read",
		objs: []client.Object{newCR(2, map[string]interface{}{"observedGeneration": int64(2)}, rolledOut2), web()},
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 2, t0))},
	}, {
		name: "nothing deployed yet: RolledOut Unknown",
		objs: []client.Object{newCR(1, nil), web()},
		want: []statusApply{sidecarApply(3, 3, 3, "app=web",
			rolledOutEntry("Unknown", "NothingDeployed", "no release is deployed yet", 0, justNow))},
	}, {
		name: "all workloads gone: zeros",
		objs: []client.Object{newCR(2, upToDate(), rolledOut2)},
		want: []statusApply{sidecarApply(0, 0, 0, "",
			rolledOutEntry("True", "RolloutComplete", "0 workload(s) rolled out", 2, t0))},
	}, {
		name: "CR deleted: nothing to do",
		objs: []client.Object{web()},
	}, {
		name: "CR being deleted: no write",
		objs: []client.Object{deleting, readyDeployment("web", poolOwner(), nil, 3, 2, 2)},
	}, {
		name: "helm-operator has not reported yet: no write",
		objs: []client.Object{unreported, web()},
	}, {
		name:     "CR outside the watches selector: no write",
		objs:     []client.Object{newCR(2, map[string]interface{}{"observedGeneration": int64(2)}), web()},
		selector: labels.SelectorFromSet(labels.Set{"shard": "b"}),
	}, {
		name:     "CR inside the watches selector",
		objs:     []client.Object{newCR(2, upToDate(), rolledOut2), readyDeployment("web", poolOwner(), nil, 3, 2, 2)},
		selector: labels.SelectorFromSet(labels.Set{"shard": "a"}),
		want: []statusApply{sidecarApply(3, 2, 2, "app=web",
			rolledOutEntry("False", "RollingOut", "Deployment web: 2 of 3 replicas available", 2, justNow))},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.objs...)
			if !tc.noLive {
				live := tc.live
				if live == nil {
					for _, o := range tc.objs {
						if _, isCR := o.(*unstructured.Unstructured); !isCR {
							live = append(live, o)
						}
					}
				}
				h.withLive(t, tc.liveErr, live...)
			}
			from := time.Now()
			err := h.reconcile(&StatusReconciler{Selector: tc.selector})
			to := time.Now()
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile error = %v, want error %v", err, tc.wantErr)
			}
			settleTransitionTimes(t, h.applies, tc.want, from, to)
			if diff := cmp.Diff(tc.want, h.applies); diff != "" {
				t.Errorf("status applies (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLiveGets, h.liveGets); diff != "" {
				t.Errorf("live reads (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSyncConverges checks, against the fake API server's server-side apply
// with the CRD's schema, that the apply leaves the manager's fields alone and
// that a second sync over the applied object writes nothing.
func TestSyncConverges(t *testing.T) {
	h := newHarness(t,
		newCR(2, map[string]interface{}{"observedGeneration": int64(2)}, readyEntry("False", "RollingOut")),
		readyDeployment("web", poolOwner(), nil, 3, 3, 3))
	h.withLive(t, nil, readyDeployment("web", poolOwner(), nil, 3, 3, 3))
	from := time.Now()
	for i := 0; i < 2; i++ {
		if err := h.reconcile(&StatusReconciler{}); err != nil {
			t.Fatalf("Reconcile %d: %v", i+1, err)
		}
	}
	to := time.Now()
	if len(h.applies) != 1 {
		t.Fatalf("status applies = %v, want exactly one", h.applies)
	}
	if diff := cmp.Diff([]string{"Deployment ns1/web"}, h.liveGets); diff != "" {
		t.Errorf("live reads (-want +got):\n%s", diff)
	}

	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(poolGVK)
	if err := h.client.Get(context.Background(), types.NamespacedName{Namespace: "ns1", Name: "pool-a"}, got); err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"observedGeneration": int64(2),
		"deployedRelease":    map[string]interface{}{"name": "pool-a"},
		"conditions": []interface{}{
			map[string]interface{}{"type": "Deployed", "status": "True", "reason": "InstallSuccessful"},
			readyEntry("False", "RollingOut"),
			rolledOutEntry("True", "RolloutComplete", "1 workload(s) rolled out", 2, justNow),
		},
		"replicas": int64(3), "readyReplicas": int64(3), "availableReplicas": int64(3), "selector": "app=web",
	}
	status, _, _ := unstructured.NestedMap(got.Object, "status")
	if conds, _ := status["conditions"].([]interface{}); len(conds) == 3 {
		settleTransitionTime(t, conds[2], want["conditions"].([]interface{})[2], from, to)
	}
	if diff := cmp.Diff(want, status); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if rc, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicaCount"); rc != 3 {
		t.Errorf("spec.replicaCount = %d, want the spec untouched", rc)
	}
}

func TestCRInputsChanged(t *testing.T) {
	base := newCR(2, atRevision(map[string]interface{}{"observedGeneration": int64(2), "replicas": int64(3), "selector": "app=web"}, 4),
		readyEntry("False", "RollingOut"),
		rolledOutEntry("False", "RollingOut", "Deployment web: 2 of 3 replicas available", 2, t0))
	mutate := func(f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := base.DeepCopy()
		f(u)
		return u
	}
	// condition returns the i-th condition of u (Deployed, Ready, RolledOut).
	condition := func(u *unstructured.Unstructured, i int) map[string]interface{} {
		return u.Object["status"].(map[string]interface{})["conditions"].([]interface{})[i].(map[string]interface{})
	}
	cases := []struct {
		name string
		new  *unstructured.Unstructured
		want bool
	}{
		{"no change", base.DeepCopy(), false},
		{"finalizer added", mutate(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"f"}) }), false},
		{"helm-operator's condition changed", mutate(func(u *unstructured.Unstructured) { condition(u, 0)["status"] = "False" }), false},
		{"manager's condition changed", mutate(func(u *unstructured.Unstructured) { condition(u, 1)["status"] = "True" }), false},
		{"deployedRelease changed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, "pool-a.v2", "status", "deployedRelease", "name")
		}), false},
		{"generation bumped", mutate(func(u *unstructured.Unstructured) { u.SetGeneration(3) }), true},
		{"labels changed", mutate(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"shard": "b"}) }), true},
		{"manager's observedGeneration changed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(3), "status", "observedGeneration")
		}), true},
		{"manager's release revision changed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(5), "status", "chart", "revision")
		}), true},
		{"the rest of the manager's status.chart changed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, true, "status", "chart", "behind")
		}), false},
		{"RolledOut changed", mutate(func(u *unstructured.Unstructured) { condition(u, 2)["status"] = "True" }), true},
		{"RolledOut message changed", mutate(func(u *unstructured.Unstructured) {
			condition(u, 2)["message"] = "Deployment web: 1 of 3 replicas available"
		}), true},
		{"RolledOut removed", mutate(func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedSlice(u.Object, []interface{}{condition(u, 0), condition(u, 1)}, "status", "conditions")
		}), true},
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

	// The first report, with nothing else changed: neither has RolledOut.
	reported := newCR(2, nil)
	unreported := reported.DeepCopy()
	unstructured.RemoveNestedField(unreported.Object, "status", "conditions")
	if !p.Update(event.UpdateEvent{ObjectOld: unreported, ObjectNew: reported}) {
		t.Error("the helm-operator's first report must trigger a sync")
	}
	if p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("deletions must not trigger a sync")
	}
	if !p.Create(event.CreateEvent{Object: base}) {
		t.Error("creations must trigger a sync")
	}
}

func TestEnqueueAfterDelay(t *testing.T) {
	r := &StatusReconciler{GVK: poolGVK, Kinds: testKinds, CoalesceDelay: 150 * time.Millisecond}
	h := r.enqueueAfterDelay(func(obj client.Object) []reconcile.Request {
		return requestsForWorkload(obj, poolGVK.GroupKind(), testKinds)
	})
	q := &queuetest.Queue{}
	old := readyDeployment("web", poolOwner(), nil, 3, 2, 2)
	moved := old.DeepCopy()
	moved.OwnerReferences = []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-b", "uid-b")}
	h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: moved}, q)
	h.Create(context.Background(), event.CreateEvent{Object: readyDeployment("x", nil, nil, 1, 1, 1)}, q)

	// Both owners, old and new, after the coalescing delay; nothing for the unowned one.
	if diff := q.Diff(
		queuetest.Action{Request: req("ns1", "pool-a"), After: 150 * time.Millisecond},
		queuetest.Action{Request: req("ns1", "pool-b"), After: 150 * time.Millisecond},
	); diff != "" {
		t.Fatal(diff)
	}
}

// A CR's and a workload's events wait out the coalescing delay, except the two a tenant's
// Ready waits on: the update that moves the manager's observedGeneration, and the one that
// finishes a workload's rollout. Those are added at once, each request once.
func TestEnqueueAtOnce(t *testing.T) {
	r := &StatusReconciler{GVK: poolGVK, Kinds: testKinds, CoalesceDelay: 150 * time.Millisecond}
	ctx := context.Background()
	now := queuetest.Action{Request: req("ns1", "pool-a")}
	delayed := queuetest.Action{Request: req("ns1", "pool-a"), After: 150 * time.Millisecond}

	t.Run("CR", func(t *testing.T) {
		h := r.enqueue(crRequest, recorded)
		q := &queuetest.Queue{}
		cr := newCR(2, nil)
		_ = unstructured.SetNestedField(cr.Object, int64(1), "status", "observedGeneration")
		moved := cr.DeepCopy()
		_ = unstructured.SetNestedField(moved.Object, int64(2), "status", "observedGeneration")
		relabelled := moved.DeepCopy()
		relabelled.SetLabels(map[string]string{"tier": "web"})

		h.Create(ctx, event.CreateEvent{Object: cr}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: cr, ObjectNew: moved}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: moved, ObjectNew: relabelled}, q)
		// An update's old object, then its new one, when delayed.
		if diff := q.Diff(delayed, now, delayed, delayed); diff != "" {
			t.Fatal(diff)
		}
	})

	t.Run("workload", func(t *testing.T) {
		h := r.enqueue(func(obj client.Object) []reconcile.Request {
			return requestsForWorkload(obj, poolGVK.GroupKind(), testKinds)
		}, rolloutDone)
		q := &queuetest.Queue{}
		progressing := readyDeployment("web", poolOwner(), nil, 3, 1, 1)
		further := readyDeployment("web", poolOwner(), nil, 3, 2, 2)
		done := readyDeployment("web", poolOwner(), nil, 3, 3, 3)
		flapped := readyDeployment("web", poolOwner(), nil, 3, 2, 2)

		h.Update(ctx, event.UpdateEvent{ObjectOld: progressing, ObjectNew: further}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: further, ObjectNew: done}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: done, ObjectNew: flapped}, q)
		if diff := q.Diff(delayed, delayed, now, delayed, delayed); diff != "" {
			t.Fatal(diff)
		}
	})
}

// Telling whether an update finished a rollout allocates nothing for a workload that has rolled
// out and stays so, the most common update the sidecar sees.
func TestRolloutDoneOfARolledOutWorkloadAllocatesNothing(t *testing.T) {
	done := readyDeployment("web", poolOwner(), nil, 3, 3, 3)
	relabelled := done.DeepCopy()
	relabelled.Labels = map[string]string{"tier": "web"}
	var finished bool
	if allocs := testing.AllocsPerRun(100, func() { finished = rolloutDone(done, relabelled) }); allocs != 0 {
		t.Errorf("%v allocations per update, want 0", allocs)
	}
	if finished {
		t.Error("an update of a workload that had rolled out finished its rollout")
	}
}

// The status controller keeps one of its workers for the other namespaces: with one namespace
// holding all the others, the last worker takes another namespace's request before that
// namespace's next, even one queued at low priority.
func TestStatusKeepsAWorkerForTheOtherNamespaces(t *testing.T) {
	r := &StatusReconciler{Workers: DefaultWorkers}
	o := r.options()
	if o.MaxConcurrentReconciles != DefaultWorkers {
		t.Errorf("%d workers, want %d", o.MaxConcurrentReconciles, DefaultWorkers)
	}
	q, ok := o.NewQueue("status-check", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*fairqueue.Queue)
	if !ok {
		t.Fatal("the status controller's queue is not the fair queue")
	}
	defer q.ShutDown()
	for i := range DefaultWorkers {
		q.Add(req("a", fmt.Sprint("a", i)))
	}
	for i := range DefaultWorkers - 1 {
		if got, _ := q.Get(); got != req("a", fmt.Sprint("a", i)) {
			t.Fatalf("worker %d took %s, want a/a%d", i, got, i)
		}
	}
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req("b", "b0"))
	if last, _ := q.Get(); last != req("b", "b0") {
		t.Errorf("the last worker took %s, not the other namespace's request", last)
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
