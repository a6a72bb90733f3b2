package pipeline

import (
	"context"
	"errors"
	"fmt"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/actionclient"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
)

// orphanDeleted is the reason of the Event on a CR for each object swept.
const orphanDeleted = "OrphanDeleted"

// ClusterObjects is where the orphan sweep looks for a CR's cluster-scoped objects: the
// cluster-scoped kinds its chart declares (internal/chartpolicy), listed and deleted through
// the manager's uncached client.
type ClusterObjects struct {
	Kinds  []schema.GroupKind
	Mapper meta.RESTMapper
	Reader client.Reader // uncached: the sweep is rare, and a cache of every StorageClass is not
	Writer client.Writer
}

// withOrphanSweep hands out action clients whose uninstall completes one that found no
// release (see sweepingClient).
func withOrphanSweep(getter helmclient.ActionClientGetter, objects ClusterObjects, recorder record.EventRecorder) helmclient.ActionClientGetter {
	return actionclient.Wrap(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return sweepingClient{ActionInterface: c, obj: cr, objects: objects, recorder: recorder}
	})
}

// sweepingClient is the orphan sweep, the layer over the pending repair (see pipeline.go).
//
// Deleting a namespace deletes everything in it at once: the CRs get a deletion timestamp
// (the uninstall finalizer holds them) and their release Secrets are deleted outright. When
// the reconciler then uninstalls, Helm finds no release, and the reconciler just removes the
// finalizer. The release's namespaced objects go with the namespace (and carry owner
// references to the CR), but its cluster-scoped objects, such as a WarpdrivePool's
// StorageClass, can have no owner reference to a namespaced CR: nothing deletes them. Seen
// in the churn fault test; the stock helm-operator (v0.9.1) leaks them the same way.
//
// sweepingClient completes such an uninstall: when Helm reports no release for a CR being
// deleted, the objects of the cluster-scoped kinds the CR's chart declares that name this CR
// as their owner are deleted, with an Event saying so. The owner is what was written on each
// cluster-scoped object created for the CR: the helm-operator's post-renderer's annotations
// (operator-lib's: the CR's namespace/name and its kind) and Helm's (the release's name and
// namespace). Another kind's CR of the same name (whose release the release guard reports as
// not found too), or anything not created for this CR, is left alone.
//
// Why the annotations and not the release's manifest: the records are gone, and the copy of
// the manifest the reconciler used to keep in status.deployedRelease is no longer written
// (statusclient.go). A namespace editor can neither write cluster-scoped objects nor their
// annotations, so what names the CR as owner there was written by the operator (or by the
// cluster's admins); the CR's own status, which a namespace editor may be able to write, is
// not read.
type sweepingClient struct {
	helmclient.ActionInterface
	obj      client.Object
	objects  ClusterObjects
	recorder record.EventRecorder
}

// Uninstall uninstalls the release; when there is none, it deletes what the CR's release
// created outside any namespace, and then reports the release not found as before (the
// reconciler removes the finalizer). If that fails, the error keeps the finalizer, and the
// uninstall is retried.
func (c sweepingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if !errors.Is(err, driver.ErrReleaseNotFound) || c.obj.GetDeletionTimestamp() == nil {
		return resp, err
	}
	if sweepErr := c.sweep(context.Background()); sweepErr != nil {
		return nil, fmt.Errorf("release %s is gone; deleting the cluster-scoped objects it had created: %w", name, sweepErr)
	}
	return resp, err
}

func (c sweepingClient) sweep(ctx context.Context) error {
	for _, gk := range c.objects.Kinds {
		mapping, err := c.objects.Mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			continue // not served: nothing of this kind to delete
		}
		if err != nil {
			return err
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(gk.Kind + "List"))
		if err := c.objects.Reader.List(ctx, list); err != nil {
			return err
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if !ownership.OwnedBy(obj.GetAnnotations(), c.obj) {
				continue
			}
			obj.SetGroupVersionKind(mapping.GroupVersionKind)
			if err := c.delete(ctx, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

// delete deletes obj as listed, with an Event on the CR.
func (c sweepingClient) delete(ctx context.Context, obj *metav1.PartialObjectMetadata) error {
	deleted, err := ownership.DeleteAsSeen(ctx, c.objects.Writer, obj)
	if !deleted {
		return err
	}
	msg := fmt.Sprintf("release %s was already gone (its Secrets deleted, as with its namespace); deleted %s %s that it had created",
		c.obj.GetName(), obj.GroupVersionKind().Kind, obj.GetName())
	ctrl.Log.WithName("orphan-sweep").Info(msg, "namespace", c.obj.GetNamespace())
	c.recorder.Event(c.obj, corev1.EventTypeWarning, orphanDeleted, msg)
	return nil
}
