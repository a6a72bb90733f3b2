package operator

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/valuesfrom"
)

// An upgrade that a change of a spec.valuesFrom source caused leaves the CR's generation as it
// was, so the sidecar's RolledOut written before it names the generation of the new release
// too: Ready waits until RolledOut names the release revision the upgrade made, which the
// manager writes to status.chart, where the sidecar reads it.
func TestManagerStatusAfterAnUpgradeWithNoNewGeneration(t *testing.T) {
	now := metav1.Unix(1000, 0)
	rolledOut := func(revision int64) map[string]any {
		return map[string]any{"type": statuscontract.RolledOut, "status": "True", "observedGeneration": int64(2),
			"reason": "RolloutComplete", "message": statuscontract.RolloutMessage(revision, "1 workload(s) rolled out"),
			"lastTransitionTime": "2025-01-01T00:00:00Z"}
	}
	// Ready at generation 2, release revision 3, rendered from version 10 of the Secret db.
	cr := crAt(2, map[string]any{
		"observedGeneration": int64(2),
		"chart":              map[string]any{chartVersion: "1.0.0", chartDigest: "d", chartRevision: int64(3), chartBehind: false},
		"valuesFrom":         []any{map[string]any{"kind": "Secret", "name": "db", "resourceVersion": "10"}},
		"conditions":         []any{rolledOut(3)},
	})
	// The Secret's version 11 upgraded the release to revision 4, at the same generation.
	upgraded := outcomes.Outcome{UID: "uid-1", Deployed: 2, Chart: outcomes.Chart{Version: "1.0.0", Digest: "d", Revision: 4}, ChartSet: true,
		Applied: []valuesfrom.Source{{Kind: "Secret", Name: "db", ResourceVersion: "11"}}, AppliedSet: true}
	rs := rolloutStatus{targetDigest: "d"}

	f := managerStatus(cr, upgraded, now, rs, "")
	if ready := statuscontract.Find(f.conditions, statuscontract.Ready); ready == nil || ready.Status != metav1.ConditionFalse ||
		ready.Reason != statuscontract.ReasonRollingOut {
		t.Fatalf("Ready %+v beside status.valuesFrom %v, want False %s: the sidecar judged the release before the upgrade",
			ready, f.sources, statuscontract.ReasonRollingOut)
	}
	// What the sidecar reads from the status the manager writes.
	written := crAt(2, f.applyObject(cr).Object["status"].(map[string]any))
	if got := statuscontract.DeployedRevision(written); got != 4 {
		t.Fatalf("the status the manager writes names release revision %d to the sidecar, want 4", got)
	}

	// The sidecar has judged revision 4: Ready.
	written.Object["status"].(map[string]any)["conditions"] = []any{rolledOut(4)}
	f = managerStatus(written, upgraded, now, rs, "")
	if ready := statuscontract.Find(f.conditions, statuscontract.Ready); ready == nil || ready.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v once RolledOut names release revision 4, want True", ready)
	}
}

// staleReader is a cache that holds one version of a CR.
type staleReader struct{ cr *unstructured.Unstructured }

func (s staleReader) Get(_ context.Context, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s.cr.DeepCopyInto(obj.(*unstructured.Unstructured))
	return nil
}

func (s staleReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

type noRollout struct{}

func (noRollout) status(*unstructured.Unstructured) rolloutStatus { return rolloutStatus{} }

type unchangedSources struct{}

func (unchangedSources) Changed(context.Context, *unstructured.Unstructured, []valuesfrom.Source) string {
	return ""
}

// A status write that conflicts because the cache is behind the CR is decided again on the CR
// read from the API server and written at once, not after the cache's next event: the helm
// reconciler tells the readiness controller of an upgrade just before its own status apply,
// so a quiet tenant's CR, served first, is read from the cache before that apply reaches it.
// Only a second conflict goes back to the queue.
func TestReadinessWritesAgainOnTheLiveCROnAConflict(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	at := func(rv string) *unstructured.Unstructured {
		cr := crAt(2, map[string]any{"observedGeneration": int64(1)})
		cr.SetResourceVersion(rv)
		return cr
	}
	for _, tc := range []struct {
		name   string
		cached string // the cache's resourceVersion of the CR
		// server is the API server's resourceVersion of the CR at each call the controller
		// makes to it, in turn (a write, a read, a write).
		server     []string
		wantWrites []string // the resourceVersions the writes are conditional on
		wantReads  int      // reads from the API server
		want       reconcile.Result
	}{
		{name: "cache up to date", cached: "11", server: []string{"11"}, wantWrites: []string{"11"}},
		{name: "cache behind", cached: "10", server: []string{"11", "11", "11"}, wantWrites: []string{"10", "11"}, wantReads: 1},
		{name: "changed again after the read", cached: "10", server: []string{"11", "11", "12"},
			wantWrites: []string{"10", "11"}, wantReads: 1, want: reconcile.Result{RequeueAfter: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var writes []string
			reads, calls := 0, 0
			serverNow := func() string {
				calls++
				return tc.server[min(calls, len(tc.server))-1]
			}
			live := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
					at(serverNow()).DeepCopyInto(obj.(*unstructured.Unstructured))
					reads++
					return nil
				},
				SubResourcePatch: func(_ context.Context, _ client.Client, _ string, obj client.Object, _ client.Patch, _ ...client.SubResourcePatchOption) error {
					writes = append(writes, obj.GetResourceVersion())
					if obj.GetResourceVersion() != serverNow() {
						return apierrors.NewConflict(schema.GroupResource{Resource: "memcacheds"}, key.Name, nil)
					}
					return nil
				},
			}).Build()
			o := outcomes.New()
			o.Succeeded(at(tc.cached), nil)
			drain(o)
			r := &readinessReconciler{reader: staleReader{at(tc.cached)}, client: live, gvk: at("").GroupVersionKind(),
				outcomes: o, rollout: noRollout{}, sources: unchangedSources{}, metrics: metrics.NewFleet(10),
				now: func() metav1.Time { return metav1.Unix(1000, 0) }}

			got, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !slices.Equal(writes, tc.wantWrites) || reads != tc.wantReads {
				t.Fatalf("result %+v, writes on versions %v, %d reads from the API server; want %+v, %v, %d",
					got, writes, reads, tc.want, tc.wantWrites, tc.wantReads)
			}
		})
	}
}

// The readiness controller has two workers and keeps one for the other namespaces: with one of
// a namespace's requests handed out, the second worker takes another namespace's request before
// the first namespace's next, even one queued at low priority.
func TestReadinessKeepsAWorkerForTheOtherNamespaces(t *testing.T) {
	o := readinessOptions()
	if o.MaxConcurrentReconciles != 2 {
		t.Errorf("%d workers, want 2", o.MaxConcurrentReconciles)
	}
	q, ok := o.NewQueue("readiness-check", workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()).(*fairqueue.Queue)
	if !ok {
		t.Fatal("the readiness controller's queue is not the fair queue")
	}
	defer q.ShutDown()
	req := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	q.Add(req("a", "a0"))
	q.Add(req("a", "a1"))
	if first, _ := q.Get(); first != req("a", "a0") {
		t.Fatalf("handed out %s first", first)
	}
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req("b", "b0"))
	if second, _ := q.Get(); second != req("b", "b0") {
		t.Errorf("the second worker took %s, not the other namespace's request", second)
	}
}

// drain empties o's notifications.
func drain(o *outcomes.Store) {
	for len(o.Notify()) > 0 {
		<-o.Notify()
	}
}
