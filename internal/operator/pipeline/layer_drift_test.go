package pipeline

import (
	"context"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/ownership"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// driftManifest, hpaReader and objectsOf are those of the drift package's tests.

const driftManifest = `---
# Source: memcached/templates/service.yaml
apiVersion: v1
kind: Service
metadata: {name: m}
spec: {ports: [{port: 11211}]}
---
# Source: memcached/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: m
  annotations: {example.com/owner: chart}
spec:
  replicas: 3
  progressDeadlineSeconds: 9007199254740993
  template:
    spec:
      containers: [{name: memcached, image: "memcached:1.6"}]
`

// hpaReader holds an HPA in namespace ns that scales the Deployment named target.
func hpaReader(t *testing.T, target string, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := autoscalingv2.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "h"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MaxReplicas: 5,
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target}}}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, hpa)...).Build()
}

// objectsOf are the objects of a manifest, by kind.
func objectsOf(t *testing.T, manifest string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, obj := range releases.ParseManifest(manifest) {
		out[obj.GetKind()] = obj.Object
	}
	return out
}

// reconcileCatcher is an engine that keeps the release it was asked to repair.
type reconcileCatcher struct {
	*actiontest.FakeActions
	repaired *release.Release
}

func (c *reconcileCatcher) Reconcile(rel *release.Release) error {
	c.repaired = rel
	return c.FakeActions.Reconcile(rel)
}

// liveObjects is the release of driftManifest in the cluster, with the Deployment scaled
// to replicas.
func liveObjects(replicas int64) []client.Object {
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "m", "namespace": "ns"},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(11211), "protocol": "TCP"}}, "clusterIP": "10.0.0.1"}}}
	d := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "m", "namespace": "ns", "annotations": map[string]any{"example.com/owner": "chart"}},
		"spec": map[string]any{"replicas": replicas, "progressDeadlineSeconds": int64(9007199254740993),
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "memcached", "image": "memcached:1.6"}}}}}}}
	return []client.Object{svc, d}
}

func TestDriftLayer(t *testing.T) {
	rel := &release.Release{Name: "m", Namespace: "ns", Manifest: driftManifest}
	cr := func() *unstructured.Unstructured {
		u := actiontest.Memcached(nil)
		u.SetNamespace("ns")
		u.SetName("m")
		return u
	}
	run := func(policy drift.Policy, live client.Reader, obj *unstructured.Unstructured) (*reconcileCatcher, []string, *statusWrites, error) {
		engine := &reconcileCatcher{FakeActions: &actiontest.FakeActions{}}
		rec := record.NewFakeRecorder(10)
		status := &statusWrites{}
		c, err := withDrift(actiontest.EngineOf(engine), policy, live, rec, status).ActionClientFor(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Reconcile(rel)
		return engine, actiontest.Events(rec), status, err
	}

	t.Run("repair, an HPA scales the Deployment", func(t *testing.T) {
		engine, evs, _, err := run(drift.NewPolicy(drift.Setting{Mode: drift.Repair}, hpaReader(t, "m")), nil, cr())
		if err != nil || engine.repaired == nil {
			t.Fatalf("Reconcile: %v, repaired %v", err, engine.repaired)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(objectsOf(t, engine.repaired.Manifest)["Deployment"], "spec", "replicas"); found {
			t.Errorf("the repair was given the Deployment's replicas:\n%s", engine.repaired.Manifest)
		}
		if rel.Manifest != driftManifest || len(evs) != 0 {
			t.Errorf("the release was changed, or events %q", evs)
		}
	})
	t.Run("repair, nothing ignored: every object owned by the release", func(t *testing.T) {
		engine, _, _, err := run(drift.NewPolicy(drift.Setting{Mode: drift.Repair}, nil), nil, cr())
		if err != nil || engine.repaired == nil {
			t.Fatalf("Reconcile: %v, repaired %v", err, engine.repaired)
		}
		objects := objectsOf(t, engine.repaired.Manifest)
		for _, kind := range []string{"Service", "Deployment"} {
			a, _, _ := unstructured.NestedStringMap(objects[kind], "metadata", "annotations")
			if a[ownership.HelmReleaseNameAnnotation] != "m" || a[ownership.HelmReleaseNamespaceAnnotation] != "ns" {
				t.Errorf("the repair's %s has annotations %v, want Helm's ownership of release ns/m", kind, a)
			}
		}
		if rel.Manifest != driftManifest {
			t.Errorf("the release was changed")
		}
	})
	t.Run("off", func(t *testing.T) {
		engine, evs, status, err := run(drift.NewPolicy(drift.Setting{Mode: drift.Off}, nil), nil, cr())
		if err != nil || engine.repaired != nil || len(evs) != 0 || status.updates != 0 {
			t.Errorf("Reconcile: %v, repaired %v, events %q, %d status writes; want nothing done", err, engine.repaired, evs, status.updates)
		}
	})
	t.Run("report", func(t *testing.T) {
		report := drift.NewPolicy(drift.Setting{Mode: drift.Report}, nil)
		obj := cr()
		engine, evs, status, err := run(report, actiontest.ReaderWith(liveObjects(5)...), obj)
		if err != nil || engine.repaired != nil {
			t.Fatalf("Reconcile: %v, repaired %v; want no repair", err, engine.repaired)
		}
		if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning DriftDetected ") || !strings.HasSuffix(evs[0], ": Deployment m: /spec/replicas") {
			t.Errorf("events %q, want one DriftDetected naming Deployment m's /spec/replicas", evs)
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		if i := conditionIndex(conds, statuscontract.Drifted); i < 0 || conds[i].(map[string]any)["status"] != "True" || status.updates != 1 {
			t.Errorf("conditions %v, %d status writes; want Drifted True, written once", conds, status.updates)
		}

		// The same drift again: the Event (the recorder counts it), no new status write.
		_, _, status, _ = run(report, actiontest.ReaderWith(liveObjects(5)...), obj)
		if status.updates != 0 {
			t.Errorf("the same drift wrote the status again")
		}
		// Ignored (an HPA scales it): no drift, the condition turns False.
		withHPA := hpaReader(t, "m", liveObjects(5)...)
		_, evs, status, _ = run(drift.NewPolicy(report.Setting, withHPA), withHPA, obj)
		conds, _, _ = unstructured.NestedSlice(obj.Object, "status", "conditions")
		if i := conditionIndex(conds, statuscontract.Drifted); len(evs) != 0 || i < 0 || conds[i].(map[string]any)["status"] != "False" || status.updates != 1 {
			t.Errorf("events %q, conditions %v, %d writes; want no Event and Drifted False", evs, conds, status.updates)
		}
	})
	t.Run("report, a missing object", func(t *testing.T) {
		_, evs, _, err := run(drift.NewPolicy(drift.Setting{Mode: drift.Report}, nil), actiontest.ReaderWith(liveObjects(3)[1]), cr())
		if err != nil || len(evs) != 1 || !strings.HasSuffix(evs[0], ": Service m: missing") {
			t.Errorf("Reconcile: %v, events %q; want the Service reported missing", err, evs)
		}
	})
	t.Run("report, no drift, never drifted", func(t *testing.T) {
		_, evs, status, err := run(drift.NewPolicy(drift.Setting{Mode: drift.Report}, nil), actiontest.ReaderWith(liveObjects(3)...), cr())
		if err != nil || len(evs) != 0 || status.updates != 0 {
			t.Errorf("Reconcile: %v, events %q, %d status writes; want nothing", err, evs, status.updates)
		}
	})
}

var _ helmclient.ActionInterface = &reconcileCatcher{}
