package ownership

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The owner annotations of operator-lib's handler package (SetOwnerAnnotations), which the
// helm-operator's post-renderer puts on cluster-scoped objects.
const (
	OwnerNameAnnotation = "operator-sdk/primary-resource"
	OwnerTypeAnnotation = "operator-sdk/primary-resource-type"
)

// Helm's ownership annotations, which it puts on every object of a release.
const (
	HelmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	HelmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
)

// OwnedBy reports whether the annotations of an object name cr as its owner (see OwnerOf).
func OwnedBy(annotations map[string]string, cr client.Object) bool {
	owner, ok := OwnerOf(annotations)
	return ok && owner.Kind == cr.GetObjectKind().GroupVersionKind().GroupKind() &&
		owner.Key == client.ObjectKeyFromObject(cr)
}

// CR names a CR: its kind and its namespace and name.
type CR struct {
	Kind schema.GroupKind
	Key  client.ObjectKey
}

// String is the CR's kind, namespace and name, as the orphan collector's index keys them.
func (r CR) String() string { return r.Kind.String() + "/" + r.Key.String() }

// OwnerOf returns the CR that the annotations of a cluster-scoped object name as its owner,
// when both the helm-operator's annotations (the CR's namespace, name and kind) and Helm's
// (its release, named after the CR, in the CR's namespace) name it.
func OwnerOf(annotations map[string]string) (CR, bool) {
	ns, name, ok := strings.Cut(annotations[OwnerNameAnnotation], "/")
	kind := schema.ParseGroupKind(annotations[OwnerTypeAnnotation])
	if !ok || ns == "" || name == "" || kind.Kind == "" ||
		annotations[HelmReleaseNameAnnotation] != name || annotations[HelmReleaseNamespaceAnnotation] != ns {
		return CR{}, false
	}
	return CR{Kind: kind, Key: client.ObjectKey{Namespace: ns, Name: name}}, true
}

// DeleteAsSeen deletes obj as it was read, its UID a precondition, so that an object of the
// same name created since is left alone. It reports whether it deleted it: an object already
// gone or replaced is no error. The orphan sweep (internal/operator/pipeline/layer_orphansweep.go) and
// the orphan collector (internal/operator/orphan_controller.go) delete with it the objects
// OwnedBy a gone CR.
func DeleteAsSeen(ctx context.Context, w client.Writer, obj client.Object) (bool, error) {
	uid := obj.GetUID()
	err := w.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}
