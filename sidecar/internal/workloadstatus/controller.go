// Package workloadstatus reports the live state of the workloads behind the
// operator's custom resources in the CRs' status.
//
// The helm-operator turns each CR into a Helm release and the manager records
// in the CR's status which generation is deployed (observedGeneration). This
// package adds replicas, readyReplicas, availableReplicas and selector, summed
// over the release's Deployments, StatefulSets and DaemonSets, and the
// RolledOut condition: whether every one of them has rolled out, for the
// generation and the release revision the manager last deployed. The
// manager's Ready depends on it (docs/status.md). It works for every kind in
// watches.yaml without per-kind code.
//
// The StatusReconciler loop, one controller per CR kind:
//
//  1. A CR event (create, generation, labels, the manager's observedGeneration
//     or release revision, or owned status fields changed) or an event on a
//     workload that belongs to a CR of the kind enqueues the CR's
//     namespace/name, with a short delay that coalesces bursts; the manager's
//     observedGeneration moving and a workload's rollout finishing are
//     enqueued at once (enqueue).
//  2. sync reads the CR and the release's workloads from the informer cache,
//     skips CRs that are being deleted, fall outside the watches.yaml
//     selector or have no helm-operator report yet, and computes the desired
//     owned status; while the CR's generation is ahead of observedGeneration
//     it keeps RolledOut as it is (upgradeUnrecorded). Before it first says
//     that a generation has rolled out, it reads the workloads again from the
//     API server.
//  3. If a field differs, sync applies its fields (server-side apply, field
//     manager warpdrive-sidecar); otherwise it writes nothing. Errors go back
//     to the workqueue, which retries with per-item exponential backoff.
//
// Writes are kept to real changes: each one wakes the manager's readiness
// controller and every other watcher of the CR.
package workloadstatus

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/fairqueue"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/sidecar/internal/enqueue"
)

// DefaultCoalesceDelay is how long a CR waits in the queue after an event
// before it is synced.
//
// client-go's delaying queue keeps one waiting entry per key, at the earliest
// requested time, so every event for a CR that arrives within the delay joins
// the same pending sync, and that sync reads the settled state from the cache.
// A Deployment rollout or a helm upgrade touching several workloads of one
// release produces a burst of status updates within a few hundred
// milliseconds; without the delay each would be its own status write and so
// its own helm-operator reconcile (~0.3-0.5 CPU-s). Pods take seconds to
// become ready, so 200 ms of added latency is not noticeable.
const DefaultCoalesceDelay = 200 * time.Millisecond

// DefaultWorkers is how many CRs of one kind are synced at once.
//
// A sync is mostly waiting: on the API server, for the status write (and for the workloads'
// fresh reads before a first RolledOut=True). In a wave of upgrades that wait is tens of
// milliseconds, so one worker caps a kind at about 20 writes a second. At the end of a wave
// of 1000 rollouts (make bench) one worker left 436 CRs queued and wrote the last status 14 s
// after its Deployment had rolled out. Syncs of different CRs share nothing but the cache and
// the API server; the workqueue never hands one CR to two workers.
const DefaultWorkers = 4

// Workload reads: the status is computed from these kinds, which are watched
// so that their changes reach the CRs.
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch

// CR reads and status writes (get, list and watch; patch on the status subresource) need
// no markers: the kinds come from watches.yaml at run time, and make manifests
// (internal/gen/kindgen) generates the manager role's rules on every kind of watches.yaml, which
// include these verbs.

// StatusReconciler keeps the owned status fields of one CR kind in step with
// the workloads of each CR's Helm release.
type StatusReconciler struct {
	// Client reads from the manager's cache (CRs included, see
	// client.CacheOptions.Unstructured) and writes to the API server.
	Client client.Client
	// GVK is the CR kind this controller serves.
	GVK schema.GroupVersionKind
	// Kinds holds all CR kinds of the operator, to tell a workload owned by
	// another kind's CR from one that only carries Helm annotations.
	Kinds KindSet
	// Selector is the watches.yaml selector of GVK; nil selects everything.
	Selector labels.Selector
	// Live reads workloads from the API server, bypassing the cache, before a
	// CR is first said to be rolled out at a generation. Nil skips the check.
	Live client.Reader
	// CoalesceDelay defaults to DefaultCoalesceDelay.
	CoalesceDelay time.Duration
	// Workers is how many CRs are synced at once; it defaults to DefaultWorkers.
	Workers int
}

// SetupIndexes registers the cache index that finds a release's workloads. It
// must run once per manager, before the controllers are set up.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	for _, obj := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &appsv1.DaemonSet{}} {
		if err := indexer.IndexField(ctx, obj, releaseIndex, releaseIndexValues); err != nil {
			return fmt.Errorf("indexing %T by release: %w", obj, err)
		}
	}
	return nil
}

// SetupWithManager creates the controller for r.GVK.
func (r *StatusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.CoalesceDelay == 0 {
		r.CoalesceDelay = DefaultCoalesceDelay
	}
	if r.Workers == 0 {
		r.Workers = DefaultWorkers
	}
	gk := r.GVK.GroupKind()
	name := "status-" + strings.ToLower(gk.String())
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.GVK)

	workloadToCRs := func(obj client.Object) []reconcile.Request {
		return requestsForWorkload(obj, gk, r.Kinds)
	}

	// The CR is watched with Watches rather than For so that its events go
	// through the same coalescing delay as the workloads' events (see enqueue).
	return ctrl.NewControllerManagedBy(mgr).
		Named(name).
		WithOptions(r.options()).
		WithLogConstructor(func(req *reconcile.Request) logr.Logger {
			l := mgr.GetLogger().WithValues("controller", name, "controllerGroup", gk.Group, "controllerKind", gk.Kind)
			if req != nil {
				l = l.WithValues(gk.Kind, klog.KRef(req.Namespace, req.Name), "namespace", req.Namespace, "name", req.Name)
			}
			return l
		}).
		Watches(cr, r.enqueue(crRequest, recorded), builder.WithPredicates(crInputsChanged())).
		Watches(&appsv1.Deployment{}, r.enqueue(workloadToCRs, rolloutDone)).
		Watches(&appsv1.StatefulSet{}, r.enqueue(workloadToCRs, rolloutDone)).
		Watches(&appsv1.DaemonSet{}, r.enqueue(workloadToCRs, rolloutDone)).
		Complete(r)
}

// options are the controller's: r.Workers workers over the fair queue, one of them kept for
// the namespaces other than the busiest (fairqueue.ForWorkers), as the manager's helm and
// readiness controllers keep one.
//
// Why the fair queue: one tenant's thousand rollouts do not keep another's status waiting
// behind theirs. Why a worker kept: taking turns orders the queued requests, but a worker
// busy with a sync (a read of the workloads, a status write, each a round trip to a loaded API
// server) is not free until it ends. While a tenant installed a thousand CRs, the other
// tenant's request was handed out twice with three of the busy tenant's out, which without
// the kept worker it would have waited for (docs/bench/memory.md, "An edit wave with one
// sidecar worker kept for the other namespaces (twenty-fourth)").
func (r *StatusReconciler) options() controller.Options {
	return controller.Options{MaxConcurrentReconciles: r.Workers, NewQueue: fairqueue.ForWorkers(r.Workers)}
}

// enqueueAfterDelay maps each event's object (both versions on update, so
// that a workload moving between CRs updates both) to requests and adds them
// to the queue after r.CoalesceDelay; see DefaultCoalesceDelay.
func (r *StatusReconciler) enqueueAfterDelay(mapFn func(client.Object) []reconcile.Request) handler.EventHandler {
	return enqueue.After(r.CoalesceDelay, func(obj client.Object, _ enqueue.Op) []reconcile.Request {
		return mapFn(obj)
	})
}

// enqueue maps each event's object to requests and adds them as enqueueAfterDelay does, but
// at once on an update for which now(old, new) holds: the CR's that moves the manager's
// observedGeneration (recorded), a workload's that finishes its rollout (rolloutDone).
//
// Why: those are the two inputs a tenant who edited a CR waits on, the last of them being
// what lets the sync say RolledOut, and then the manager say Ready, at the new generation.
// Neither is part of a burst: the upgrade wrote its workloads before the manager recorded it,
// and a rollout finishes once. The events between (the upgrade's writes, the rollout's
// progress) still wait out the delay. With every event delayed, RolledOut came 72-215 ms after
// the later of the two in a quiet tenant's edits, and 13-43 ms with these two added at once
// (docs/bench/memory.md, "An edit wave whose sidecar syncs at once on what Ready waits for
// (twenty-fifth)").
func (r *StatusReconciler) enqueue(mapFn func(client.Object) []reconcile.Request, now func(oldObj, newObj client.Object) bool) handler.EventHandler {
	delayed := r.enqueueAfterDelay(mapFn)
	return handler.Funcs{
		CreateFunc: delayed.Create,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld == nil || e.ObjectNew == nil || !now(e.ObjectOld, e.ObjectNew) {
				delayed.Update(ctx, e, q)
				return
			}
			added := map[reconcile.Request]bool{}
			for _, obj := range []client.Object{e.ObjectOld, e.ObjectNew} {
				for _, req := range mapFn(obj) {
					if !added[req] {
						added[req] = true
						q.Add(req)
					}
				}
			}
		},
		DeleteFunc:  delayed.Delete,
		GenericFunc: delayed.Generic,
	}
}

// recorded reports whether an update of a CR moved the manager's observedGeneration: its word
// that an upgrade is recorded.
func recorded(oldObj, newObj client.Object) bool {
	return observedGeneration(oldObj) != observedGeneration(newObj)
}

// rolloutDone reports whether an update of a workload finished its rollout. The new object is
// asked first: most updates are of a workload that has rolled out and stays so, and asking it
// costs nothing, where a rollout under way is told in a message.
func rolloutDone(oldObj, newObj client.Object) bool {
	was, okOld := workloadOf(oldObj)
	is, okNew := workloadOf(newObj)
	return okOld && okNew && is.rollout() == "" && was.rollout() != ""
}

// workloadOf is obj's Workload, if obj is a Deployment, StatefulSet or DaemonSet.
func workloadOf(obj client.Object) (Workload, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return FromDeployment(o), true
	case *appsv1.StatefulSet:
		return FromStatefulSet(o), true
	case *appsv1.DaemonSet:
		return FromDaemonSet(o), true
	}
	return Workload{}, false
}

// crRequest is the request of the CR obj.
func crRequest(obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(obj)}}
}

// observedGeneration is the manager's status.observedGeneration of the CR obj (0: none, or
// obj not an unstructured CR).
func observedGeneration(obj client.Object) int64 {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return 0
	}
	g, _, _ := unstructured.NestedInt64(u.Object, "status", statuscontract.FieldObservedGeneration)
	return g
}

// crInputsChanged lets through CR creations and the updates that can change
// the outcome of sync: a new generation (observedGeneration), new labels (the
// watches.yaml selector), the helm-operator's first status report (see sync)
// or different owned status fields. The last one matters because the
// helm-operator writes status with a full update of {conditions,
// deployedRelease}, which drops the sidecar's fields; the next sync restores
// them. Deletions need no work.
func crInputsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldCR, okOld := e.ObjectOld.(*unstructured.Unstructured)
			newCR, okNew := e.ObjectNew.(*unstructured.Unstructured)
			if !okOld || !okNew {
				return true
			}
			return oldCR.GetGeneration() != newCR.GetGeneration() ||
				!equality.Semantic.DeepEqual(oldCR.GetLabels(), newCR.GetLabels()) ||
				helmOperatorReported(oldCR) != helmOperatorReported(newCR) ||
				!reflect.DeepEqual(ownedStatusFields(oldCR), ownedStatusFields(newCR))
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
}

// Reconcile syncs the CR named by req.
func (r *StatusReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(r.GVK)
	if err := r.Client.Get(ctx, req.NamespacedName, cr); err != nil {
		// A deleted CR needs nothing: its workloads go with its release.
		// Requests from Helm annotations for a CR of another kind end here
		// too (see requestsForWorkload).
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, r.sync(ctx, cr)
}

// sync compares the owned status fields of cr with those computed from its
// workloads and patches the ones that differ.
func (r *StatusReconciler) sync(ctx context.Context, cr *unstructured.Unstructured) error {
	// A CR being deleted is being uninstalled; reporting its workloads going
	// away would only make the helm-operator reconcile it again.
	if cr.GetDeletionTimestamp() != nil {
		return nil
	}
	// The helm-operator does not reconcile CRs outside its selector, so they
	// have no release and nothing to report.
	if r.Selector != nil && !r.Selector.Matches(labels.Set(cr.GetLabels())) {
		return nil
	}
	// Until the helm-operator has written its first conditions, its first
	// reconcile (finalizer, install, then one status update at the end) is
	// in flight. A status write now would make that final update fail with a
	// conflict and cost a second full reconcile; the report itself re-triggers
	// this sync through crInputsChanged.
	if !helmOperatorReported(cr) {
		return nil
	}

	workloads, err := r.workloadsOf(ctx, cr)
	if err != nil {
		return err
	}
	deployed := observedGeneration(cr)
	revision := statuscontract.DeployedRevision(cr)
	desired := ComputeStatus(deployed, revision, workloads)
	old := statuscontract.Find(statuscontract.Conditions(cr), statuscontract.RolledOut)
	if upgradeUnrecorded(cr, deployed) && old != nil {
		desired.RolledOut = *old
	}
	if desired.RolledOut.Status == metav1.ConditionTrue && !statuscontract.SameCondition(&desired.RolledOut, old) && r.Live != nil {
		// Rolled out at a generation for the first time. The cache may not have the
		// manager's last upgrade of a workload yet, though the manager has already said it
		// is done: the CR's event can come before the workload's. Read the workloads from
		// the API server before saying so, so that Ready never comes early.
		if workloads, err = r.liveWorkloads(ctx, cr.GetNamespace(), workloads); err != nil {
			return err
		}
		desired = ComputeStatus(deployed, revision, workloads)
	}
	if !differs(cr, desired) {
		return nil
	}
	statuscontract.KeepTransitionTime(&desired.RolledOut, old, metav1.Now())

	// A server-side apply of the sidecar's fields alone (field manager
	// warpdrive-sidecar): it cannot remove or change the manager's fields, and
	// needs no resourceVersion, so it cannot conflict with the manager's writes.
	// The values are recomputed from scratch on every sync; a stale cache costs at
	// most a write of values already there, which the API server turns into a
	// no-op that produces no event.
	log.FromContext(ctx).V(1).Info("Applying status", "rolledOut", desired.RolledOut.Status, "message", desired.RolledOut.Message)
	err = r.Client.Status().Patch(ctx, applyObject(cr, desired), client.Apply,
		client.FieldOwner(statuscontract.SidecarFieldManager), client.ForceOwnership)
	return client.IgnoreNotFound(err)
}

// upgradeUnrecorded reports whether cr's generation is ahead of the one the manager says is
// deployed: an upgrade is pending or under way, and the workloads may already be its new
// release's, which the status does not name yet. sync then keeps RolledOut as it is and writes
// only the live replica counts and the selector.
//
// Why: a word on the workloads now would be on a release the manager has not recorded, under
// the old generation, and nothing reads it: statuscontract.Decide looks at RolledOut only once
// observedGeneration is the CR's generation, whose change brings the CR back here. Yet each
// such write is a version of the CR sent to every watcher, and it makes the manager's
// conditional status apply of the same upgrade conflict and wait for its cache. In an edit
// wave of 1000 CRs the sidecar wrote RolledOut up to three times per upgrade on the
// generation before, between the Deployment's change and the manager's observedGeneration
// (docs/bench/memory.md, "An edit wave without the sidecar's word on the generation before
// (eighteenth)").
func upgradeUnrecorded(cr *unstructured.Unstructured, deployed int64) bool {
	return cr.GetGeneration() != deployed
}

// liveWorkloads reads workloads again from the API server.
func (r *StatusReconciler) liveWorkloads(ctx context.Context, ns string, cached []Workload) ([]Workload, error) {
	out := make([]Workload, 0, len(cached))
	for _, w := range cached {
		key := client.ObjectKey{Namespace: ns, Name: w.Name}
		var err error
		switch w.Kind {
		case kindDeployment:
			var d appsv1.Deployment
			if err = r.Live.Get(ctx, key, &d); err == nil {
				w = FromDeployment(&d)
			}
		case kindStatefulSet:
			var s appsv1.StatefulSet
			if err = r.Live.Get(ctx, key, &s); err == nil {
				w = FromStatefulSet(&s)
			}
		case kindDaemonSet:
			var d appsv1.DaemonSet
			if err = r.Live.Get(ctx, key, &d); err == nil {
				w = FromDaemonSet(&d)
			}
		}
		if apierrors.IsNotFound(err) {
			continue // deleted since: its deletion event brings the CR back here
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s: %w", w.Kind, key, err)
		}
		out = append(out, w)
	}
	return out, nil
}

// helmOperatorReported reports whether the helm-operator has written status
// conditions on cr.
func helmOperatorReported(cr *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedFieldNoCopy(cr.Object, "status", statuscontract.FieldConditions)
	list, _ := conds.([]interface{})
	return len(list) > 0
}

// workloadsOf returns the workloads of cr's release, looked up through
// releaseIndex by owner UID and by release name, then filtered by belongsTo.
func (r *StatusReconciler) workloadsOf(ctx context.Context, cr *unstructured.Unstructured) ([]Workload, error) {
	var out []Workload
	seen := map[string]bool{}
	add := func(obj metav1.Object, w Workload) {
		id := w.Kind + "/" + w.Name
		if seen[id] || !belongsTo(obj, cr, r.Kinds) {
			return
		}
		seen[id] = true
		out = append(out, w)
	}

	for _, key := range []string{ownerUIDIndexKey(cr.GetUID()), releaseIndexKey(cr.GetName())} {
		opts := []client.ListOption{client.InNamespace(cr.GetNamespace()), client.MatchingFields{releaseIndex: key}}

		var deployments appsv1.DeploymentList
		if err := r.Client.List(ctx, &deployments, opts...); err != nil {
			return nil, fmt.Errorf("listing deployments: %w", err)
		}
		for i := range deployments.Items {
			add(&deployments.Items[i], FromDeployment(&deployments.Items[i]))
		}

		var statefulSets appsv1.StatefulSetList
		if err := r.Client.List(ctx, &statefulSets, opts...); err != nil {
			return nil, fmt.Errorf("listing statefulsets: %w", err)
		}
		for i := range statefulSets.Items {
			add(&statefulSets.Items[i], FromStatefulSet(&statefulSets.Items[i]))
		}

		var daemonSets appsv1.DaemonSetList
		if err := r.Client.List(ctx, &daemonSets, opts...); err != nil {
			return nil, fmt.Errorf("listing daemonsets: %w", err)
		}
		for i := range daemonSets.Items {
			add(&daemonSets.Items[i], FromDaemonSet(&daemonSets.Items[i]))
		}
	}
	return out, nil
}
