package faults

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// kind is what the suite needs to know of one CR kind: how to write a spec of n replicas and
// which workload its chart renders.
type kind struct {
	gvk           schema.GroupVersionKind // from watches.yaml (framework.GVK)
	replicasField string
	minReplicas   int64
	spec          func(ns, name string) map[string]any
	// workload is the kind ("Deployment" or "StatefulSet") and name of the CR's workload.
	workload func(cr *unstructured.Unstructured) (string, string)
}

func byName(cr *unstructured.Unstructured) (string, string) { return "Deployment", cr.GetName() }

func specName(field string) func(cr *unstructured.Unstructured) (string, string) {
	return func(cr *unstructured.Unstructured) (string, string) {
		name, _, _ := unstructured.NestedString(cr.Object, "spec", field)
		return "Deployment", name
	}
}

var (
	appService = kind{
		gvk:           framework.GVK("AppService"),
		replicasField: "replicas",
		spec:          func(_, name string) map[string]any { return map[string]any{"deploymentName": name + "-app"} },
		workload:      specName("deploymentName"),
	}
	unitedDeployment = kind{
		gvk:           framework.GVK("UnitedDeployment"),
		replicasField: "replicas",
		spec:          func(_, name string) map[string]any { return map[string]any{"deploymentName": name + "-ud"} },
		workload:      specName("deploymentName"),
	}
	guestbook = kind{
		gvk:           framework.GVK("Guestbook"),
		replicasField: "replicas",
		spec:          func(string, string) map[string]any { return map[string]any{} },
		workload:      byName,
	}
	memcached = kind{
		gvk:           framework.GVK("Memcached"),
		replicasField: "size",
		spec:          func(string, string) map[string]any { return map[string]any{} },
		workload:      byName,
	}
	pool = kind{
		gvk:           framework.GVK("WarpdrivePool"),
		replicasField: "replicas",
		minReplicas:   1,
		spec: func(ns, name string) map[string]any {
			return map[string]any{"capacity": "10Gi", "storageClassName": ns + "-" + name}
		},
		workload: func(cr *unstructured.Unstructured) (string, string) { return "StatefulSet", cr.GetName() },
	}
	allKinds = []kind{appService, unitedDeployment, guestbook, memcached, pool}
)

// newCR is a CR of kind k with n replicas.
func (k kind) newCR(ns, name string, n int64) *unstructured.Unstructured {
	cr := &unstructured.Unstructured{Object: map[string]any{"spec": k.spec(ns, name)}}
	cr.SetGroupVersionKind(k.gvk)
	cr.SetNamespace(ns)
	cr.SetName(name)
	cr.Object["spec"].(map[string]any)[k.replicasField] = n
	return cr
}

func (k kind) replicas(cr *unstructured.Unstructured) int64 {
	n, _, _ := unstructured.NestedInt64(cr.Object, "spec", k.replicasField)
	return n
}

// setReplicas changes the CR's replicas with a merge patch, as kubectl edit would.
func (k kind) setReplicas(ctx context.Context, cr *unstructured.Unstructured, n int64) error {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{k.replicasField: n}})
	return env.Client.Patch(ctx, cr.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
}

func (k kind) list(ctx context.Context, ns string) ([]unstructured.Unstructured, error) {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	err := env.Client.List(ctx, l, client.InNamespace(ns))
	return l.Items, err
}

func kindOf(gvk schema.GroupVersionKind) (kind, bool) {
	for _, k := range allKinds {
		if k.gvk == gvk {
			return k, true
		}
	}
	return kind{}, false
}

// revision is one stored revision of a release, from its Secret's labels.
type revision struct {
	version int
	status  string
	secret  corev1.Secret
}

// decoded reads the release stored in r's Secret, through Helm's own Secrets driver.
func (r revision) decoded() (*release.Release, error) {
	return driver.NewSecrets(env.Clientset.CoreV1().Secrets(r.secret.Namespace)).Get(r.secret.Name)
}

// releases lists the Helm release Secrets of namespace ns by release name, in revision order.
func releases(ctx context.Context, ns string) (map[string][]revision, error) {
	var list corev1.SecretList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		return nil, err
	}
	out := map[string][]revision{}
	for _, s := range list.Items {
		var v int
		_, _ = fmt.Sscan(s.Labels["version"], &v) // a record without a version sorts first
		name := s.Labels["name"]
		out[name] = append(out[name], revision{version: v, status: s.Labels["status"], secret: s})
	}
	for _, revs := range out {
		slices.SortFunc(revs, func(a, b revision) int { return cmp.Compare(a.version, b.version) })
	}
	return out, nil
}

// workloads are the replicas and owning release of each Deployment and StatefulSet of ns,
// by "Kind/name".
type workloadState struct {
	replicas int64
	release  string
}

func workloads(ctx context.Context, ns string) (map[string]workloadState, error) {
	out := map[string]workloadState{}
	var ds appsv1.DeploymentList
	if err := env.Client.List(ctx, &ds, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, d := range ds.Items {
		out["Deployment/"+d.Name] = workloadState{replicas: int64(ptr.Deref(d.Spec.Replicas, 1)), release: d.Annotations["meta.helm.sh/release-name"]}
	}
	var ss appsv1.StatefulSetList
	if err := env.Client.List(ctx, &ss, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, s := range ss.Items {
		out["StatefulSet/"+s.Name] = workloadState{replicas: int64(ptr.Deref(s.Spec.Replicas, 1)), release: s.Annotations["meta.helm.sh/release-name"]}
	}
	return out, nil
}

// state is a snapshot of one namespace: its CRs of the given kinds, releases and workloads.
type state struct {
	crs       []*unstructured.Unstructured
	releases  map[string][]revision
	workloads map[string]workloadState
}

func snapshot(ctx context.Context, ns string, kinds ...kind) (*state, error) {
	s := &state{}
	for _, k := range kinds {
		items, err := k.list(ctx, ns)
		if err != nil {
			return nil, err
		}
		for i := range items {
			s.crs = append(s.crs, &items[i])
		}
	}
	var err error
	if s.releases, err = releases(ctx, ns); err != nil {
		return nil, err
	}
	if s.workloads, err = workloads(ctx, ns); err != nil {
		return nil, err
	}
	return s, nil
}

// converged says why cr is not at its spec yet, or nil: the release's last revision deployed
// and none pending, the helm-operator's conditions saying so, and the workload at the spec's
// replicas, owned by the release.
func (s *state) converged(cr *unstructured.Unstructured) error {
	k, _ := kindOf(cr.GroupVersionKind())
	id := cr.GetKind() + " " + cr.GetNamespace() + "/" + cr.GetName()
	if cr.GetDeletionTimestamp() != nil {
		return fmt.Errorf("%s is being deleted", id)
	}
	for typ, want := range map[string]string{"Deployed": "True", "ReleaseFailed": "False", "Irreconcilable": "False"} {
		if got, _, msg := framework.Condition(cr, typ); got != want {
			return fmt.Errorf("%s: %s=%q (%s), want %s", id, typ, got, msg, want)
		}
	}
	revs := s.releases[cr.GetName()]
	if len(revs) == 0 {
		return fmt.Errorf("%s: no release", id)
	}
	deployed := 0
	for _, r := range revs {
		if r.status == "deployed" {
			deployed++
		}
		if release.Status(r.status).IsPending() || r.status == "uninstalling" {
			return fmt.Errorf("%s: revision %d is %s", id, r.version, r.status)
		}
	}
	if last := revs[len(revs)-1]; last.status != "deployed" || deployed != 1 {
		return fmt.Errorf("%s: last revision %d is %s, %d deployed; want the last one and only it deployed", id, last.version, last.status, deployed)
	}
	wkind, wname := k.workload(cr)
	w, ok := s.workloads[wkind+"/"+wname]
	if !ok {
		return fmt.Errorf("%s: no %s %s", id, wkind, wname)
	}
	if w.release != cr.GetName() || w.replicas != k.replicas(cr) {
		return fmt.Errorf("%s: %s %s of release %q has %d replicas, want release %q and %d", id, wkind, wname, w.release, w.replicas, cr.GetName(), k.replicas(cr))
	}
	return nil
}

// notConverged lists why the CRs of the snapshot are not all converged.
func (s *state) notConverged() []string {
	var out []string
	for _, cr := range s.crs {
		if err := s.converged(cr); err != nil {
			out = append(out, err.Error())
		}
	}
	return out
}

// waitConverged waits until every CR of the kinds in ns is at its spec, and returns the
// snapshot that says so.
func waitConverged(t testing.TB, ns string, kinds ...kind) *state {
	t.Helper()
	var s *state
	framework.Eventually(t, convergeTimeout(), func(ctx context.Context) error {
		var err error
		if s, err = snapshot(ctx, ns, kinds...); err != nil {
			return err
		}
		if bad := s.notConverged(); len(bad) > 0 {
			return fmt.Errorf("%d of %d CRs in %s not converged, e.g. %v", len(bad), len(s.crs), ns, bad[:min(3, len(bad))])
		}
		return nil
	})
	return s
}

// events lists the Events of namespace ns about the object named name with reason reason.
func events(ctx context.Context, ns, name, reason string) ([]corev1.Event, error) {
	var list corev1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}
