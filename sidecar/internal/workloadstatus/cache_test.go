package workloadstatus

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestTrimWorkload(t *testing.T) {
	refs := []metav1.OwnerReference{ownerRef("tos.transwarp.io/v1alpha1", "WarpdrivePool", "pool-a", "uid-a")}
	sel := selector("app", "web")
	status := appsv1.DeploymentStatus{Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns1", UID: "uid-d", ResourceVersion: "7", Generation: 3,
			Labels:          map[string]string{helmManagedByLabel: helmManagedByValue},
			Annotations:     map[string]string{helmReleaseNameAnnotation: "pool-a", helmReleaseNamespaceAnnotation: "ns1", corev1.LastAppliedConfigAnnotation: "{...}", "deployment.kubernetes.io/revision": "4"},
			OwnerReferences: refs,
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "helm"}},
			Finalizers:      []string{"x"},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: sel,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}},
		},
		Status: *status.DeepCopy(),
	}
	// The conditions are dropped: the counts say whether the workload rolled out.
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
		Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."}}
	out, err := TrimWorkload(d)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.Deployment)
	want := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns1", UID: "uid-d", ResourceVersion: "7", Generation: 3,
			Labels:          map[string]string{helmManagedByLabel: helmManagedByValue},
			Annotations:     map[string]string{helmReleaseNameAnnotation: "pool-a", helmReleaseNamespaceAnnotation: "ns1"},
			OwnerReferences: refs,
		},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: sel},
		Status: status,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TrimWorkload =\n%+v\nwant\n%+v", got, want)
	}
	again, _ := TrimWorkload(got.DeepCopy())
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("TrimWorkload is not idempotent: %+v", again)
	}

	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{
		Selector:             sel,
		Template:             corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{}},
	}}
	_, _ = TrimWorkload(sts)
	if !reflect.DeepEqual(sts.Spec, appsv1.StatefulSetSpec{Selector: sel}) {
		t.Errorf("StatefulSet spec not trimmed: %+v", sts.Spec)
	}
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{
		Selector: sel,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}},
	}}
	_, _ = TrimWorkload(ds)
	if !reflect.DeepEqual(ds.Spec, appsv1.DaemonSetSpec{Selector: sel}) {
		t.Errorf("DaemonSet spec not trimmed: %+v", ds.Spec)
	}

	tomb := toolscache.DeletedFinalStateUnknown{Key: "ns1/web", Obj: d}
	if out, err := TrimWorkload(tomb); err != nil || !reflect.DeepEqual(out, tomb) {
		t.Errorf("TrimWorkload(tombstone) = %v, %v; want it unchanged", out, err)
	}
}

func TestTrimCustomResource(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "tos.transwarp.io/v1alpha1",
		"kind":       "WarpdrivePool",
		"metadata": map[string]interface{}{
			"name": "pool-a", "namespace": "ns1", "uid": "uid-a", "generation": int64(2),
			"labels":        map[string]interface{}{"shard": "a"},
			"annotations":   map[string]interface{}{corev1.LastAppliedConfigAnnotation: "{...}", "keep": "me"},
			"managedFields": []interface{}{map[string]interface{}{"manager": "kubectl"}},
		},
		"spec": map[string]interface{}{"replicaCount": int64(3)},
		"status": map[string]interface{}{
			"conditions": []interface{}{
				map[string]interface{}{"type": "Deployed", "status": "True", "reason": "InstallSuccessful",
					"message": "release was successfully installed", "lastTransitionTime": "2026-11-25T10:26:31Z"},
				map[string]interface{}{"type": "RolledOut", "status": "False", "reason": "Progressing",
					"message": "1 of 3 replicas available", "observedGeneration": int64(2),
					"lastTransitionTime": "2026-11-25T10:26:31Z"},
			},
			"deployedRelease":    map[string]interface{}{"name": "pool-a", "manifest": "---\nhuge"},
			"chart":              map[string]interface{}{"version": "0.1.0", "revision": int64(1)},
			"observedGeneration": int64(2),
			"pool":               map[string]interface{}{"allocated": "1Ti"},
			"replicas":           int64(3),
		},
	}}
	out, err := TrimCustomResource(u)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]interface{}{
		"apiVersion": "tos.transwarp.io/v1alpha1",
		"kind":       "WarpdrivePool",
		"metadata": map[string]interface{}{
			"name": "pool-a", "namespace": "ns1", "uid": "uid-a", "generation": int64(2),
			"labels":      map[string]interface{}{"shard": "a"},
			"annotations": map[string]interface{}{"keep": "me"},
		},
		"status": map[string]interface{}{
			"conditions": []interface{}{
				map[string]interface{}{"type": "Deployed", "status": "True"},
				map[string]interface{}{"type": "RolledOut", "status": "False", "reason": "Progressing",
					"message": "1 of 3 replicas available", "observedGeneration": int64(2),
					"lastTransitionTime": "2026-11-25T10:26:31Z"},
			},
			"chart":              map[string]interface{}{"revision": int64(1)},
			"observedGeneration": int64(2),
			"pool":               map[string]interface{}{"allocated": "1Ti"},
			"replicas":           int64(3),
		},
	}
	if got := out.(*unstructured.Unstructured).Object; !reflect.DeepEqual(got, want) {
		t.Fatalf("TrimCustomResource =\n%v\nwant\n%v", got, want)
	}
	if out, _ := TrimCustomResource(out); !reflect.DeepEqual(out.(*unstructured.Unstructured).Object, want) {
		t.Fatal("TrimCustomResource is not idempotent")
	}
}

func TestCacheOptions(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "tos.transwarp.io", Version: "v1alpha1", Kind: "WarpdrivePool"}
	opts := CacheOptions([]schema.GroupVersionKind{gvk})
	if len(opts) != 4 {
		t.Fatalf("got %d ByObject entries, want 4", len(opts))
	}
	helm := labels.Set{helmManagedByLabel: helmManagedByValue}
	var sawCR bool
	for obj, o := range opts {
		switch obj := obj.(type) {
		case *appsv1.Deployment, *appsv1.StatefulSet, *appsv1.DaemonSet:
			if o.Label == nil || !o.Label.Matches(helm) || o.Label.Matches(labels.Set{}) || o.Transform == nil {
				t.Errorf("%T: want the managed-by=Helm selector and a transform, got %+v", obj, o)
			}
		case *unstructured.Unstructured:
			sawCR = obj.GroupVersionKind() == gvk && o.Transform != nil && o.Label == nil
		default:
			t.Errorf("unexpected cached type %T", obj)
		}
	}
	if !sawCR {
		t.Error("CR kind not configured with an unfiltered, trimmed cache")
	}
}

// The conditions a trimmed CR keeps as type and status are one shared map per type and
// status for those the manager writes, and a map of their own for any other.
func TestTrimmedConditionsAreShared(t *testing.T) {
	cr := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]interface{}{
			"metadata": map[string]interface{}{"name": name, "namespace": "ns1"},
			"status": map[string]interface{}{"conditions": []interface{}{
				map[string]interface{}{"type": "Deployed", "status": "True", "reason": "InstallSuccessful", "message": name},
				map[string]interface{}{"type": "Ready", "status": "False", "reason": "RollingOut", "message": name},
				map[string]interface{}{"type": "SomeoneElses", "status": "True", "message": name},
			}},
		}}
	}
	conds := func(u *unstructured.Unstructured) []interface{} {
		out, err := TrimCustomResource(u)
		if err != nil {
			t.Fatal(err)
		}
		c, _, _ := unstructured.NestedFieldNoCopy(out.(*unstructured.Unstructured).Object, "status", "conditions")
		return c.([]interface{})
	}
	a, b := conds(cr("a")), conds(cr("b"))
	same := func(x, y interface{}) bool { return reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer() }
	for i, typ := range []string{"Deployed", "Ready"} {
		if !same(a[i], b[i]) {
			t.Errorf("%s: two CRs hold a map each, want one shared", typ)
		}
	}
	if same(a[2], b[2]) {
		t.Error("a condition type the manager does not write is shared: its table would grow with what tenants write")
	}
	want := []interface{}{
		map[string]interface{}{"type": "Deployed", "status": "True"},
		map[string]interface{}{"type": "Ready", "status": "False"},
		map[string]interface{}{"type": "SomeoneElses", "status": "True"},
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("trimmed conditions %v, want %v", a, want)
	}
	// A reader gets a deep copy, so the shared maps cannot be written through the cache.
	cp := (&unstructured.Unstructured{Object: map[string]interface{}{"status": map[string]interface{}{"conditions": a}}}).DeepCopy()
	c, _, _ := unstructured.NestedFieldNoCopy(cp.Object, "status", "conditions")
	c.([]interface{})[0].(map[string]interface{})["status"] = "False"
	if got := conds(cr("c"))[0]; !reflect.DeepEqual(got, want[0]) {
		t.Errorf("after a reader edited its copy, the shared Deployed condition is %v", got)
	}
}

// The release revision of status.chart is all that is kept of it, in a map that the CRs at
// one revision share, up to sharedRevisions.
func TestTrimmedChartRevisionsAreShared(t *testing.T) {
	chart := func(name string, revision int64) interface{} {
		u := &unstructured.Unstructured{Object: map[string]interface{}{
			"metadata": map[string]interface{}{"name": name, "namespace": "ns1"},
			"status": map[string]interface{}{"chart": map[string]interface{}{
				"version": "0.1.0", "digest": name, "revision": revision, "lastDeployed": "2026-11-25T10:26:31Z"}},
		}}
		out, err := TrimCustomResource(u)
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := TrimCustomResource(out); !reflect.DeepEqual(again, out) {
			t.Fatal("TrimCustomResource is not idempotent")
		}
		c, _, _ := unstructured.NestedFieldNoCopy(out.(*unstructured.Unstructured).Object, "status", "chart")
		return c
	}
	same := func(x, y interface{}) bool { return reflect.ValueOf(x).Pointer() == reflect.ValueOf(y).Pointer() }
	a, b := chart("a", 3), chart("b", 3)
	if want := map[string]interface{}{"revision": int64(3)}; !reflect.DeepEqual(a, want) {
		t.Fatalf("trimmed status.chart %v, want %v", a, want)
	}
	if !same(a, b) {
		t.Error("two CRs at revision 3 hold a status.chart each, want one shared")
	}
	if same(chart("a", sharedRevisions), chart("b", sharedRevisions)) {
		t.Error("a revision from sharedRevisions on is shared: the table would grow with every upgrade")
	}
}
