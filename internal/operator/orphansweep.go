package operator

import (
	"errors"
	"fmt"
	"strings"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The owner annotations of operator-lib's handler package (SetOwnerAnnotations), which the
// helm-operator's post-renderer puts on cluster-scoped objects.
const (
	ownerNameAnnotation = "operator-sdk/primary-resource"
	ownerTypeAnnotation = "operator-sdk/primary-resource-type"
)

// orphanDeleted is the reason of the Event on a CR for each object swept.
const orphanDeleted = "OrphanDeleted"

// ownedBy reports whether the annotations of an object name cr as its owner.
func ownedBy(annotations map[string]string, cr client.Object) bool {
	gk := cr.GetObjectKind().GroupVersionKind().GroupKind()
	return gk.Kind != "" &&
		annotations[ownerNameAnnotation] == cr.GetNamespace()+"/"+cr.GetName() &&
		annotations[ownerTypeAnnotation] == gk.String()
}

// withOrphanSweep hands out action clients whose uninstall completes one that found no
// release (see sweepingClient).
func withOrphanSweep(getter helmclient.ActionClientGetter, recorder record.EventRecorder) helmclient.ActionClientGetter {
	return wrapActionClients(getter, func(c helmclient.ActionInterface, cr client.Object) helmclient.ActionInterface {
		return sweepingClient{ActionInterface: c, obj: cr, recorder: recorder}
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
// deleted, the cluster-scoped objects of the CR's last deployed manifest (the reconciler
// keeps it in status.deployedRelease) that still name this CR as their owner are deleted,
// with an Event saying so. The owner is what the helm-operator's post-renderer wrote on each
// cluster-scoped object it created for the CR (operator-lib's owner annotations): the CR's
// namespace/name and its kind, so another kind's CR of the same name (whose release the
// release guard reports as not found too) or anything not created for this CR is left alone.
type sweepingClient struct {
	helmclient.ActionInterface
	obj      client.Object
	recorder record.EventRecorder
}

// Uninstall uninstalls the release; when there is none, it deletes what the CR's last
// manifest created outside any namespace, and then reports the release not found as before
// (the reconciler removes the finalizer). If that fails, the error keeps the finalizer, and
// the uninstall is retried.
func (c sweepingClient) Uninstall(name string, opts ...helmclient.UninstallOption) (*release.UninstallReleaseResponse, error) {
	resp, err := c.ActionInterface.Uninstall(name, opts...)
	if !errors.Is(err, driver.ErrReleaseNotFound) || c.obj.GetDeletionTimestamp() == nil {
		return resp, err
	}
	if sweepErr := c.sweep(); sweepErr != nil {
		return nil, fmt.Errorf("release %s is gone; deleting the cluster-scoped objects it had created: %w", name, sweepErr)
	}
	return resp, err
}

func (c sweepingClient) sweep() error {
	u, ok := c.obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	manifest, _, _ := unstructured.NestedString(u.Object, "status", "deployedRelease", "manifest")
	if strings.TrimSpace(manifest) == "" {
		return nil
	}
	infos, err := c.Config().KubeClient.Build(strings.NewReader(manifest), false)
	if err != nil {
		return err
	}
	for _, info := range infos {
		if info.Mapping.Scope.Name() != meta.RESTScopeNameRoot {
			continue // in the CR's namespace, with an owner reference to the CR
		}
		if err := c.deleteIfOwned(info); err != nil {
			return err
		}
	}
	return nil
}

func (c sweepingClient) deleteIfOwned(info *resource.Info) error {
	helper := resource.NewHelper(info.Client, info.Mapping)
	live, err := helper.Get("", info.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	m, err := meta.Accessor(live)
	if err != nil {
		return err
	}
	if !ownedBy(m.GetAnnotations(), c.obj) {
		return nil
	}
	if _, err := helper.Delete("", info.Name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	msg := fmt.Sprintf("release %s was already gone (its Secrets deleted, as with its namespace); deleted %s %s that it had created",
		c.obj.GetName(), info.Mapping.GroupVersionKind.Kind, info.Name)
	ctrl.Log.WithName("orphan-sweep").Info(msg, "namespace", c.obj.GetNamespace())
	c.recorder.Event(c.obj, corev1.EventTypeWarning, orphanDeleted, msg)
	return nil
}
