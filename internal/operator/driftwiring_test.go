package operator

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	libhandler "github.com/operator-framework/operator-lib/handler"
	"helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"transwarp.io/tos/warpdrive-operator/internal/operator/drift"
	"transwarp.io/tos/warpdrive-operator/internal/operator/informers"
	"transwarp.io/tos/warpdrive-operator/internal/operator/releases"
	"transwarp.io/tos/warpdrive-operator/internal/testutil/actiontest"
)

// The tests of the drift filter (internal/operator/drift) at work with what this package gives
// it: the deployed manifests from the signed release records (releases.Manifests), and the
// kind's budget of reconciles tenants may force (informers.PerCRInterval). The filter's own
// tests are in its package; actiontest.MemcachedManifest below is a copy of the one of its tests that
// these use.

func liveDeployment(replicas int64, owner string) *unstructured.Unstructured {
	d := &unstructured.Unstructured{}
	d.SetGroupVersionKind(actiontest.DeploymentGVK)
	d.SetNamespace("ns")
	d.SetName("m")
	_ = unstructured.SetNestedField(d.Object, replicas, "spec", "replicas")
	if owner != "" {
		_ = unstructured.SetNestedSlice(d.Object, []any{map[string]any{
			"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": owner, "uid": "u", "controller": true,
		}}, "metadata", "ownerReferences")
	}
	return d
}

func readerWith(objs ...client.Object) client.Reader {
	return fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithObjects(objs...).Build()
}

type countingHandler struct{ updates, deleted atomic.Int32 }

func (h *countingHandler) OnAdd(any, bool)   {}
func (h *countingHandler) OnUpdate(_, _ any) { h.updates.Add(1) }
func (h *countingHandler) OnDelete(any)      { h.deleted.Add(1) }

type recordingHandler struct {
	countingHandler
	onUpdate func(o, n any)
}

func (h *recordingHandler) OnUpdate(o, n any) {
	h.onUpdate(o, n)
	h.updates.Add(1)
}

// Without the manifest in the status, the drift filter reads the release record of the
// revision the status names, once per revision; a record it cannot read (forged, gone, the key
// not loaded) or a status without a revision means "cannot tell", and the event passes.
func TestDriftedFromReleaseRecords(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	withRevision := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "revision": int64(2)}})
	var reads int
	m := releases.NewManifests(func(_ context.Context, cr *unstructured.Unstructured, revision int) (*release.Release, error) {
		reads++
		if cr.GetName() != "m" || revision != 2 {
			return nil, fmt.Errorf("no record of %s revision %d", cr.GetName(), revision)
		}
		return &release.Release{Name: "m", Version: 2, Manifest: actiontest.MemcachedManifest}, nil
	}, nil, nil)
	for _, tc := range []struct {
		name    string
		objects []client.Object
		want    bool
	}{
		{"as revision 2 says", []client.Object{withRevision, liveDeployment(3, "m")}, false},
		{"scaled by hand", []client.Object{withRevision, liveDeployment(5, "m")}, true},
		{"as revision 2 says, again", []client.Object{withRevision, liveDeployment(3, "m")}, false},
	} {
		inf := drift.Filter{Reader: readerWith(tc.objects...), Manifests: m, Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		if got := inf.Drifted(context.Background(), key); got != tc.want {
			t.Errorf("%s: drifted = %v, want %v", tc.name, got, tc.want)
		}
	}
	if reads != 1 {
		t.Errorf("revision 2 read %d times, want once", reads)
	}

	for name, cr := range map[string]*unstructured.Unstructured{
		"no readable record": actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "revision": int64(3)}}),
		"no revision":        actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m"}}),
	} {
		inf := drift.Filter{Reader: readerWith(cr, liveDeployment(3, "m")), Manifests: m, Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		if !inf.Drifted(context.Background(), key) {
			t.Errorf("%s: drifted = false, want true (cannot tell)", name)
		}
	}
}

// twoRevisions reads the records of release ns/m, whose revision 2 scaled its Deployment from
// 3 replicas to 5.
func twoRevisions(_ context.Context, _ *unstructured.Unstructured, revision int) (*release.Release, error) {
	scaled := strings.Replace(actiontest.MemcachedManifest, "replicas: 3", "replicas: 5", 1)
	return map[int]*release.Release{1: {Name: "m", Namespace: "ns", Version: 1, Manifest: actiontest.MemcachedManifest},
		2: {Name: "m", Namespace: "ns", Version: 2, Manifest: scaled}}[revision], nil
}

// A reconcile writes the CR's status after the upgrade it records: until then the release's
// objects are compared with the revision Helm handed the reconciler, when it is newer than the
// status's, so that the upgrade's own changes are not drift.
func TestDriftedAgainstTheRevisionHandedOut(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "m"}
	atRevision := func(r int64) *unstructured.Unstructured {
		return actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "revision": r}})
	}
	for _, tc := range []struct {
		name      string
		status    int64 // the revision the CR's status names
		handedOut int   // the revision last handed to the reconciler; 0: none
		replicas  int64 // live
		want      bool
	}{
		{"status not yet written: as revision 2 says", 1, 2, 5, false},
		{"status not yet written: scaled back by hand", 1, 2, 3, true},
		{"nothing handed out since the start", 1, 0, 5, true},
		{"status written", 2, 2, 5, false},
		{"an older revision handed out (a Get after a restart)", 2, 1, 5, false},
	} {
		versions := releases.NewVersions()
		if tc.handedOut > 0 {
			rel, _ := twoRevisions(context.Background(), nil, tc.handedOut)
			versions.Record(rel)
		}
		inf := drift.Filter{Reader: readerWith(atRevision(tc.status), liveDeployment(tc.replicas, "m")),
			Manifests: releases.NewManifests(twoRevisions, versions, nil), Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		if got := inf.Drifted(context.Background(), key); got != tc.want {
			t.Errorf("%s: drifted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// While a Helm operation holds the release, a drift check waits for it to end, and then
// compares the object with the revision it handed out: the upgrade's own change is no drift.
// A hand edit made meanwhile is passed on once the release is free; and a drift of a release
// held past maxReleaseWaits is passed on while it is still held.
func TestDriftCheckWaitsForTheRelease(t *testing.T) {
	defer func(d time.Duration) { drift.SettleDelay = d }(drift.SettleDelay)
	drift.SettleDelay = 5 * time.Millisecond
	cr := actiontest.Memcached(map[string]any{"deployedRelease": map[string]any{"name": "m", "revision": int64(1)}})
	for _, tc := range []struct {
		name     string
		replicas int64 // live
		freed    bool  // the upgrade to revision 2 ends after 30 checks' delays; else it never does
		want     int32
	}{
		{"the upgrade to revision 2 scaled it", 5, true, 0},
		{"scaled by hand during the upgrade", 7, true, 1},
		{"held past the waits: checked against revision 1", 5, false, 1},
	} {
		versions, locks := releases.NewVersions(), releases.NewKeyedMutex()
		unlock := locks.Lock(releases.Key("ns", "m"))
		inf := drift.Filter{Reader: readerWith(cr), Live: readerWith(liveDeployment(tc.replicas, "m")),
			Manifests: releases.NewManifests(twoRevisions, versions, locks), Owner: actiontest.MemcachedGVK, GVK: actiontest.DeploymentGVK}
		h := &countingHandler{}
		inf.Wrap(h).OnUpdate(liveDeployment(3, "m"), liveDeployment(5, "m"))
		if tc.freed {
			time.Sleep(30 * drift.SettleDelay)
			if got := h.updates.Load(); got != 0 {
				t.Errorf("%s: %d updates passed on while the release was held, want none", tc.name, got)
			}
			rel, _ := twoRevisions(context.Background(), nil, 2)
			versions.Record(rel)
			unlock()
		}
		// A drift passes on within a check or two of the release's end, or of the last wait;
		// no drift is given the time of twenty checks more.
		for deadline := time.Now().Add(5 * time.Second); h.updates.Load() < tc.want && time.Now().Before(deadline); {
			time.Sleep(drift.SettleDelay)
		}
		time.Sleep(20 * drift.SettleDelay)
		if got := h.updates.Load(); got != tc.want {
			t.Errorf("%s: %d updates passed on, want %d", tc.name, got, tc.want)
		}
		if !tc.freed {
			unlock()
		}
	}
}

// A tenant who rewrites the operator-sdk annotations of an object of their own, naming a CR
// of their namespace, gets no more reconciles of it than the forced-reconcile budget: the
// first update passes at once, those within the interval wait and pass as one, the latest.
func TestAnnotationTiesBudgeted(t *testing.T) {
	defer func(d, f time.Duration) { drift.SettleDelay, informers.ForcedInterval = d, f }(drift.SettleDelay, informers.ForcedInterval)
	drift.SettleDelay, informers.ForcedInterval = 5*time.Millisecond, 400*time.Millisecond
	configMapGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	tied := func(rv int) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: strconv.Itoa(rv),
			Annotations: map[string]string{libhandler.NamespacedNameAnnotation: "ns/m",
				libhandler.TypeAnnotation: actiontest.MemcachedGVK.GroupKind().String(), "n": strconv.Itoa(rv)}}}
	}
	var passed []string
	var mu sync.Mutex
	h := &recordingHandler{onUpdate: func(_, n any) {
		mu.Lock()
		defer mu.Unlock()
		passed = append(passed, n.(*unstructured.Unstructured).GetResourceVersion())
	}}
	inf := drift.Filter{Reader: readerWith(actiontest.Memcached(nil)), Live: readerWith(), Owner: actiontest.MemcachedGVK, GVK: configMapGVK,
		Budget: &informers.PerCRInterval{}}
	wrapped := inf.Wrap(h)
	wrapped.OnUpdate(tied(0), tied(1))
	time.Sleep(10 * drift.SettleDelay)
	for rv := 2; rv <= 20; rv++ { // within the interval, and each past the settle delay
		wrapped.OnUpdate(tied(rv-1), tied(rv))
		time.Sleep(2 * drift.SettleDelay)
	}
	time.Sleep(2 * informers.ForcedInterval)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(passed, []string{"1", "20"}) {
		t.Errorf("20 rewrites of the annotations within %v passed on as versions %v, want [1 20]", informers.ForcedInterval, passed)
	}
}
