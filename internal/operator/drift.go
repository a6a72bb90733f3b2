package operator

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The objects of each release are watched so that a hand edit is repaired at once: every
// update of one starts a full reconcile of its CR (a dry-run upgrade). But most updates are
// the reconciler's own: the upgrade it has just applied, or the workload controller's
// bookkeeping (a Deployment's revision annotation). They need no reconcile: the object
// already is what the release says.
//
// So an update of a release object is held for settleDelay and then passed on only if the
// object, as the cache has it then, differs from the release's manifest in a field the
// manifest sets; or if that cannot be told (no owning CR, no manifest, the object not in it).
// The delay lets the reconciler that applied the change record the new release in the CR's
// status first (the revision; releasemanifests.go reads its manifest). A deleted object is passed on at once, unless its CR is being deleted (the
// uninstall deleted it); everything else passes unchanged.
var settleDelay = 500 * time.Millisecond

// driftCheckingInformer checks the objects of one kind of release object (gvk) for the
// reconciler of one CR kind (owner); its wrap is given to the informer's handlers.
type driftCheckingInformer struct {
	reader    client.Reader
	manifests *releaseManifests
	owner     schema.GroupVersionKind
	gvk       schema.GroupVersionKind
}

func (i driftCheckingInformer) wrap(h toolscache.ResourceEventHandler) toolscache.ResourceEventHandler {
	return onlyDrift{ResourceEventHandler: h, inf: i}
}

type onlyDrift struct {
	toolscache.ResourceEventHandler
	inf driftCheckingInformer
}

func (h onlyDrift) OnUpdate(oldObj, newObj any) {
	u, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		h.ResourceEventHandler.OnUpdate(oldObj, newObj)
		return
	}
	key := client.ObjectKeyFromObject(u)
	time.AfterFunc(settleDelay, func() {
		if h.inf.drifted(context.Background(), key) {
			h.ResourceEventHandler.OnUpdate(oldObj, newObj)
		}
	})
}

// OnDelete passes a deleted object on, unless its CR is being deleted or gone: then the
// object went with the release's uninstall, and a reconcile would only wait for the CR.
func (h onlyDrift) OnDelete(obj any) {
	if u, ok := obj.(*unstructured.Unstructured); ok && h.inf.ownerGone(context.Background(), u) {
		return
	}
	h.ResourceEventHandler.OnDelete(obj)
}

// ownerGone reports whether the object's controlling CR of the owner kind is being deleted
// or no longer exists.
func (i driftCheckingInformer) ownerGone(ctx context.Context, obj *unstructured.Unstructured) bool {
	name := i.ownerName(obj)
	if name == "" {
		return false
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(i.owner)
	err := i.reader.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, cr)
	return apierrors.IsNotFound(err) || (err == nil && cr.GetDeletionTimestamp() != nil)
}

// ownerName is the name of the object's controlling CR of the owner kind, if any.
func (i driftCheckingInformer) ownerName(obj *unstructured.Unstructured) string {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller && ref.Kind == i.owner.Kind && ref.APIVersion == i.owner.GroupVersion().String() {
			return ref.Name
		}
	}
	return ""
}

// drifted reports whether the object differs from its release manifest, or may.
func (i driftCheckingInformer) drifted(ctx context.Context, key types.NamespacedName) bool {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(i.gvk)
	if err := i.reader.Get(ctx, key, live); err != nil {
		return true
	}
	ownerName := i.ownerName(live)
	if ownerName == "" {
		// Not one of this kind's (another kind's reconciler will look), or tied to its CR
		// by annotations only: let the reconciler's own handler decide.
		return true
	}
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(i.owner)
	if err := i.reader.Get(ctx, types.NamespacedName{Namespace: live.GetNamespace(), Name: ownerName}, cr); err != nil {
		return true
	}
	want := i.manifests.object(ctx, cr, i.gvk, live.GetName())
	return want == nil || !subset(want, live.Object)
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
		if wn, ok := number(want); ok {
			hn, ok := number(have)
			return ok && wn == hn
		}
		return want == have
	}
}

// number brings the numbers of a parsed manifest (float64) and of the API (int64) together.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}
