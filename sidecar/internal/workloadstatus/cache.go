package workloadstatus

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/sharedstrings"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
)

// The sidecar shares a pod with the helm-operator, so its informer cache is
// kept to what the status computation reads:
//
//   - Deployments, StatefulSets and DaemonSets, only those labelled
//     app.kubernetes.io/managed-by=Helm (Helm force-sets that label on every
//     object of every release, so no workload of a CR's release is missed),
//     stripped to metadata, spec.selector and status without its conditions.
//     The pod template is by far the largest part of a workload and is never
//     read here.
//   - The CR kinds from watches.yaml as unstructured, without spec (the Helm
//     values, never read here), managedFields, the last-applied annotation,
//     the manager's status.deployedRelease (with the rendered manifest, under
//     --status-release-manifest or as the stock helm-operator left it) and
//     status.chart but its revision, and with the conditions other than
//     RolledOut cut to their type and status, shared between CRs (see
//     TrimCustomResource).
//     (WarpdrivePools keep the three spec fields the pool bookkeeping reads:
//     see sidecar/internal/poolstatus/cache.go.)
//
// What is kept has its repeated strings interned (internal/sharedstrings): keys, label
// keys and values, namespaces, owner kinds are the same in every CR and workload
// of a chart (TestCachedSizes: about 1 KB less per CR with its Deployment).
//
// Nothing else is cached here: no Pods, no Secrets (the Helm release storage),
// no ReplicaSets. The pool bookkeeping adds trimmed PersistentVolumeClaims.

// CacheOptions returns the per-object cache configuration for the workload
// kinds and the CR kinds gvks, to be set as cache.Options.ByObject.
func CacheOptions(gvks []schema.GroupVersionKind) map[client.Object]cache.ByObject {
	helmManaged := labels.SelectorFromSet(labels.Set{helmManagedByLabel: helmManagedByValue})
	byObject := map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:  {Label: helmManaged, Transform: TrimWorkload},
		&appsv1.StatefulSet{}: {Label: helmManaged, Transform: TrimWorkload},
		&appsv1.DaemonSet{}:   {Label: helmManaged, Transform: TrimWorkload},
	}
	for _, gvk := range gvks {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		byObject[u] = cache.ByObject{Transform: TrimCustomResource}
	}
	return byObject
}

var _ toolscache.TransformFunc = TrimWorkload
var _ toolscache.TransformFunc = TrimCustomResource

// TrimWorkload is a cache transform that keeps only what the sidecar reads of
// a workload: name, namespace, UID, labels, owner references, the Helm
// release annotations, spec.selector and status without its conditions (the
// counts and observedGeneration say whether it rolled out; the conditions'
// messages and times were an eighth of a cached Deployment). Objects of other
// types (such as tombstones) pass through untouched. It is idempotent, as client-go
// requires of transforms.
func TrimWorkload(in interface{}) (interface{}, error) {
	switch o := in.(type) {
	case *appsv1.Deployment:
		o.ObjectMeta = trimMeta(o.ObjectMeta)
		o.Spec = appsv1.DeploymentSpec{Selector: internSelector(o.Spec.Selector), Replicas: o.Spec.Replicas}
		o.Status.Conditions = nil
	case *appsv1.StatefulSet:
		o.ObjectMeta = trimMeta(o.ObjectMeta)
		o.Spec = appsv1.StatefulSetSpec{Selector: internSelector(o.Spec.Selector), Replicas: o.Spec.Replicas}
		o.Status.Conditions = nil
	case *appsv1.DaemonSet:
		o.ObjectMeta = trimMeta(o.ObjectMeta)
		o.Spec = appsv1.DaemonSetSpec{Selector: internSelector(o.Spec.Selector)}
		o.Status.Conditions = nil
	}
	return in, nil
}

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	// The kept annotations' keys are this package's constants, shared already.
	var ann map[string]string
	for _, k := range []string{helmReleaseNameAnnotation, helmReleaseNamespaceAnnotation} {
		if v, ok := m.Annotations[k]; ok {
			if ann == nil {
				ann = make(map[string]string, 2)
			}
			ann[k] = sharedstrings.String(v)
		}
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = sharedstrings.String(r.APIVersion), sharedstrings.String(r.Kind)
	}
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         sharedstrings.String(m.Namespace),
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            sharedstrings.StringMap(m.Labels),
		Annotations:       ann,
		OwnerReferences:   m.OwnerReferences,
	}
}

// internSelector interns a workload's selector's labels, the same few keys and values in
// every workload of a chart.
func internSelector(s *metav1.LabelSelector) *metav1.LabelSelector {
	if s != nil {
		s.MatchLabels = sharedstrings.StringMap(s.MatchLabels)
	}
	return s
}

// TrimCustomResource is a cache transform for the CRs. The sidecar reads of a CR
// its metadata, its own status fields, observedGeneration, the release revision
// in status.chart (statuscontract.DeployedRevision), the pool's status, the
// RolledOut condition whole and, of the other conditions, which exist (the
// helm-operator has reported) and whether they are True (Deployed): it keeps
// those. It drops spec, managedFields, the last-applied annotation, the
// manager's deployedRelease and the rest of chart, and the other conditions'
// reasons, messages and times, which are most of a CR's status (about 1.4 KB of 1.9 in
// the AppService sample:
// docs/bench/findings.md, "The sidecar's cached CRs trimmed"). The sidecar
// writes with applies built from what it reads, never with an update of the
// cached object, so nothing dropped here can be lost.
func TrimCustomResource(in interface{}) (interface{}, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return in, nil
	}
	delete(u.Object, "spec")
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(u.Object, "metadata", "annotations", corev1.LastAppliedConfigAnnotation)
	// The conditions and status.chart are set aside while the rest is interned: interning
	// builds every map again, which would copy the shared maps into maps of each CR's own.
	var conds []interface{}
	var chart map[string]interface{}
	if status, ok := u.Object["status"].(map[string]interface{}); ok {
		delete(status, statuscontract.FieldDeployedRelease)
		if c, ok := status[statuscontract.FieldChart].(map[string]interface{}); ok {
			chart = chartRevision(c[statuscontract.FieldChartRevision])
		}
		delete(status, statuscontract.FieldChart)
		if c, ok := status[statuscontract.FieldConditions].([]interface{}); ok {
			conds = c
			delete(status, statuscontract.FieldConditions)
		}
	}
	u.Object = sharedstrings.Value(u.Object).(map[string]interface{})
	if chart != nil {
		u.Object["status"].(map[string]interface{})[statuscontract.FieldChart] = chart
	}
	if conds == nil {
		return u, nil
	}
	for i, c := range conds {
		if m, ok := c.(map[string]interface{}); ok && m["type"] != statuscontract.RolledOut {
			conds[i] = briefCondition(m["type"], m["status"])
		} else {
			conds[i] = sharedstrings.Value(c)
		}
	}
	u.Object["status"].(map[string]interface{})[statuscontract.FieldConditions] = conds
	return u, nil
}

// briefConditions holds one map {type, status} for each condition type the manager writes
// and each status, shared by every cached CR: a map is most of what a condition costs
// (about 330 bytes for two entries), and a CR has nine conditions besides RolledOut, so
// sharing them takes a cached AppService from 6.5 to 2.9 KB (TestCachedSizes): 35 MB of the
// sidecar's heap at 10,000 CRs. The shared maps are never written: the cache's readers get
// deep copies, and the transform replaces a condition rather than editing it. A type or status not in
// the table (a condition someone else wrote) gets a map of its own, so what a tenant writes
// into a status cannot grow the table.
var briefConditions = func() map[[2]string]map[string]interface{} {
	table := map[[2]string]map[string]interface{}{}
	for _, owner := range statuscontract.StatusOwners {
		for _, typ := range owner.Conditions {
			for _, st := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
				table[[2]string{typ, string(st)}] = map[string]interface{}{"type": typ, "status": string(st)}
			}
		}
	}
	return table
}()

// briefCondition is a condition's type and status: a shared map for those the manager
// writes, a new one otherwise.
func briefCondition(typ, status interface{}) map[string]interface{} {
	t, _ := typ.(string)
	s, _ := status.(string)
	if m, ok := briefConditions[[2]string{t, s}]; ok {
		return m
	}
	return map[string]interface{}{"type": typ, "status": status}
}

// sharedRevisions bounds the release revisions whose status.chart the cached CRs share.
const sharedRevisions = 1024

// chartRevisions holds one map {revision: N} for each release revision N below
// sharedRevisions, shared by every cached CR at it, as briefConditions are: a map of each
// CR's own cost 400 bytes a cached AppService (TestCachedSizes, 2134 -> 2540 bytes), for a
// number most CRs share. The shared maps are never written.
var chartRevisions sync.Map // int64 -> map[string]interface{}

// chartRevision is the cached status.chart of a CR whose release is at revision, as JSON
// decoded it: a shared map for the revisions below sharedRevisions, a new one otherwise.
func chartRevision(revision interface{}) map[string]interface{} {
	n, ok := revision.(int64)
	if !ok || n < 0 || n >= sharedRevisions {
		return map[string]interface{}{statuscontract.FieldChartRevision: revision}
	}
	m, _ := chartRevisions.LoadOrStore(n, map[string]interface{}{statuscontract.FieldChartRevision: n})
	return m.(map[string]interface{})
}
