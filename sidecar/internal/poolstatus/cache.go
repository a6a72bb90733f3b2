package poolstatus

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The bookkeeping caches two kinds:
//
//   - PersistentVolumeClaims of every namespace (pools serve claims from anywhere, even
//     when WATCH_NAMESPACE limits the operator), stripped to name, namespace, UID,
//     resourceVersion, spec.storageClassName, spec.resources.requests.storage and
//     status.phase: about 1 KiB a claim instead of several, with managedFields.
//   - WarpdrivePools, shared with the workload status controller, whose transform drops
//     the spec; the pool's keeps spec.capacity, spec.overcommitRatio and
//     spec.storageClassName, which the bookkeeping reads.

// poolSpecFields are the spec fields of a WarpdrivePool the cache keeps.
var poolSpecFields = []string{"capacity", "overcommitRatio", "storageClassName"}

// CacheOptions adds the claims to the cache options byObject (as built by
// workloadstatus.CacheOptions) and makes the cache of the pool kind pool keep the spec
// fields the bookkeeping reads.
func CacheOptions(byObject map[client.Object]cache.ByObject, pool schema.GroupKind) map[client.Object]cache.ByObject {
	byObject[&corev1.PersistentVolumeClaim{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{cache.AllNamespaces: {}},
		Transform:  TrimClaim,
	}
	for obj, opts := range byObject {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GroupVersionKind().GroupKind() != pool {
			continue
		}
		opts.Transform = keepPoolSpec(opts.Transform)
		byObject[obj] = opts
	}
	return byObject
}

var _ toolscache.TransformFunc = TrimClaim

// TrimClaim is a cache transform that keeps only what the ledger reads of a claim. Other
// objects pass through. It is idempotent, as client-go requires of transforms.
func TrimClaim(in any) (any, error) {
	pvc, ok := in.(*corev1.PersistentVolumeClaim)
	if !ok {
		return in, nil
	}
	trimmed := &corev1.PersistentVolumeClaim{
		TypeMeta: pvc.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:              pvc.Name,
			Namespace:         pvc.Namespace,
			UID:               pvc.UID,
			ResourceVersion:   pvc.ResourceVersion,
			DeletionTimestamp: pvc.DeletionTimestamp,
		},
		Spec:   corev1.PersistentVolumeClaimSpec{StorageClassName: pvc.Spec.StorageClassName},
		Status: corev1.PersistentVolumeClaimStatus{Phase: pvc.Status.Phase},
	}
	if size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
		trimmed.Spec.Resources.Requests = requests.of(size)
	}
	return trimmed, nil
}

// requests interns the requests of trimmed claims. A one-entry map costs about 600 bytes,
// half of a trimmed claim, and most claims ask for one of a few sizes, so claims of the
// same size share one map. Sharing is safe because nothing writes to cached objects: the
// cache hands out deep copies, and informer handlers (the books) only read. The table
// holds at most maxInterned sizes; beyond that each claim gets its own map.
var requests = &internedRequests{lists: map[string]corev1.ResourceList{}}

const maxInterned = 4096

type internedRequests struct {
	mu    sync.Mutex
	lists map[string]corev1.ResourceList
}

func (r *internedRequests) of(size resource.Quantity) corev1.ResourceList {
	key := size.String() // canonical, so equal quantities of one format share
	r.mu.Lock()
	defer r.mu.Unlock()
	if list, ok := r.lists[key]; ok {
		return list
	}
	list := corev1.ResourceList{corev1.ResourceStorage: size}
	if len(r.lists) < maxInterned {
		r.lists[key] = list
	}
	return list
}

// keepPoolSpec wraps a pool transform that drops the spec so that the fields in
// poolSpecFields survive it.
func keepPoolSpec(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		u, ok := in.(*unstructured.Unstructured)
		if !ok || next == nil {
			return in, nil
		}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		out, err := next(in)
		if err != nil {
			return out, err
		}
		if u, ok = out.(*unstructured.Unstructured); !ok {
			return out, nil
		}
		kept := map[string]any{}
		for _, f := range poolSpecFields {
			if v, ok := spec[f]; ok {
				kept[f] = v
			}
		}
		u.Object["spec"] = kept
		return u, nil
	}
}

// PoolKind is the kind whose custom resources are storage pools.
var PoolKind = schema.GroupKind{Group: "tos.transwarp.io", Kind: "WarpdrivePool"}
