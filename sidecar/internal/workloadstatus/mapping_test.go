package workloadstatus

import (
	"reflect"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

var (
	poolGK      = schema.GroupKind{Group: "tos.transwarp.io", Kind: "WarpdrivePool"}
	memcachedGK = schema.GroupKind{Group: "cache.example.com", Kind: "Memcached"}
	testKinds   = NewKindSet(poolGK, memcachedGK)
)

func ownerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes, BlockOwnerDeletion: &yes}
}

func helmAnnotations(release, namespace string) map[string]string {
	return map[string]string{
		helmReleaseNameAnnotation:      release,
		helmReleaseNamespaceAnnotation: namespace,
	}
}

func deployment(namespace, name string, refs []metav1.OwnerReference, annotations map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
		Namespace:       namespace,
		Name:            name,
		OwnerReferences: refs,
		Annotations:     annotations,
		Labels:          map[string]string{helmManagedByLabel: helmManagedByValue},
	}}
}

func req(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}

func TestRequestsForWorkload(t *testing.T) {
	cases := []struct {
		name string
		obj  *appsv1.Deployment
		gk   schema.GroupKind
		want []reconcile.Request
	}{{
		name: "owner reference to a CR of the kind",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")}, helmAnnotations("pool-a", "ns1")),
		gk:   poolGK,
		want: []reconcile.Request{req("ns1", "pool-a")},
	}, {
		name: "owner reference matches on group and kind, not version",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1beta1", "WarpdrivePool", "pool-a", "uid-a")}, nil),
		gk:   poolGK,
		want: []reconcile.Request{req("ns1", "pool-a")},
	}, {
		name: "owner reference wins over helm annotations",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")}, helmAnnotations("something-else", "ns1")),
		gk:   poolGK,
		want: []reconcile.Request{req("ns1", "pool-a")},
	}, {
		name: "helm annotations only",
		obj:  deployment("ns1", "web", nil, helmAnnotations("pool-a", "ns1")),
		gk:   poolGK,
		want: []reconcile.Request{req("ns1", "pool-a")},
	}, {
		name: "helm annotations only are offered to every kind",
		obj:  deployment("ns1", "web", nil, helmAnnotations("pool-a", "ns1")),
		gk:   memcachedGK,
		want: []reconcile.Request{req("ns1", "pool-a")},
	}, {
		name: "owner reference of a foreign kind",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("example.com/v1", "Other", "x", "uid-x")}, nil),
		gk:   poolGK,
		want: nil,
	}, {
		name: "owner reference of a foreign kind falls back to helm annotations",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("example.com/v1", "Other", "x", "uid-x")}, helmAnnotations("pool-a", "ns1")),
		gk:   poolGK,
		want: []reconcile.Request{req("ns1", "pool-a")},
	}, {
		name: "owner reference of another operator kind excludes helm annotations",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("cache.example.com/v1alpha1", "Memcached", "mc", "uid-m")}, helmAnnotations("mc", "ns1")),
		gk:   poolGK,
		want: nil,
	}, {
		name: "same kind name in a foreign group",
		obj:  deployment("ns1", "web", []metav1.OwnerReference{ownerRef("other.io/v1", "WarpdrivePool", "pool-a", "uid-a")}, nil),
		gk:   poolGK,
		want: nil,
	}, {
		name: "helm release of another namespace",
		obj:  deployment("ns2", "web", nil, helmAnnotations("pool-a", "ns1")),
		gk:   poolGK,
		want: nil,
	}, {
		name: "helm release name without namespace",
		obj:  deployment("ns1", "web", nil, map[string]string{helmReleaseNameAnnotation: "pool-a"}),
		gk:   poolGK,
		want: nil,
	}, {
		name: "no markers",
		obj:  deployment("ns1", "web", nil, map[string]string{"unrelated": "x"}),
		gk:   poolGK,
		want: nil,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := requestsForWorkload(tc.obj, tc.gk, testKinds)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("requestsForWorkload = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBelongsTo(t *testing.T) {
	cr := metav1.ObjectMeta{Namespace: "ns1", Name: "pool-a", UID: "uid-a"}
	cases := []struct {
		name string
		obj  *appsv1.Deployment
		want bool
	}{
		{"owner UID", deployment("ns1", "d", []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")}, nil), true},
		{"owner of a deleted CR with the same name", deployment("ns1", "d", []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "old-uid")}, helmAnnotations("pool-a", "ns1")), false},
		{"owned by another operator kind with the same release name", deployment("ns1", "d", []metav1.OwnerReference{ownerRef("cache.example.com/v1alpha1", "Memcached", "pool-a", "uid-m")}, helmAnnotations("pool-a", "ns1")), false},
		{"helm annotations", deployment("ns1", "d", nil, helmAnnotations("pool-a", "ns1")), true},
		{"foreign owner and helm annotations", deployment("ns1", "d", []metav1.OwnerReference{ownerRef("example.com/v1", "Other", "x", "uid-x")}, helmAnnotations("pool-a", "ns1")), true},
		{"helm annotations of another release", deployment("ns1", "d", nil, helmAnnotations("pool-b", "ns1")), false},
		{"other namespace", deployment("ns2", "d", nil, helmAnnotations("pool-a", "ns2")), false},
		{"no markers", deployment("ns1", "d", nil, nil), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := belongsTo(tc.obj, &cr, testKinds); got != tc.want {
				t.Fatalf("belongsTo = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReleaseIndexValues(t *testing.T) {
	obj := deployment("ns1", "d",
		[]metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")},
		helmAnnotations("pool-a", "ns1"))
	got := releaseIndexValues(obj)
	sort.Strings(got)
	want := []string{"release/pool-a", "uid/uid-a"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("releaseIndexValues = %v, want %v", got, want)
	}
	if got := releaseIndexValues(deployment("ns2", "d", nil, helmAnnotations("pool-a", "ns1"))); len(got) != 0 {
		t.Fatalf("a release of another namespace must not be indexed, got %v", got)
	}
}
