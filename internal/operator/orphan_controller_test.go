package operator

import (
	"context"
	"errors"
	"slices"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

var poolGVK = schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"}

// collecting is an orphan collector of StorageClasses for the pool kind, whose cache holds
// cached (the cluster-scoped objects and the CRs the manager has seen) and whose API server
// holds live; deletes records the objects it deletes, with their UID precondition.
func collecting(t *testing.T, cached, live []client.Object, liveErr error) (*orphanCollector, client.Client, *record.FakeRecorder, *[]string) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := storagev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	scheme.AddKnownTypeWithName(poolGVK, &unstructured.Unstructured{})
	scheme.AddKnownTypeWithName(poolGVK.GroupVersion().WithKind("WarpdrivePoolList"), &unstructured.UnstructuredList{})
	deletes := &[]string{}
	c := &orphanCollector{gvk: actiontest.StorageClassGVK, owners: map[schema.GroupKind]schema.GroupVersionKind{poolGVK.GroupKind(): poolGVK}}
	cache := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached...).
		WithIndex(c.object(), ownerIndex, c.indexOwner).
		WithInterceptorFuncs(interceptor.Funcs{
			Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
				do := &client.DeleteOptions{}
				do.ApplyOptions(opts)
				uid := ""
				if do.Preconditions != nil && do.Preconditions.UID != nil {
					uid = string(*do.Preconditions.UID)
				}
				*deletes = append(*deletes, obj.GetName()+" uid="+uid)
				return cl.Delete(ctx, obj, opts...)
			},
		}).Build()
	server := fake.NewClientBuilder().WithScheme(scheme).WithObjects(live...).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if liveErr != nil {
					return liveErr
				}
				return cl.Get(ctx, key, obj, opts...)
			},
		}).Build()
	rec := record.NewFakeRecorder(10)
	c.cache, c.live, c.writer, c.recorder = cache, server, cache, rec
	return c, cache, rec, deletes
}

func pool(ns, name string) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{}
	cr.SetGroupVersionKind(poolGVK)
	cr.SetNamespace(ns)
	cr.SetName(name)
	return cr
}

func classWithUID(name, uid string, annotations map[string]string) *storagev1.StorageClass {
	sc := actiontest.StorageClass(name, annotations)
	sc.UID = types.UID(uid)
	return sc
}

// A StorageClass whose pool is gone is deleted (its UID a precondition), with an Event; one
// whose pool exists, in the cache or only on the API server, is kept, as are those that name
// no CR, or a CR of a kind whose chart renders no StorageClass.
func TestOrphanCollector(t *testing.T) {
	appOwned := actiontest.PoolOwner()
	appOwned[ownership.OwnerTypeAnnotation] = "AppService.appcontroller.k8s.io"
	for _, tc := range []struct {
		name         string
		cached, live []client.Object
		liveErr      error
		wantDeleted  []string
		wantErr      bool
	}{
		{name: "pool gone", cached: []client.Object{classWithUID("pool-x", "u1", actiontest.PoolOwner())},
			wantDeleted: []string{"pool-x uid=u1"}},
		{name: "pool in the cache", cached: []client.Object{classWithUID("pool-x", "u1", actiontest.PoolOwner()), pool("team-a", "x")}},
		{name: "pool created since the cache looked", cached: []client.Object{classWithUID("pool-x", "u1", actiontest.PoolOwner())},
			live: []client.Object{pool("team-a", "x")}},
		{name: "another namespace's pool of that name exists", cached: []client.Object{classWithUID("pool-x", "u1", actiontest.PoolOwner()), pool("team-b", "x")},
			wantDeleted: []string{"pool-x uid=u1"}},
		{name: "the API server cannot say", cached: []client.Object{classWithUID("pool-x", "u1", actiontest.PoolOwner())},
			liveErr: errors.New("unavailable"), wantErr: true},
		{name: "named for a kind whose chart has no StorageClass", cached: []client.Object{classWithUID("pool-x", "u1", appOwned)}},
		{name: "not the operator's", cached: []client.Object{classWithUID("pool-x", "u1", nil)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cl, rec, deletes := collecting(t, tc.cached, tc.live, tc.liveErr)
			_, err := c.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "pool-x"}})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Reconcile: %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(*deletes, tc.wantDeleted) {
				t.Errorf("deleted %q, want %q", *deletes, tc.wantDeleted)
			}
			getErr := cl.Get(context.Background(), client.ObjectKey{Name: "pool-x"}, &storagev1.StorageClass{})
			if gone := apierrors.IsNotFound(getErr); gone != (len(tc.wantDeleted) > 0) {
				t.Errorf("StorageClass after the sync: %v", getErr)
			}
			var want []string
			if len(tc.wantDeleted) > 0 {
				want = []string{"Warning OrphanCollected WarpdrivePool team-a/x, which the operator created it for, is gone; deleted StorageClass pool-x"}
			}
			if got := actiontest.Events(rec); !slices.Equal(got, want) {
				t.Errorf("events %q, want %q", got, want)
			}
		})
	}
}

// A pool's deletion queues the StorageClasses named for it, and no other.
func TestOrphanCollectorQueuesOnOwnerDeletion(t *testing.T) {
	other := actiontest.PoolOwner()
	other[ownership.OwnerNameAnnotation], other[ownership.HelmReleaseNameAnnotation] = "team-a/y", "y"
	c, _, _, _ := collecting(t, []client.Object{
		classWithUID("pool-x", "u1", actiontest.PoolOwner()), classWithUID("pool-y", "u2", other), classWithUID("admins", "u3", nil),
	}, nil, nil)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	c.ownerDeleted(context.Background(), event.DeleteEvent{Object: pool("team-a", "x")}, q)
	if q.Len() != 1 {
		t.Fatalf("%d requests queued, want 1", q.Len())
	}
	if req, _ := q.Get(); req.Name != "pool-x" {
		t.Errorf("queued %v, want pool-x", req)
	}
}
