package drift

import (
	"context"
	"reflect"
	"strings"
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

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
	rules := func(s string) Setting {
		set, err := ParseSetting(s)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	for _, tc := range []struct {
		name    string
		policy  Policy
		removed []string // JSON pointers gone from the Deployment
	}{
		{"nothing ignored", Policy{Setting: rules("repair")}, nil},
		{"a rule", Policy{Setting: rules("repair;ignore=Deployment:/spec/replicas")}, []string{"/spec/replicas"}},
		{"a rule for another kind", Policy{Setting: rules("repair;ignore=StatefulSet:/spec/replicas")}, nil},
		{"through a list, and an escaped key", Policy{Setting: rules(
			"repair;ignore=Deployment:/spec/template/spec/containers/0/image,*:/metadata/annotations/example.com~1owner")},
			[]string{"/metadata/annotations/example.com~1owner", "/spec/template/spec/containers/0/image"}},
		{"a path that leads nowhere", Policy{Setting: rules("repair;ignore=Deployment:/spec/template/spec/containers/7/image")}, nil},
		{"an HPA scales it", Policy{Setting: rules("repair"), hpas: hpaReader(t, "m")}, []string{"/spec/replicas"}},
		{"an HPA scales another", Policy{Setting: rules("repair"), hpas: hpaReader(t, "other")}, nil},
	} {
		got, err := tc.policy.StrippedManifest(context.Background(), driftManifest, "ns")
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

// The drift filter passes on no change confined to what the kind's policy ignores.
func TestDriftedIgnores(t *testing.T) {
	cr := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "manifest": actiontest.MemcachedManifest}})
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	rule := Setting{Mode: Repair, Ignore: []Ignore{{"Deployment", "/spec/replicas"}}}
	for _, tc := range []struct {
		name   string
		policy Policy
		live   client.Reader
		want   bool
	}{
		{"scaled, nothing ignored", Policy{}, readerWith(liveDeployment(5, "m")), true},
		{"scaled, a rule", Policy{Setting: rule}, readerWith(liveDeployment(5, "m")), false},
		{"scaled, an HPA", Policy{hpas: hpaReader(t, "m")}, hpaReader(t, "m", liveDeployment(5, "m")), false},
		{"scaled, an HPA of another", Policy{hpas: hpaReader(t, "x")}, readerWith(liveDeployment(5, "m")), true},
		{"scaled, a rule for another kind", Policy{Setting: Setting{Mode: Repair,
			Ignore: []Ignore{{"StatefulSet", "/spec/replicas"}}}}, readerWith(liveDeployment(5, "m")), true},
	} {
		inf := Filter{Manifests: statusManifests{}, Reader: readerWith(cr), Live: tc.live, Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK, Policy: tc.policy}
		if got := inf.Drifted(context.Background(), key); got != tc.want {
			t.Errorf("%s: drifted %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The repair's manifest carries Helm's ownership annotations on each object, as Helm sets
// them when it creates one, so that an object the repair re-creates is the release's own for
// its next upgrade; objects that have them already, and documents that are no object, are
// left as they were.
func TestOwnedManifest(t *testing.T) {
	manifest := "---\n# Source: c/templates/pdb.yaml\napiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: app\n  annotations:\n    team: a\nspec:\n  maxUnavailable: 1\n" +
		"---\n# Source: c/templates/empty.yaml\n" +
		"---\napiVersion: v1\nkind: Service\nmetadata:\n  name: app\n  annotations:\n    meta.helm.sh/release-name: rel\n    meta.helm.sh/release-namespace: ns\n"
	got, err := OwnedManifest(manifest, "rel", "ns")
	if err != nil {
		t.Fatal(err)
	}
	docs := splitManifest(got)
	if len(docs) != 3 {
		t.Fatalf("%d documents, want 3:\n%s", len(docs), got)
	}
	pdb := docs[0].obj.GetAnnotations()
	if pdb["meta.helm.sh/release-name"] != "rel" || pdb["meta.helm.sh/release-namespace"] != "ns" || pdb["team"] != "a" {
		t.Errorf("PodDisruptionBudget annotations %v, want Helm's ownership beside team", pdb)
	}
	if !strings.HasPrefix(docs[0].text, "---\n# Source: c/templates/pdb.yaml\n") {
		t.Errorf("the rewritten document lost its header:\n%s", docs[0].text)
	}
	if !strings.Contains(got, "maxUnavailable") {
		t.Errorf("the rewritten document lost its spec:\n%s", got)
	}
	if docs[1].obj != nil || !strings.HasSuffix(got, "meta.helm.sh/release-namespace: ns\n") {
		t.Errorf("the documents that need nothing changed:\n%s", got)
	}
	if again, _ := OwnedManifest(got, "rel", "ns"); again != got {
		t.Errorf("OwnedManifest of an owned manifest changed it:\n%s", again)
	}
}
