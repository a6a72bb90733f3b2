package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/releasesign"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestRestoreWithoutRecordsAdopts: what a restore into a fresh cluster where the workloads
// run leaves the operator, when the backup held the CRs and their namespaces but neither
// the release records nor the signing key (docs/deploying.md, "Backups"). The CRs come back
// with new UIDs and no status; their release Secrets, the key's Secret and the state beside
// it are gone. The manager creates a new key and installs each release over the objects
// that are there:
//
//   - Objects restored without ownerReferences (Velero drops them; so does the deletion of
//     the old CRs here, with propagationPolicy Orphan) are adopted: every CR is Ready at its
//     generation, no Deployment, ReplicaSet or pod is replaced (same UIDs), the objects are
//     controlled by the new CRs, the new records are signed by the new key, and an edit
//     upgrades.
//   - Objects restored with their ownerReferences, which name the old CR's UID, are deleted
//     by the garbage collector before any operator can act (the owner of that UID is gone);
//     the manager installs them again: that CR is Ready too, its pods new.
func TestRestoreWithoutRecordsAdopts(t *testing.T) {
	if stock {
		t.Skip("the signing key is this operator's")
	}
	ctx := context.Background()
	op := newOperator(t)
	ns := env.Namespace(t)
	keyRef, startManager := ownSigningKey(t, op)
	m := startManager()
	sidecar := op.sidecar()

	const n = 3
	name := func(i int) string { return fmt.Sprintf("cache-%d", i) }
	size := func(i int) int64 { return int64(1 + i%2) }
	keptRefs := name(n - 1) // restored with its ownerReferences
	for i := range n {
		env.Create(t, memcached.newCR(ns, name(i), size(i)))
	}
	waitKindReady(t, ns, memcached)
	oldKey := &corev1.Secret{}
	if err := env.Client.Get(ctx, keyRef, oldKey); err != nil {
		t.Fatal(err)
	}
	oldKeys, err := releasesign.ParseKeys(oldKey.Data)
	if err != nil {
		t.Fatal(err)
	}
	before, err := workloadUIDs(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Memcacheds Ready, records signed by key %s", n, oldKeys.Current.ID())

	// The restore: the operator is not running; the CRs are gone without an uninstall and
	// come back as the backup has them (spec, no status, new UIDs); the records and the key
	// are not in the backup.
	m.Stop()
	sidecar.Stop()
	oldUIDs := deleteCRsLeavingObjects(t, ns, memcached)
	deleteReleaseRecords(t, ns)
	for _, obj := range []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace, Name: keyRef.Name}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: keyRef.Namespace, Name: keyRef.Name + "-take-over"}},
	} {
		if err := env.Client.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	restoreOwnerReferences(t, ns, memcached, keptRefs, oldUIDs[keptRefs])
	for i := range n {
		env.Create(t, memcached.newCR(ns, name(i), size(i)))
	}
	t.Logf("restored: %d CRs with new UIDs, no release record, no key; %s's objects with their ownerReferences deleted by the garbage collector", n, keptRefs)

	startManager()
	op.sidecar()
	s := waitKindReady(t, ns, memcached)
	newKey := &corev1.Secret{}
	if err := env.Client.Get(ctx, keyRef, newKey); err != nil {
		t.Fatal(err)
	}
	newKeys, err := releasesign.ParseKeys(newKey.Data)
	if err != nil {
		t.Fatal(err)
	}
	if newKeys.Current.ID() == oldKeys.Current.ID() {
		t.Fatal("the manager found the old key again")
	}
	for _, cr := range s.crs {
		if cr.GetUID() == oldUIDs[cr.GetName()] {
			t.Fatalf("%s kept its UID: the CR was not made again", cr.GetName())
		}
		revs := s.releases[cr.GetName()]
		if len(revs) != 1 {
			t.Errorf("release %s has %d records, want the 1 of its install", cr.GetName(), len(revs))
		}
		for _, r := range revs {
			if err := newKeys.Verify(ns, &r.secret); err != nil {
				t.Errorf("record %s: %v", r.secret.Name, err)
			}
		}
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cr.GetName()}, d); err != nil {
			t.Fatal(err)
		}
		if owner := controllerUID(d); owner != string(cr.GetUID()) {
			t.Errorf("Deployment %s is controlled by %q, want the new %s (%s)", d.Name, owner, cr.GetName(), cr.GetUID())
		}
	}
	after, err := workloadUIDs(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if name(i) == keptRefs {
			after.expectReplaced(t, before, name(i))
		} else {
			after.expectSame(t, before, name(i))
		}
	}
	t.Logf("adopted: the same Deployments, ReplicaSets and pods, but %s's, made again; records signed by the new key %s", keptRefs, newKeys.Current.ID())

	// An edit upgrades the adopted release.
	edited := name(0)
	if err := memcached.setReplicas(ctx, memcached.newCR(ns, edited, 0), 2); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		s, err := snapshot(ctx, ns, memcached)
		if err != nil {
			return err
		}
		revs := s.releases[edited]
		if len(revs) == 0 {
			return fmt.Errorf("release %s has no record", edited)
		}
		if last := revs[len(revs)-1]; last.version != 2 || last.status != "deployed" {
			return fmt.Errorf("release %s: last revision %d %s, want 2 deployed", edited, last.version, last.status)
		}
		return nil
	})
	waitKindReady(t, ns, memcached)
}

// waitKindReady waits until every CR of kind k in ns is at its spec (release, workload, the
// sidecar's status) and Ready.
func waitKindReady(t testing.TB, ns string, k kind) *state {
	t.Helper()
	s := waitAllConverged(t, ns, k)
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		crs, err := k.list(ctx, ns)
		if err != nil {
			return err
		}
		for i := range crs {
			if st, _, msg := framework.Condition(&crs[i], "Ready"); st != "True" {
				return fmt.Errorf("%s: Ready=%q: %s", crs[i].GetName(), st, msg)
			}
		}
		return nil
	})
	return s
}

// deleteCRsLeavingObjects deletes every CR of kind k in ns as a restore into a fresh cluster
// finds them, gone without an uninstall: the operator's finalizer is removed by hand, and
// the CR deleted with propagationPolicy Orphan, so that the garbage collector leaves what
// it owned (it drops their ownerReferences to it). It returns the old CRs' UIDs by name.
func deleteCRsLeavingObjects(t testing.TB, ns string, k kind) map[string]types.UID {
	t.Helper()
	ctx := context.Background()
	crs, err := k.list(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	noFinalizers, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": nil}})
	for i := range crs {
		cr := &crs[i]
		uids[cr.GetName()] = cr.GetUID()
		if err := env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, noFinalizers)); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, cr, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		left, err := k.list(ctx, ns)
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("%d %ss still there, e.g. %s (finalizers %v)", len(left), k.gvk.Kind, left[0].GetName(), left[0].GetFinalizers())
		}
		return nil
	})
	return uids
}

// deleteReleaseRecords deletes every Helm release Secret of ns.
func deleteReleaseRecords(t testing.TB, ns string) {
	t.Helper()
	err := env.Client.DeleteAllOf(context.Background(), &corev1.Secret{}, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"})
	if err != nil {
		t.Fatal(err)
	}
}

// restoreOwnerReferences gives the objects of release name in ns the ownerReferences a
// restore that keeps them would give: to the CR of kind k as it was, of UID old. It waits until
// the garbage collector has deleted them, and the ReplicaSets and pods of the Deployment
// with them: the owner of that UID is gone.
func restoreOwnerReferences(t testing.TB, ns string, k kind, name string, old types.UID) {
	t.Helper()
	ctx := context.Background()
	refs, _ := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []metav1.OwnerReference{{
		APIVersion: k.gvk.GroupVersion().String(), Kind: k.gvk.Kind, Name: name, UID: old,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}}})
	for _, l := range framework.ChartKinds() {
		items, err := env.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": name})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range items {
			if err := env.Client.Patch(ctx, o, client.RawPatch(types.MergePatchType, refs)); err != nil {
				t.Fatal(err)
			}
		}
	}
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		all, err := env.ReleaseObjects(ctx, name)
		if err != nil {
			return err
		}
		var objs []string
		for _, o := range all {
			if strings.Contains(o, " "+ns+"/") {
				objs = append(objs, o)
			}
		}
		ids, err := workloadUIDs(ctx, ns)
		if err != nil {
			return err
		}
		if len(objs) > 0 || len(ids[name]) > 0 {
			return fmt.Errorf("objects of %s owned by a CR UID that no longer exists still there: %v %v", name, objs, sortedIDs(ids[name]))
		}
		return nil
	})
}

// workloadIDs are the UIDs of the Deployments, ReplicaSets and pods of a namespace, by release
// (the label app.kubernetes.io/instance) and "Kind name".
type workloadIDs map[string]map[string]types.UID

func workloadUIDs(ctx context.Context, ns string) (workloadIDs, error) {
	ids := workloadIDs{}
	for kind, l := range map[string]client.ObjectList{
		"Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{}, "Pod": &corev1.PodList{},
	} {
		items, err := env.List(ctx, l, client.InNamespace(ns))
		if err != nil {
			return nil, err
		}
		for _, o := range items {
			rel := o.GetLabels()["app.kubernetes.io/instance"]
			if ids[rel] == nil {
				ids[rel] = map[string]types.UID{}
			}
			ids[rel][kind+" "+o.GetName()] = o.GetUID()
		}
	}
	return ids, nil
}

// expectSame fails the test when an object of release was replaced or gone, or a new one
// came, since before.
func (ids workloadIDs) expectSame(t testing.TB, before workloadIDs, release string) {
	t.Helper()
	if len(before[release]) == 0 {
		t.Fatalf("release %s had no workload", release)
	}
	if !maps.Equal(ids[release], before[release]) {
		t.Errorf("release %s: %v, want the same objects as before the restore: %v", release, sortedIDs(ids[release]), sortedIDs(before[release]))
	}
}

// expectReplaced fails the test when an object of release is one of before.
func (ids workloadIDs) expectReplaced(t testing.TB, before workloadIDs, release string) {
	t.Helper()
	old := map[types.UID]bool{}
	for _, uid := range before[release] {
		old[uid] = true
	}
	if len(ids[release]) == 0 {
		t.Errorf("release %s has no workload", release)
	}
	for obj, uid := range ids[release] {
		if old[uid] {
			t.Errorf("release %s: %s is still the one before the restore (%s)", release, obj, uid)
		}
	}
}

func sortedIDs(m map[string]types.UID) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+string(m[k]))
	}
	return out
}
