package operator

import (
	"context"
	"reflect"
	"strings"
	"testing"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/release"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestParseDriftSetting(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DriftSetting
	}{
		{"repair", DriftSetting{Mode: DriftRepair}},
		{"report", DriftSetting{Mode: DriftReport}},
		{"off", DriftSetting{Mode: DriftOff}},
		{"repair;ignore=Deployment:/spec/replicas", DriftSetting{Mode: DriftRepair,
			Ignore: []DriftIgnore{{"Deployment", "/spec/replicas"}}}},
		{"report;ignore=Deployment:/spec/replicas,*:/metadata/annotations/a.b~1c", DriftSetting{Mode: DriftReport,
			Ignore: []DriftIgnore{{"Deployment", "/spec/replicas"}, {"*", "/metadata/annotations/a.b~1c"}}}},
	} {
		got, err := ParseDriftSetting(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseDriftSetting(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if again, err := ParseDriftSetting(got.String()); err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%q: String() %q reads back as %+v, %v", tc.in, got.String(), again, err)
		}
	}
	for _, bad := range []string{"", "fix", "repair;ignore=Deployment", "repair;ignore=:/spec", "repair;ignore=Deployment:spec/replicas",
		"repair;ignore=Deployment:/", "repair;ignore=Deployment:/metadata/name", "repair;ignore=Deployment:/kind",
		"repair;skip=Deployment:/spec", "off;ignore=Deployment:/spec/replicas"} {
		if got, err := ParseDriftSetting(bad); err == nil {
			t.Errorf("ParseDriftSetting(%q) = %+v, want an error", bad, got)
		}
	}

	ds := DriftSettings{}
	for _, f := range []string{"Memcached=report", "*=repair;ignore=ConfigMap:/data/x"} {
		if err := ds.Set(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := ds.Set("report"); err == nil {
		t.Error("Set(report) without a kind: no error")
	}
	if got := ds.For("Memcached").Mode; got != DriftReport {
		t.Errorf("Memcached: %s, want report", got)
	}
	if got := ds.For("Guestbook"); got.Mode != DriftRepair || len(got.Ignore) != 1 {
		t.Errorf("Guestbook: %+v, want *'s", got)
	}
	if got := (DriftSettings{}).For("Guestbook"); got.Mode != DriftRepair || got.Ignore != nil {
		t.Errorf("no flag: %+v, want repair, nothing ignored", got)
	}
}

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
	for _, d := range splitManifest(manifest) {
		if d.obj != nil {
			out[d.obj.GetKind()] = d.obj.Object
		}
	}
	return out
}

func TestStrippedManifest(t *testing.T) {
	rules := func(s string) DriftSetting {
		set, err := ParseDriftSetting(s)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	for _, tc := range []struct {
		name    string
		policy  driftPolicy
		removed []string // JSON pointers gone from the Deployment
	}{
		{"nothing ignored", driftPolicy{DriftSetting: rules("repair")}, nil},
		{"a rule", driftPolicy{DriftSetting: rules("repair;ignore=Deployment:/spec/replicas")}, []string{"/spec/replicas"}},
		{"a rule for another kind", driftPolicy{DriftSetting: rules("repair;ignore=StatefulSet:/spec/replicas")}, nil},
		{"through a list, and an escaped key", driftPolicy{DriftSetting: rules(
			"repair;ignore=Deployment:/spec/template/spec/containers/0/image,*:/metadata/annotations/example.com~1owner")},
			[]string{"/metadata/annotations/example.com~1owner", "/spec/template/spec/containers/0/image"}},
		{"a path that leads nowhere", driftPolicy{DriftSetting: rules("repair;ignore=Deployment:/spec/template/spec/containers/7/image")}, nil},
		{"an HPA scales it", driftPolicy{DriftSetting: rules("repair"), hpas: hpaReader(t, "m")}, []string{"/spec/replicas"}},
		{"an HPA scales another", driftPolicy{DriftSetting: rules("repair"), hpas: hpaReader(t, "other")}, nil},
	} {
		got, err := tc.policy.strippedManifest(context.Background(), driftManifest, "ns")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.removed == nil {
			if got != driftManifest {
				t.Errorf("%s: manifest rewritten:\n%s", tc.name, got)
			}
			continue
		}
		objs := objectsOf(t, got)
		if !strings.HasPrefix(got, "---\n# Source: memcached/templates/service.yaml\n") || len(objs) != 2 ||
			!reflect.DeepEqual(objs["Service"], objectsOf(t, driftManifest)["Service"]) {
			t.Errorf("%s: the Service or the document order changed:\n%s", tc.name, got)
		}
		var paths []string
		driftedPaths(objectsOf(t, driftManifest)["Deployment"], objs["Deployment"], "", &paths)
		if !reflect.DeepEqual(paths, tc.removed) {
			t.Errorf("%s: removed %v, want %v", tc.name, paths, tc.removed)
		}
		// Numbers are kept as written, beyond what a float64 holds.
		if !strings.Contains(got, `"progressDeadlineSeconds":9007199254740993`) {
			t.Errorf("%s: a number changed:\n%s", tc.name, got)
		}
	}
}

// reconcileCatcher is an engine that keeps the release it was asked to repair.
type reconcileCatcher struct {
	*fakeActions
	repaired *release.Release
}

func (c *reconcileCatcher) Reconcile(rel *release.Release) error {
	c.repaired = rel
	return c.call("reconcile")
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
		u := memcached(nil)
		u.SetNamespace("ns")
		u.SetName("m")
		return u
	}
	run := func(policy driftPolicy, live client.Reader, obj *unstructured.Unstructured) (*reconcileCatcher, []string, *statusWrites, error) {
		engine := &reconcileCatcher{fakeActions: &fakeActions{}}
		rec := record.NewFakeRecorder(10)
		status := &statusWrites{}
		c, err := withDrift(engineOf(engine), policy, live, rec, status).ActionClientFor(context.Background(), obj)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Reconcile(rel)
		return engine, events(rec), status, err
	}

	t.Run("repair, an HPA scales the Deployment", func(t *testing.T) {
		engine, evs, _, err := run(driftPolicy{DriftSetting: DriftSetting{Mode: DriftRepair}, hpas: hpaReader(t, "m")}, nil, cr())
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
	t.Run("repair, nothing ignored", func(t *testing.T) {
		engine, _, _, err := run(driftPolicy{DriftSetting: DriftSetting{Mode: DriftRepair}}, nil, cr())
		if err != nil || engine.repaired != rel {
			t.Errorf("Reconcile: %v; the engine got %p, want the release itself", err, engine.repaired)
		}
	})
	t.Run("off", func(t *testing.T) {
		engine, evs, status, err := run(driftPolicy{DriftSetting: DriftSetting{Mode: DriftOff}}, nil, cr())
		if err != nil || engine.repaired != nil || len(evs) != 0 || status.updates != 0 {
			t.Errorf("Reconcile: %v, repaired %v, events %q, %d status writes; want nothing done", err, engine.repaired, evs, status.updates)
		}
	})
	t.Run("report", func(t *testing.T) {
		report := driftPolicy{DriftSetting: DriftSetting{Mode: DriftReport}}
		obj := cr()
		engine, evs, status, err := run(report, readerWith(liveObjects(5)...), obj)
		if err != nil || engine.repaired != nil {
			t.Fatalf("Reconcile: %v, repaired %v; want no repair", err, engine.repaired)
		}
		if len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning DriftDetected ") || !strings.HasSuffix(evs[0], ": Deployment m: /spec/replicas") {
			t.Errorf("events %q, want one DriftDetected naming Deployment m's /spec/replicas", evs)
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		if i := conditionIndex(conds, conditionDrifted); i < 0 || conds[i].(map[string]any)["status"] != "True" || status.updates != 1 {
			t.Errorf("conditions %v, %d status writes; want Drifted True, written once", conds, status.updates)
		}

		// The same drift again: the Event (the recorder counts it), no new status write.
		_, _, status, _ = run(report, readerWith(liveObjects(5)...), obj)
		if status.updates != 0 {
			t.Errorf("the same drift wrote the status again")
		}
		// Ignored (an HPA scales it): no drift, the condition turns False.
		withHPA := hpaReader(t, "m", liveObjects(5)...)
		_, evs, status, _ = run(driftPolicy{DriftSetting: report.DriftSetting, hpas: withHPA}, withHPA, obj)
		conds, _, _ = unstructured.NestedSlice(obj.Object, "status", "conditions")
		if i := conditionIndex(conds, conditionDrifted); len(evs) != 0 || i < 0 || conds[i].(map[string]any)["status"] != "False" || status.updates != 1 {
			t.Errorf("events %q, conditions %v, %d writes; want no Event and Drifted False", evs, conds, status.updates)
		}
	})
	t.Run("report, a missing object", func(t *testing.T) {
		_, evs, _, err := run(driftPolicy{DriftSetting: DriftSetting{Mode: DriftReport}}, readerWith(liveObjects(3)[1]), cr())
		if err != nil || len(evs) != 1 || !strings.HasSuffix(evs[0], ": Service m: missing") {
			t.Errorf("Reconcile: %v, events %q; want the Service reported missing", err, evs)
		}
	})
	t.Run("report, no drift, never drifted", func(t *testing.T) {
		_, evs, status, err := run(driftPolicy{DriftSetting: DriftSetting{Mode: DriftReport}}, readerWith(liveObjects(3)...), cr())
		if err != nil || len(evs) != 0 || status.updates != 0 {
			t.Errorf("Reconcile: %v, events %q, %d status writes; want nothing", err, evs, status.updates)
		}
	})
}

// The drift filter passes on no change confined to what the kind's policy ignores.
func TestDriftedIgnores(t *testing.T) {
	cr := memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": manifest}})
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	rule := DriftSetting{Mode: DriftRepair, Ignore: []DriftIgnore{{"Deployment", "/spec/replicas"}}}
	for _, tc := range []struct {
		name   string
		policy driftPolicy
		live   client.Reader
		want   bool
	}{
		{"scaled, nothing ignored", driftPolicy{}, readerWith(liveDeployment(5, "m")), true},
		{"scaled, a rule", driftPolicy{DriftSetting: rule}, readerWith(liveDeployment(5, "m")), false},
		{"scaled, an HPA", driftPolicy{hpas: hpaReader(t, "m")}, hpaReader(t, "m", liveDeployment(5, "m")), false},
		{"scaled, an HPA of another", driftPolicy{hpas: hpaReader(t, "x")}, readerWith(liveDeployment(5, "m")), true},
		{"scaled, a rule for another kind", driftPolicy{DriftSetting: DriftSetting{Mode: DriftRepair,
			Ignore: []DriftIgnore{{"StatefulSet", "/spec/replicas"}}}}, readerWith(liveDeployment(5, "m")), true},
	} {
		inf := driftCheckingInformer{reader: readerWith(cr), live: tc.live, owner: memcachedGVK, gvk: deploymentGVK, policy: tc.policy}
		if got := inf.drifted(context.Background(), key); got != tc.want {
			t.Errorf("%s: drifted %v, want %v", tc.name, got, tc.want)
		}
	}
}

var _ helmclient.ActionInterface = &reconcileCatcher{}
