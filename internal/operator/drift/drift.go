package drift

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	libhandler "github.com/operator-framework/operator-lib/handler"

	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The objects of each release are watched so that a hand edit is repaired at once: every
// update of one starts a full reconcile of its CR (a dry-run upgrade). But most updates are
// the reconciler's own: the upgrade it has just applied, or the workload controller's
// bookkeeping (a Deployment's status, its revision annotation). They need no reconcile: the
// object already is what the release says.
//
// The manager caches release objects as metadata only (internal/operator/informers): at 1000
// CRs it would otherwise hold 1000 Deployments, spec and all, that only this check reads. So
// an update is first judged from its metadata: an object that has a generation (Deployments,
// StatefulSets, PodDisruptionBudgets) whose generation, labels, annotations (but the
// deployment controller's, statusOnly), owners and finalizers did not change had only its
// status or its controller's bookkeeping written, and is dropped. Any other update is
// held for SettleDelay, then the object is read from the API server and passed on only if it
// differs from the release's manifest in a field the manifest sets; or if that cannot be told
// (no owning CR, no manifest, the object not in it). The delay lets the reconciler that
// applied the change finish its Helm operation first: the manifest compared with is that of
// the newer of the revision in the CR's status and the one Helm last handed the reconciler,
// and a check waits while an operation holds the release
// (internal/operator/releases.Manifests, maxReleaseWaits). A deleted object is passed on at
// once, unless its CR is being deleted (the uninstall deleted it); everything else passes
// unchanged.
//
// SettleDelay is a variable so that tests may shorten it.
var SettleDelay = 500 * time.Millisecond

// driftWorkers is how many drift checks of one handler run at once. Each is a GET from the
// API server; a burst of updates (every object of a namespace relabelled) would otherwise
// start a goroutine and a GET per update, all at once.
const driftWorkers = 4

// Filter checks the objects of one kind of release object (GVK) for the reconciler of one CR
// kind (Owner); its Wrap is given to the informer's handlers.
type Filter struct {
	Reader client.Reader // the CRs: the manager's cache
	Live   client.Reader // the release objects, whole: the API server (Reader if nil)
	// Manifests are the deployed releases' manifests, which the objects are compared with.
	Manifests Manifests
	Owner     schema.GroupVersionKind
	GVK       schema.GroupVersionKind
	// Policy says which fields are none of the operator's business (driftpolicy.go): a
	// change confined to them wakes no reconcile, which would repair or report nothing.
	Policy Policy
	// Budget spaces the reconciles that updates of objects tied to their CR by annotations
	// alone bring (annotationTie); nil passes them at once.
	Budget Budget
}

// Manifests are what a Filter knows of the deployed releases (the operator's:
// internal/operator/releases.Manifests).
type Manifests interface {
	// Changing reports whether a Helm operation holds the release of the CR named name in
	// namespace (its release is named after it): its manifest is about to change.
	Changing(namespace, name string) bool
	// Object returns the object of kind gvk named name in the deployed release of cr, if
	// known; nil if not. The caller does not change it.
	Object(ctx context.Context, cr *unstructured.Unstructured, gvk schema.GroupVersionKind, name string) map[string]any
}

// Budget spaces the reconciles of each CR that tenants may bring at will (the operator's:
// internal/operator/informers.PerCRInterval).
type Budget interface {
	// Wait reports how long a reconcile of cr that comes at now must wait: 0 to pass at once.
	Wait(cr types.NamespacedName, now time.Time) time.Duration
}

// Wrap is h behind the filter: it passes on the updates of release objects that drifted from
// their release, and the deletions whose CR is not going away.
func (i Filter) Wrap(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	d := onlyDrift{ResourceEventHandler: h, inf: i, checks: &driftChecks{
		queue:  workqueue.NewTypedDelayingQueue[types.NamespacedName](),
		latest: map[types.NamespacedName]pendingCheck{},
	}}
	for range driftWorkers {
		go d.check()
	}
	return d
}

type onlyDrift struct {
	toolscache.ResourceEventHandler
	inf    Filter
	checks *driftChecks
}

// driftChecks are the updates waiting for their drift check: each object once, with the
// latest version seen of it and the version before the first of them.
type driftChecks struct {
	queue  workqueue.TypedDelayingInterface[types.NamespacedName]
	mu     sync.Mutex
	latest map[types.NamespacedName]pendingCheck
}

// pendingCheck is an object waiting for its drift check: its latest version (new) and, of its
// version before the updates (was), what tied it to a CR (ownedBy); how many times its
// check waited for a Helm operation on the release (waits); and, once its CR's budget held
// it back, when it may pass (due).
type pendingCheck struct {
	new, was *unstructured.Unstructured
	waits    int
	due      time.Time
}

// maxReleaseWaits is how many times, SettleDelay apart, a drift check waits for a Helm
// operation that holds the object's release (Manifests.Changing) before it checks
// anyway: an upgrade changes the release's objects before its revision is known, so a check
// during it would find drift in the upgrade's own changes. 20 s is longer than an upgrade of
// these charts takes on a loaded machine; a release held longer (a chart's hooks) is
// checked, and its drift passed on, as without the wait.
const maxReleaseWaits = 40

// check runs the drift checks as they come due, and passes on the updates of objects that
// drifted.
func (h onlyDrift) check() {
	for {
		key, shutdown := h.checks.queue.Get()
		if shutdown {
			return
		}
		h.checks.mu.Lock()
		p, ok := h.checks.latest[key]
		delete(h.checks.latest, key)
		h.checks.mu.Unlock()
		if ok && p.waits < maxReleaseWaits && h.inf.changing(key.Namespace, h.inf.ownerName(p.new)) {
			h.checkLater(key, p)
			continue
		}
		if ok && h.heldByBudget(key, &p) {
			continue
		}
		if ok && h.inf.Drifted(context.Background(), key) {
			// The reconciler's update predicate passes an update only if the two versions
			// differ beyond status and resourceVersion, and these hold only metadata: an
			// old version with nothing but what tied it to its CR (ownedBy) makes the drift count,
			// whatever field it is in, and still maps it to the CR when the update removed
			// those ties.
			h.ResourceEventHandler.OnUpdate(confined(p.was), confined(p.new))
		}
		h.checks.queue.Done(key)
	}
}

// checkLater puts p's check back, SettleDelay later, as one more wait. An update that came
// meanwhile is merged into it: the check is of its version, the ties of p's.
func (h onlyDrift) checkLater(key types.NamespacedName, p pendingCheck) {
	h.checks.mu.Lock()
	if q, newer := h.checks.latest[key]; newer {
		p.new = q.new
	}
	p.waits++
	h.checks.latest[key] = p
	h.checks.mu.Unlock()
	h.checks.queue.Done(key)
	h.checks.queue.AddAfter(key, SettleDelay)
}

// heldByBudget puts p's check back if the object is tied to its CR by annotations alone and
// that CR's budget of reconciles tenants may bring is spent (informers.ForcedInterval); an update that
// comes meanwhile is merged into it and waits as well. Any namespace editor may write the
// operator-sdk annotations on an object of their own naming a CR of their namespace, and
// the reconciler's handler queues that CR at every write: without the budget, a loop of
// `kubectl annotate` would keep the kind's workers busy for everyone. An object the CR
// controls (owner reference) is the release's own, and its drift is repaired at once.
func (h onlyDrift) heldByBudget(key types.NamespacedName, p *pendingCheck) bool {
	if h.inf.Budget == nil || h.inf.ownerName(p.new) != "" || h.inf.ownerName(p.was) != "" {
		return false
	}
	cr, tied := annotationTie(p.new)
	if !tied {
		return false
	}
	now := time.Now()
	if p.due.IsZero() {
		p.due = now.Add(h.inf.Budget.Wait(cr, now))
	}
	if !p.due.After(now) {
		return false
	}
	h.checks.mu.Lock()
	if q, newer := h.checks.latest[key]; newer {
		p.new = q.new
	}
	h.checks.latest[key] = *p
	h.checks.mu.Unlock()
	h.checks.queue.Done(key)
	h.checks.queue.AddAfter(key, p.due.Sub(now))
	return true
}

// annotationTie is the CR that obj's operator-sdk annotations name in obj's own namespace, if
// they do (a cluster-scoped object's name a CR in any namespace).
func annotationTie(obj metav1.Object) (types.NamespacedName, bool) {
	owner, ok := obj.GetAnnotations()[libhandler.NamespacedNameAnnotation]
	if !ok || tiedElsewhere(obj) {
		return types.NamespacedName{}, false
	}
	ns, name, ok := strings.Cut(owner, "/")
	if !ok {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

func (h onlyDrift) OnAdd(obj any, initial bool) {
	h.ResourceEventHandler.OnAdd(confined(h.inf.unstructured(obj)), initial)
}

func (h onlyDrift) OnUpdate(oldObj, newObj any) {
	if statusOnly(oldObj, newObj) {
		return
	}
	u, ok := h.inf.unstructured(newObj).(*unstructured.Unstructured)
	was, wasOK := h.inf.unstructured(oldObj).(*unstructured.Unstructured)
	if !ok || !wasOK {
		h.ResourceEventHandler.OnUpdate(oldObj, newObj)
		return
	}
	// An update that removed the object's owner reference is drift too, and only the version
	// before names the CR: a person's `helm upgrade` renders the chart without the owner
	// references the operator's releases add, and its patch removes them.
	if !h.inf.mayBeOwned(u) && !h.inf.mayBeOwned(was) {
		return // the reconciler's handler maps it to no CR of this kind: nothing to read
	}
	key := client.ObjectKeyFromObject(u)
	h.checks.mu.Lock()
	p, pending := h.checks.latest[key]
	if !pending {
		p.was = h.inf.ownedBy(was)
	}
	p.new = u
	h.checks.latest[key] = p
	h.checks.mu.Unlock()
	h.checks.queue.AddAfter(key, SettleDelay)
}

// ownedBy is obj with only what ties it to a CR: its namespace and name, its owner references
// and the operator-sdk annotations of a cluster-scoped object.
func (i Filter) ownedBy(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{}
	out.SetGroupVersionKind(i.GVK)
	out.SetNamespace(obj.GetNamespace())
	out.SetName(obj.GetName())
	out.SetOwnerReferences(obj.GetOwnerReferences())
	ties := map[string]string{}
	for _, a := range []string{libhandler.TypeAnnotation, libhandler.NamespacedNameAnnotation} {
		if v, ok := obj.GetAnnotations()[a]; ok {
			ties[a] = v
		}
	}
	if len(ties) > 0 {
		out.SetAnnotations(ties)
	}
	return out
}

// mayBeOwned reports, from the object's metadata, whether the reconciler's handler of release
// objects would map an update of it to a CR of the owner kind: a controlling owner reference
// to one, or, for a cluster-scoped object, the operator-sdk annotations naming one's kind.
// Any other object of the kind in the cluster (a ConfigMap no chart renders) is no business
// of this reconciler, and is dropped without reading it from the API server.
func (i Filter) mayBeOwned(obj *unstructured.Unstructured) bool {
	return i.ownerName(obj) != "" ||
		(obj.GetAnnotations()[libhandler.TypeAnnotation] == i.Owner.GroupKind().String() && !tiedElsewhere(obj))
}

// The reconciler's handler of release objects that a chart keeps (helm.sh/resource-policy:
// keep) or that are cluster-scoped queues the CR their operator-sdk annotations name, in any
// namespace (operator-lib's EnqueueRequestForAnnotation): a namespace editor who writes them
// on a ConfigMap of their own, naming another tenant's CR, would queue a full reconcile of it
// at each write. The reconciler writes them on a namespaced object only for a CR of the same
// namespace (the CRs are namespaced), so an object of a namespace that names a CR elsewhere
// is passed on without them, and queues nothing; owner references are confined by the API
// server already. The updates of an object tied to a CR of its own namespace this way draw on
// that CR's budget of forced reconciles (heldByBudget).

// tiedElsewhere reports whether obj is namespaced and its operator-sdk annotations name a CR
// outside its namespace, or with no namespace (a bare name is a cluster-scoped CR's).
func tiedElsewhere(obj metav1.Object) bool {
	owner, ok := obj.GetAnnotations()[libhandler.NamespacedNameAnnotation]
	if !ok || obj.GetNamespace() == "" {
		return false
	}
	ns, _, slashed := strings.Cut(owner, "/")
	return !slashed || ns != obj.GetNamespace()
}

// confined is obj (as the reconciler's handlers take it, or its tombstone) without its
// operator-sdk annotations if they name a CR outside its namespace (tiedElsewhere); a copy,
// since obj may be the cache's.
func confined(obj any) any {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		if !tiedElsewhere(o) {
			return obj
		}
		c := o.DeepCopy()
		a := c.GetAnnotations()
		delete(a, libhandler.NamespacedNameAnnotation)
		delete(a, libhandler.TypeAnnotation)
		c.SetAnnotations(a)
		return c
	case toolscache.DeletedFinalStateUnknown:
		o.Obj = confined(o.Obj)
		return o
	}
	return obj
}

// statusOnly reports whether an update, seen as metadata, wrote only the status or the
// workload controllers' bookkeeping: the object has a generation (bumped by every change of
// its spec), and neither it nor the labels, annotations (but ControllerAnnotations), owners,
// finalizers or deletion changed.
func statusOnly(oldObj, newObj any) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 || n.GetGeneration() == 0 {
		return false
	}
	return o.GetGeneration() == n.GetGeneration() &&
		maps.Equal(o.GetLabels(), n.GetLabels()) &&
		equalBesideControllerAnnotations(o.GetAnnotations(), n.GetAnnotations()) &&
		reflect.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) &&
		slices.Equal(o.GetFinalizers(), n.GetFinalizers()) &&
		o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
}

// ControllerAnnotations is the prefix of the annotations the deployment controller keeps on
// a Deployment (deployment.kubernetes.io/revision, moved at each new template): every
// upgrade that changes the pods is followed by such an update, and a drift check of it
// would cost a GET to find what the release says, since no chart sets these.
const ControllerAnnotations = "deployment.kubernetes.io/"

// equalBesideControllerAnnotations is whether a and b hold the same annotations, those under
// ControllerAnnotations aside. It compares in place: it runs for every metadata update of a
// rendered kind in the cluster, before the owner is known.
func equalBesideControllerAnnotations(a, b map[string]string) bool {
	counted := 0
	for k, v := range a {
		if strings.HasPrefix(k, ControllerAnnotations) {
			continue
		}
		if w, ok := b[k]; !ok || w != v {
			return false
		}
		counted++
	}
	for k := range b {
		if !strings.HasPrefix(k, ControllerAnnotations) {
			counted--
		}
	}
	return counted == 0
}

// unstructured is obj (of the metadata informer) as the reconciler's handlers take it: an
// unstructured object of the kind, with only its metadata.
func (i Filter) unstructured(obj any) any {
	switch o := obj.(type) {
	case *metav1.PartialObjectMetadata:
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return obj
		}
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(i.GVK)
		return u
	case toolscache.DeletedFinalStateUnknown:
		o.Obj = i.unstructured(o.Obj)
		return o
	}
	return obj
}

// OnDelete passes a deleted object on, unless its CR is being deleted or gone: then the
// object went with the release's uninstall, and a reconcile would only wait for the CR.
func (h onlyDrift) OnDelete(obj any) {
	obj = confined(h.inf.unstructured(obj))
	if u, ok := obj.(*unstructured.Unstructured); ok && h.inf.ownerGone(context.Background(), u) {
		return
	}
	h.ResourceEventHandler.OnDelete(obj)
}

// changing reports whether a Helm operation holds the release of the CR named name in
// namespace (Manifests.Changing); with no Manifests, none does.
func (i Filter) changing(namespace, name string) bool {
	return i.Manifests != nil && i.Manifests.Changing(namespace, name)
}

// ownerGone reports whether the object's controlling CR of the owner kind is being deleted
// or no longer exists.
func (i Filter) ownerGone(ctx context.Context, obj *unstructured.Unstructured) bool {
	name := i.ownerName(obj)
	if name == "" {
		return false
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(i.Owner)
	err := i.Reader.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, cr)
	return apierrors.IsNotFound(err) || (err == nil && cr.GetDeletionTimestamp() != nil)
}

// ownerName is the name of the object's controlling CR of the owner kind, if any.
func (i Filter) ownerName(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == i.Owner.Kind && ref.APIVersion == i.Owner.GroupVersion().String() {
			return ref.Name
		}
	}
	return ""
}

// Drifted reports whether the object key, of GVK, differs from its release manifest, or may
// (when that cannot be told): what Wrap asks of each update it holds.
func (i Filter) Drifted(ctx context.Context, key types.NamespacedName) bool {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(i.GVK)
	objects := i.Live
	if objects == nil {
		objects = i.Reader
	}
	if err := objects.Get(ctx, key, live); err != nil {
		return true
	}
	ownerName := i.ownerName(live)
	if ownerName == "" {
		// Not one of this kind's (another kind's reconciler will look), or tied to its CR
		// by annotations only: let the reconciler's own handler decide.
		return true
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(i.Owner)
	if err := i.Reader.Get(ctx, types.NamespacedName{Namespace: live.GetNamespace(), Name: ownerName}, cr); err != nil {
		return true
	}
	if i.Manifests == nil {
		return true
	}
	want := i.Manifests.Object(ctx, cr, i.GVK, live.GetName())
	if want == nil {
		return true
	}
	if subset(want, live.Object) {
		return false
	}
	return i.driftedBeyondIgnored(ctx, &unstructured.Unstructured{Object: want}, live)
}

// driftedBeyondIgnored reports whether live, which differs from want (its object in the
// release manifest, not to be changed: it is cached), still differs from it outside the
// fields the kind's drift policy ignores, or may. The HPAs are read only for an object
// whose manifest sets its replicas.
func (i Filter) driftedBeyondIgnored(ctx context.Context, want, live *unstructured.Unstructured) bool {
	var scaled map[scaleTarget]bool
	if setsReplicas(want.Object) {
		var err error
		if scaled, err = i.Policy.scaleTargets(ctx, live.GetNamespace()); err != nil {
			return true
		}
	}
	paths := i.Policy.ignored(want, scaled)
	return len(paths) == 0 || !subset(without(want.Object, paths), live.Object)
}

// subset reports whether every field that want sets has the same value in have: the fields a
// Helm reconcile would patch back. Fields only in have (defaults, status, other writers') do
// not count; a list must match element by element.
func subset(want, have any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !subset(v, h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		if wn, ok := statuscontract.Number(want); ok {
			hn, ok := statuscontract.Number(have)
			return ok && wn == hn
		}
		return want == have
	}
}
