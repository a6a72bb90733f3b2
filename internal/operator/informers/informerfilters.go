package informers

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/releaserecords"
	"transwarp.io/tos/warpdrive-operator/internal/rollout"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// statusFilteringManager is mgr with a cache that filters the informer of one kind.
type statusFilteringManager struct {
	ctrl.Manager
	cache cache.Cache
}

// WithoutStatusUpdates is mgr with a cache whose informer of the CR kind gvk drops
// status-only updates, and whose informers of release objects and release Secrets filter
// their events too (see filteringCache.GetInformer).
//
// The helm reconciler watches its CRs with no predicate: every update of a CR, status
// included, runs a full reconcile (a server-side dry-run upgrade, 0.3-0.5 CPU-seconds). Its
// own status write after each install or upgrade thus costs a second reconcile, and each
// status write of the sidecar one more; so does the update that adds its uninstall
// finalizer. Neither can change what the release should be, so such updates are dropped
// before they reach the queue (nothingForTheRelease).
//
// helm-operator-plugins offers no option for the primary watch's predicates, and sets the
// watch up itself from the manager's cache. So the reconciler is given a manager whose cache
// wraps the CR kind's informer: handlers added to it do not see status-only updates. Every
// other event of the CR kind passes unchanged.
func WithoutStatusUpdates(mgr ctrl.Manager, gvk schema.GroupVersionKind, manifests *releases.Manifests, policy drift.Policy,
	budget *PerCRInterval, signedRecord func(metav1.Object) bool) ctrl.Manager {
	return statusFilteringManager{Manager: mgr, cache: filteringCache{Cache: mgr.GetCache(), live: mgr.GetAPIReader(),
		gvk: gvk, manifests: manifests, drift: policy, budget: budget, signedRecord: signedRecord}}
}

func (m statusFilteringManager) GetCache() cache.Cache { return m.cache }

// filteringCache is the cache of a statusFilteringManager; gvk is the CR kind.
type filteringCache struct {
	cache.Cache
	live      client.Reader // uncached: release objects are cached as metadata only
	gvk       schema.GroupVersionKind
	manifests *releases.Manifests // what the drift filter compares release objects with
	drift     drift.Policy        // the fields of release objects the drift filter ignores
	budget    *PerCRInterval      // the kind's reconciles that tenants may force, per CR
	// signedRecord: a release Secret's signature holds on its cached metadata (deletionsOnly)
	signedRecord func(metav1.Object) bool
}

// GetInformer wraps the CR kind's informer to drop status-only updates, and the informers of
// release objects (the unstructured kinds of the reconciler's dependent watches) to pass on
// only the updates that drift from the release (drift.Filter). The reconciler's watch of release
// Secrets gets their metadata informer (managercache.go), and only their deletions. Others are
// left as they are.
//
// A release object's informer is a metadata-only one (see drift.Filter): its
// handlers get the objects as unstructured ones that hold only their metadata.
func (c filteringCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if _, ok := obj.(*unstructured.Unstructured); ok && gvk != c.gvk {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(gvk)
		inf, err := c.Cache.GetInformer(ctx, meta, opts...)
		if err != nil {
			return inf, err
		}
		filter := drift.Filter{Reader: c.Cache, Live: c.live, Manifests: c.manifests, Owner: c.gvk, GVK: gvk, Policy: c.drift}
		if c.budget != nil {
			filter.Budget = c.budget
		}
		return wrappingInformer{Informer: inf, wrap: filter.Wrap}, nil
	}
	if _, ok := obj.(*corev1.Secret); ok {
		// The reconciler's watch of release Secrets, as metadata: it reads only their owner.
		inf, err := c.Cache.GetInformer(ctx, releaserecords.Cached(), opts...)
		if err != nil {
			return inf, err
		}
		return wrappingInformer{Informer: inf, wrap: func(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
			return deletionsOnly{ResourceEventHandler: h, signed: c.signedRecord}
		}}, nil
	}
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return inf, err
	}
	if gvk == c.gvk {
		return wrappingInformer{Informer: inf, wrap: func(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
			return newSkipStatusUpdates(h, c.budget)
		}}, nil
	}
	return inf, nil
}

// wrappingInformer is an informer whose event handlers are wrapped as they are added.
type wrappingInformer struct {
	cache.Informer
	wrap func(toolscache.ResourceEventHandler) toolscache.ResourceEventHandler
}

func (i wrappingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(i.wrap(h))
}

func (i wrappingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(i.wrap(h), resync)
}

func (i wrappingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, opts toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(i.wrap(h), opts)
}

// The reconciler watches its release Secrets, whose owner is the CR. Only Helm writes them,
// from within the reconciler: each install or upgrade creates one and updates another, and
// each of these events costs one more full reconcile for nothing. What is worth a reconcile
// is a release Secret deleted by someone else; a new Secret or a changed one is the
// reconciler's own doing. (At start the CRs' own informer brings every CR anyway.)
//
// Nor is the deletion of a superseded record: once a release has --max-release-history
// revisions, every upgrade deletes the oldest, a superseded one, and its deletion would cost
// each upgrade a second reconcile. A superseded record is history only: no reconcile reads
// it, and none could put it back. The status is taken from a record only while its signature
// holds (signed), which covers Helm's labels: a namespace editor who relabels their current
// record "superseded" before deleting it still has it put back at once.
type deletionsOnly struct {
	toolscache.ResourceEventHandler
	signed func(metav1.Object) bool // the record's signature holds on its metadata
}

func (deletionsOnly) OnAdd(any, bool)   {}
func (deletionsOnly) OnUpdate(_, _ any) {}

func (h deletionsOnly) OnDelete(obj any) {
	if h.supersededRecord(obj) {
		return
	}
	h.ResourceEventHandler.OnDelete(obj)
}

// supersededRecord is whether obj, a deleted release Secret (or its tombstone), was a signed
// record of a superseded revision: a revision Helm never makes current again (a rollback
// writes a new one).
func (h deletionsOnly) supersededRecord(obj any) bool {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(metav1.Object)
	return ok && m.GetLabels()["status"] == release.StatusSuperseded.String() && h.signed(m)
}

// skipStatusUpdates passes every event to its handler but updates that cannot change the
// release (nothingForTheRelease), and holds back forced reconciles, the updates of metadata
// alone (onlyMetadataChanged), that come too often (forcedRequests).
type skipStatusUpdates struct {
	toolscache.ResourceEventHandler
	forced *forcedRequests
}

// newSkipStatusUpdates wraps h; the forced reconciles it passes are drawn from budget.
func newSkipStatusUpdates(h toolscache.ResourceEventHandler, budget *PerCRInterval) toolscache.ResourceEventHandler {
	s := skipStatusUpdates{ResourceEventHandler: h, forced: &forcedRequests{
		interval: budget,
		waiting:  map[types.NamespacedName][2]any{},
		queue:    workqueue.NewTypedDelayingQueue[types.NamespacedName](),
	}}
	go s.passWaiting()
	return s
}

func (h skipStatusUpdates) OnUpdate(oldObj, newObj any) {
	if nothingForTheRelease(oldObj, newObj) {
		return
	}
	if n, ok := newObj.(*unstructured.Unstructured); ok && onlyMetadataChanged(oldObj, newObj) && h.forced.holdBack(oldObj, n) {
		return
	}
	h.ResourceEventHandler.OnUpdate(oldObj, newObj)
}

// ForcedInterval is the least time between two reconciles of one CR that its reconcile
// request annotation, or any other write of its metadata alone, forces (onlyMetadataChanged).
// Each is a full reconcile (a dry-run upgrade at least), and a tenant who rewrites an
// annotation in a loop would otherwise keep the kind's workers busy for everyone. A request
// that comes sooner waits out the interval; of those that waited, the latest is passed on.
// The changes of the sources a CR takes values from draw on the same budget (the operator's
// values.Sources.Wakes): a tenant who alternates both gets no more. It is a variable so that
// tests may shorten it.
var ForcedInterval = 10 * time.Second

// PerCRInterval spaces the reconciles of each CR that tenants may bring at will (forced
// reconciles, changes of its sources) at least ForcedInterval apart: the first comes at once,
// those that come sooner are one, at the end of the interval. One per kind serves both causes
// (setupKind, internal/operator/kind.go). Its zero value is ready to use.
type PerCRInterval struct {
	mu sync.Mutex
	// next is when each CR's latest reconcile of this cause ran, or is due if in the future.
	next map[types.NamespacedName]time.Time
}

// Wait reports how long a reconcile of key that comes at now must wait: 0 if its last one is
// ForcedInterval old, else until the interval ends, when the reconcile is then due; one
// already due is this one too.
func (l *PerCRInterval) Wait(key types.NamespacedName, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	last, ok := l.next[key]
	if last.After(now) {
		return last.Sub(now)
	}
	if ok && now.Sub(last) < ForcedInterval {
		l.next[key] = last.Add(ForcedInterval)
		return last.Add(ForcedInterval).Sub(now)
	}
	if l.next == nil {
		l.next = map[types.NamespacedName]time.Time{}
	}
	if len(l.next) >= 1024 { // forget the CRs whose interval is over, now and then
		for k, t := range l.next {
			if now.Sub(t) >= ForcedInterval {
				delete(l.next, k)
			}
		}
	}
	l.next[key] = now
	return 0
}

// forcedRequests are the forced reconciles of one handler: when each CR's last one was
// passed on, and the updates held back.
type forcedRequests struct {
	interval *PerCRInterval
	mu       sync.Mutex
	waiting  map[types.NamespacedName][2]any // the first old and the latest new version held
	queue    workqueue.TypedDelayingInterface[types.NamespacedName]
}

// holdBack reports whether the forced reconcile of cr (whose previous version is old) must
// wait, and if so holds it until its CR's interval is over.
func (f *forcedRequests) holdBack(old any, cr *unstructured.Unstructured) bool {
	key := client.ObjectKeyFromObject(cr)
	f.mu.Lock()
	defer f.mu.Unlock()
	if held, ok := f.waiting[key]; ok {
		f.waiting[key] = [2]any{held[0], cr}
		return true
	}
	if d := f.interval.Wait(key, time.Now()); d > 0 {
		f.waiting[key] = [2]any{old, cr}
		f.queue.AddAfter(key, d)
		return true
	}
	return false
}

// passWaiting passes each held-back update on once its CR's interval is over.
func (h skipStatusUpdates) passWaiting() {
	f := h.forced
	for {
		key, shutdown := f.queue.Get()
		if shutdown {
			return
		}
		f.mu.Lock()
		held, ok := f.waiting[key]
		delete(f.waiting, key)
		f.mu.Unlock()
		if ok {
			h.ResourceEventHandler.OnUpdate(held[0], held[1])
		}
		f.queue.Done(key)
	}
}

// steeringAnnotations are the annotations of a CR that change what its reconcile does: the
// pause annotation stops it, and the forced chart is the chart it installs. An update that
// sets or removes one passes at once, as a spec edit does.
var steeringAnnotations = []string{statuscontract.PauseAnnotation, rollout.ForceAnnotation}

// onlyMetadataChanged reports whether the new version of a CR differs from the old in its
// metadata alone, and in nothing of it that steers the reconciler: not its generation, its
// deletion, a finalizer removed (which the reconciler puts back) or steeringAnnotations. Such an
// update renders the same release from the same spec: the request annotation forces a
// reconcile this way, but so does any other annotation or label written, alone or beside it;
// each draws on the forced reconciles' budget, or a tenant who writes annotations in a loop
// gets a full reconcile per write. A resync (the same version twice) is none.
func onlyMetadataChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() ||
		o.GetGeneration() != n.GetGeneration() || !o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) {
		return false
	}
	if _, removed := finalizerChanges(o.GetFinalizers(), n.GetFinalizers()); removed {
		return false
	}
	for _, a := range steeringAnnotations {
		if o.GetAnnotations()[a] != n.GetAnnotations()[a] {
			return false
		}
	}
	return reflect.DeepEqual(outsideMetadata(o), outsideMetadata(n))
}

// outsideMetadata is u's content but its metadata and status: its spec, and any other field
// a CRD without a status subresource would let a metadata write leave the generation alone.
func outsideMetadata(u *unstructured.Unstructured) map[string]any {
	out := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "metadata" && k != "status" {
			out[k] = v
		}
	}
	return out
}

// nothingForTheRelease reports whether two versions of a CR differ in nothing but their
// status (and with it the resourceVersion and managedFields) and finalizers added. The
// reconciler adds its uninstall finalizer in the reconcile that installs the release, and
// the update that brings it cost one more reconcile (a dry-run upgrade) per CR created. A
// finalizer removed passes, so that the reconciler puts its own back. A resync delivers the
// same version twice: that is not such a change, and passes.
func nothingForTheRelease(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 || o.GetResourceVersion() == n.GetResourceVersion() {
		return false
	}
	statusChanged := !reflect.DeepEqual(o.Object["status"], n.Object["status"])
	finalizersAdded, finalizersRemoved := finalizerChanges(o.GetFinalizers(), n.GetFinalizers())
	if finalizersRemoved || (!statusChanged && !finalizersAdded) {
		return false
	}
	return reflect.DeepEqual(withoutStatus(o), withoutStatus(n))
}

// finalizerChanges reports whether new has finalizers that old has not, and the reverse.
func finalizerChanges(old, new []string) (added, removed bool) {
	for _, f := range new {
		added = added || !slices.Contains(old, f)
	}
	for _, f := range old {
		removed = removed || !slices.Contains(new, f)
	}
	return added, removed
}

// withoutStatus is u without what nothingForTheRelease ignores.
func withoutStatus(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	delete(c.Object, "status")
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	c.SetFinalizers(nil)
	return c.Object
}
