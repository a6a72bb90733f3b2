package operator

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
)

// orphanCollected is the reason of the Event on each cluster-scoped object the collector
// deletes.
const orphanCollected = "OrphanCollected"

// ownerIndex indexes the collected kind's cached objects by the CR their annotations name
// (ownership.CR.String), so that a CR's deletion finds them.
const ownerIndex = "warpdrive.transwarp.io/owner"

// orphanCollector is the garbage collector of one cluster-scoped kind that charts render (a
// WarpdrivePool's StorageClass): it deletes every object of that kind whose annotations name
// as its owner a CR that no longer exists.
//
// Kubernetes' garbage collector cannot do it: a cluster-scoped object cannot have a
// namespaced owner. The uninstall finalizer normally deletes these objects with the release,
// and the orphan sweep (layer_orphansweep.go) when the release records went first. Neither helps
// when the CR goes without an uninstall that saw the object: a namespace editor who removes
// the finalizer by hand (the release's namespaced objects then go with their owner
// references, its StorageClass stays), or an install that was still applying the release
// when the CR was deleted. The fault suite's churn saw the second once: a StorageClass of a
// deleted pool, for ever.
//
// The loop is level-based, keyed by the object's name. sync reads the object's metadata
// from the cache; when its annotations name a CR of a kind whose chart declares this kind
// (ownership.OwnerOf), it asks the API server whether that CR exists, and deletes the
// object, its UID a precondition, only if it does not. It runs for every object of the kind
// that is added or changed, and for the objects named for a CR when the CR is deleted.
//
// Why it is safe against a namespace editor: only the operator (or a cluster admin) writes
// a cluster-scoped object and its annotations, so the owner they name is the CR it was
// created for; an editor can only delete that CR, which is what uninstalls its release
// anyway. A CR that exists keeps its objects, whatever the manager's cache says, also one
// that its kind's label selector leaves to another operator.
type orphanCollector struct {
	gvk schema.GroupVersionKind // the cluster-scoped kind it collects
	// owners are the CR kinds whose charts declare gvk's kind, by group and kind.
	owners   map[schema.GroupKind]schema.GroupVersionKind
	cache    client.Reader // the kind's objects (metadata) and the CRs: the manager's cache
	live     client.Reader // whether a CR exists: the API server
	writer   client.Writer
	recorder record.EventRecorder
}

// setup registers the collector with mgr: a metadata-only watch of the kind (the one the
// drift checks of its releases use) and the delete events of each owner kind's CRs (from the
// helm reconcilers' informers). Its rights are those the manager has on every kind a chart
// renders (config/rbac/role.yaml, generated from the charts).
func (c *orphanCollector) setup(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, c.object(), ownerIndex, c.indexOwner); err != nil {
		return fmt.Errorf("indexing %s by owner: %w", c.gvk.Kind, err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("orphan-collector-"+strings.NewReplacer(".", "-").Replace(strings.ToLower(c.gvk.GroupKind().String()))).
		For(c.object(), builder.WithPredicates(predicate.NewPredicateFuncs(c.collectable)))
	for _, gvk := range c.owners {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(gvk)
		b = b.Watches(cr, handler.Funcs{DeleteFunc: c.ownerDeleted})
	}
	return b.Complete(c)
}

func (c *orphanCollector) object() *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(c.gvk)
	return obj
}

// owner returns the CR that obj's annotations name, if it is of a kind whose chart renders
// obj's kind.
func (c *orphanCollector) owner(obj client.Object) (ownership.CR, bool) {
	owner, ok := ownership.OwnerOf(obj.GetAnnotations())
	if !ok {
		return ownership.CR{}, false
	}
	_, ours := c.owners[owner.Kind]
	return owner, ours
}

func (c *orphanCollector) collectable(obj client.Object) bool {
	_, ok := c.owner(obj)
	return ok
}

func (c *orphanCollector) indexOwner(obj client.Object) []string {
	if owner, ok := c.owner(obj); ok {
		return []string{owner.String()}
	}
	return nil
}

// ownerDeleted queues the objects named for a CR that is gone.
func (c *orphanCollector) ownerDeleted(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	owner := ownership.CR{Kind: e.Object.GetObjectKind().GroupVersionKind().GroupKind(), Key: client.ObjectKeyFromObject(e.Object)}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(c.gvk.GroupVersion().WithKind(c.gvk.Kind + "List"))
	if err := c.cache.List(ctx, list, client.MatchingFields{ownerIndex: owner.String()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the cluster-scoped objects of a deleted CR", "owner", owner.String())
		return
	}
	for _, obj := range list.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&obj)})
	}
}

// Reconcile deletes the object req names if the CR its annotations name is gone.
func (c *orphanCollector) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := c.object()
	if err := c.cache.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	owner, ok := c.owner(obj)
	if !ok {
		return reconcile.Result{}, nil
	}
	exists, err := c.exists(ctx, owner)
	if exists || err != nil {
		return reconcile.Result{}, err
	}
	if deleted, err := ownership.DeleteAsSeen(ctx, c.writer, obj); !deleted {
		return reconcile.Result{}, err
	}
	msg := fmt.Sprintf("%s %s/%s, which the operator created it for, is gone; deleted %s %s",
		owner.Kind.Kind, owner.Key.Namespace, owner.Key.Name, c.gvk.Kind, obj.GetName())
	ctrl.Log.WithName("orphan-collector").Info(msg)
	c.recorder.Event(obj, corev1.EventTypeWarning, orphanCollected, msg)
	return reconcile.Result{}, nil
}

// exists reports whether the CR owner exists. The cache answers when it holds the CR: if the
// CR is gone since, its delete event queues the object again. A CR the cache lacks is looked
// up on the API server, which knows of one created since, or left out of the cache by the
// kind's label selector.
func (c *orphanCollector) exists(ctx context.Context, owner ownership.CR) (bool, error) {
	cached := &unstructured.Unstructured{} // the kind's informer holds CRs whole
	cached.SetGroupVersionKind(c.owners[owner.Kind])
	if err := c.cache.Get(ctx, owner.Key, cached); err == nil {
		return true, nil
	}
	cr := &metav1.PartialObjectMetadata{}
	cr.SetGroupVersionKind(c.owners[owner.Kind])
	err := c.live.Get(ctx, owner.Key, cr)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
