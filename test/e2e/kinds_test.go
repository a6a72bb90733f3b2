package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kindCase is what the suite knows of one kind: how to make a CR of it and which objects
// its chart renders from that CR's spec.
type kindCase struct {
	kind string
	// replicasField is the spec field that sets the workload's replica count.
	replicasField string
	// overrides are spec values on top of the sample that keep tests apart (names of
	// cluster-scoped objects must not collide between namespaces).
	overrides func(ns, name string) map[string]any
	// workload is the Deployment or StatefulSet the chart renders for cr.
	workload func(cr *unstructured.Unstructured) client.Object
	// children are the release's other objects.
	children func(cr *unstructured.Unstructured) []client.Object
}

var kinds = []kindCase{
	{
		kind:          "WarpdrivePool",
		replicasField: "replicas",
		overrides: func(ns, name string) map[string]any {
			return map[string]any{"storageClassName": ns + "-" + name}
		},
		workload: func(cr *unstructured.Unstructured) client.Object { return statefulSet(cr, cr.GetName()) },
		children: func(cr *unstructured.Unstructured) []client.Object {
			sc, _, _ := unstructured.NestedString(cr.Object, "spec", "storageClassName")
			return []client.Object{
				&corev1.Service{ObjectMeta: meta(cr, cr.GetName())},
				&corev1.ConfigMap{ObjectMeta: meta(cr, cr.GetName())},
				&storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: sc}},
			}
		},
	},
	{
		kind:          "AppService",
		replicasField: "replicas",
		workload: func(cr *unstructured.Unstructured) client.Object {
			name, _, _ := unstructured.NestedString(cr.Object, "spec", "deploymentName")
			return deployment(cr, name)
		},
		children: func(cr *unstructured.Unstructured) []client.Object {
			return []client.Object{&corev1.Service{ObjectMeta: meta(cr, cr.GetName())}}
		},
	},
	{
		kind:          "UnitedDeployment",
		replicasField: "replicas",
		workload: func(cr *unstructured.Unstructured) client.Object {
			name, _, _ := unstructured.NestedString(cr.Object, "spec", "deploymentName")
			return deployment(cr, name)
		},
		children: func(*unstructured.Unstructured) []client.Object { return nil },
	},
	{
		kind:          "Guestbook",
		replicasField: "replicas",
		workload:      func(cr *unstructured.Unstructured) client.Object { return deployment(cr, cr.GetName()) },
		children: func(cr *unstructured.Unstructured) []client.Object {
			return []client.Object{&corev1.Service{ObjectMeta: meta(cr, cr.GetName())}}
		},
	},
	{
		kind:          "Memcached",
		replicasField: "size",
		workload:      func(cr *unstructured.Unstructured) client.Object { return deployment(cr, cr.GetName()) },
		children: func(cr *unstructured.Unstructured) []client.Object {
			return []client.Object{&policyv1.PodDisruptionBudget{ObjectMeta: meta(cr, cr.GetName())}}
		},
	},
}

// newKindCR is a CR of kc named name in ns, from the sample plus the case's overrides.
func (kc kindCase) newCR(t testing.TB, ns, name string, overrides map[string]any) *unstructured.Unstructured {
	all := map[string]any{}
	if kc.overrides != nil {
		for k, v := range kc.overrides(ns, name) {
			all[k] = v
		}
	}
	for k, v := range overrides {
		all[k] = v
	}
	return newCR(t, kc.kind, ns, name, all)
}

func (kc kindCase) replicas(cr *unstructured.Unstructured) int64 {
	n, found, _ := unstructured.NestedInt64(cr.Object, "spec", kc.replicasField)
	if !found {
		return 1 // every chart's default
	}
	return n
}

func meta(cr *unstructured.Unstructured, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: cr.GetNamespace(), Name: name}
}

func deployment(cr *unstructured.Unstructured, name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: meta(cr, name)}
}

func statefulSet(cr *unstructured.Unstructured, name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: meta(cr, name)}
}

// workloadReplicas reads the desired and available replicas of a Deployment or StatefulSet.
func workloadReplicas(obj client.Object) (desired, available int32) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return ptrValue(w.Spec.Replicas), w.Status.AvailableReplicas
	case *appsv1.StatefulSet:
		return ptrValue(w.Spec.Replicas), w.Status.AvailableReplicas
	}
	panic("not a workload")
}

func setWorkloadReplicas(obj client.Object, n int32) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		w.Spec.Replicas = &n
	case *appsv1.StatefulSet:
		w.Spec.Replicas = &n
	}
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
