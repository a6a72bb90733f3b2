package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	const n = 3
	name := func(i int) string { return fmt.Sprintf("cache-%d", i) }
	size := func(i int) int64 { return int64(1 + i%2) }
	keptRefs := name(n - 1) // restored with its ownerReferences
	f := newFaultFixture(t, fixtureOptions{kind: memcached, n: n, name: name, replicas: size})
	op, ns, keyRef, startManager, m, sidecar := f.op, f.ns, f.keyRef, f.startManager, f.manager, f.sidecar
	_, oldKeys := keysOf(t, keyRef)
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
	_, newKeys := keysOf(t, keyRef)
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

// TestEtcdSnapshotRestoredMidWave: etcd's snapshot, taken in the middle of a wave of CR
// edits, is restored once the wave is done (the operator stopped; etcd and kube-apiserver
// stopped, the data directory restored from the snapshot, both started again:
// hack/etcd-snapshot.sh), and the operator started against the restored cluster. The
// cluster is back as it was at the snapshot: the edits made since are gone, releases are
// behind their CR's spec, and one is in the middle of an upgrade (a snapshot is taken
// whenever a release Secret goes pending, until one holds that revision pending: the
// apiserver lists the snapshot's revision), its record older than the objects it applied
// or newer than those it had not yet. Every CR converges at its restored spec and
// generation, Ready, with exactly one deployed revision, none pending (the restored pending
// revision marked failed, with its Event); no CR, release, Deployment or Service is missing
// or left over.
func TestEtcdSnapshotRestoredMidWave(t *testing.T) {
	n, edits := 20, 60
	ctx := context.Background()
	op := newOperator(t)
	ns := env.Namespace(t)
	manager, sidecar := op.manager(), op.sidecar()
	waitLeader(t, manager)
	waitLeader(t, sidecar)

	name := func(i int) string { return fmt.Sprintf("app-%02d", i) }
	want := map[string]int64{}
	for i := range n {
		env.Create(t, appService.newCR(ns, name(i), 1))
		want[name(i)] = 1
	}
	waitAllConverged(t, ns, appService)

	t.Logf("a wave of %d edits over %d CRs, etcd's snapshot taken when a release goes pending", edits, n)
	pending, err := env.Clientset.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{LabelSelector: pendingRecords})
	if err != nil {
		t.Fatal(err)
	}
	defer pending.Stop()
	done, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := range edits {
			select {
			case <-stop:
				return
			default:
			}
			cr := name(i % n)
			want[cr] = (want[cr] + 1) % 3
			if err := appService.setReplicas(ctx, appService.newCR(ns, cr, 0), want[cr]); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Millisecond) // a wave, not a burst
		}
	}()
	// The wave ends before the test does, even when it fails meanwhile.
	defer func() {
		close(stop)
		<-done
	}()
	file := filepath.Join(t.TempDir(), "etcd.db")
	var rev int64
	var held []string
	for attempts := 1; held == nil; attempts++ {
		select {
		case _, ok := <-pending.ResultChan():
			if !ok {
				t.Fatal("the watch of pending release Secrets closed")
			}
		case <-done:
			t.Fatalf("the wave ended, and none of %d snapshots held a pending revision", attempts-1)
		}
		etcdSnapshot(t, "save", file)
		rev = snapshotRevision(t, file)
		held = pendingAt(t, ns, rev)
		if held != nil {
			t.Logf("snapshot %d, at revision %d, holds %v pending", attempts, rev, held)
		}
	}
	// What the snapshot holds of the CRs, read at its revision (before the apiserver compacts
	// it away): what the restore must bring back.
	atSnapshot := &unstructured.UnstructuredList{}
	atSnapshot.SetGroupVersionKind(appService.gvk.GroupVersion().WithKind(appService.gvk.Kind + "List"))
	if err := env.Client.List(ctx, atSnapshot, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{
		ResourceVersion: strconv.FormatInt(rev, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	}}); err != nil {
		t.Fatal(err)
	}
	<-done
	if t.Failed() {
		t.FailNow()
	}
	expectExactly(t, ns, waitAllConverged(t, ns, appService), want)

	manager.Stop()
	sidecar.Stop()
	etcdSnapshot(t, "restore", file)
	restored, err := snapshot(ctx, ns, appService)
	if err != nil {
		t.Fatal(err)
	}
	wantRestored := map[string]int64{}
	generations := map[string]int64{}
	for _, cr := range atSnapshot.Items {
		wantRestored[cr.GetName()] = appService.replicas(&cr)
		generations[cr.GetName()] = cr.GetGeneration()
	}
	for _, cr := range restored.crs {
		if got := appService.replicas(cr); got != wantRestored[cr.GetName()] || cr.GetGeneration() != generations[cr.GetName()] {
			t.Errorf("restored %s has %d replicas at generation %d, want %d at %d as in the snapshot",
				cr.GetName(), got, cr.GetGeneration(), wantRestored[cr.GetName()], generations[cr.GetName()])
		}
	}
	left := pendingRevisions(restored)
	if len(left) == 0 {
		t.Fatalf("the restored cluster has no pending revision, the snapshot held %v", held)
	}
	undone := 0
	for name, n := range wantRestored {
		if want[name] != n {
			undone++
		}
	}
	behind := restored.notConverged()
	t.Logf("restored: %d CRs back at their spec before the edits made since the snapshot; %d of %d not at their spec, e.g. %v; pending revisions %v",
		undone, len(behind), len(restored.crs), behind[:min(3, len(behind))], left)

	op.manager()
	op.sidecar()
	c := &crasher{t: t, ns: ns}
	for _, p := range left {
		c.waitRepaired(p)
	}
	s := waitKindReady(t, ns, appService)
	expectExactly(t, ns, s, wantRestored)
	for _, cr := range s.crs {
		if cr.GetGeneration() != generations[cr.GetName()] {
			t.Errorf("%s is at generation %d, want %d as restored", cr.GetName(), cr.GetGeneration(), generations[cr.GetName()])
		}
	}
}

// pendingRecords selects the release Secrets of revisions that are pending.
const pendingRecords = "owner=helm,status in (pending-install,pending-upgrade,pending-rollback)"

// etcdSnapshot saves etcd's snapshot to file, or restores it (hack/etcd-snapshot.sh).
func etcdSnapshot(t testing.TB, action, file string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.Root, "hack", "etcd-snapshot.sh"), action, file)
	cmd.Env = append(cmd.Environ(), "CLUSTER_DIR="+filepath.Dir(env.Kubeconfig))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("etcd snapshot %s: %v\n%s", action, err, out)
	}
}

// snapshotRevision is the etcd revision of the snapshot in file.
func snapshotRevision(t testing.TB, file string) int64 {
	t.Helper()
	out, err := exec.Command(filepath.Join(env.Root, "bin", "etcdutl"), "snapshot", "status", file, "--write-out=json").Output()
	if err != nil {
		t.Fatalf("etcdutl snapshot status: %v", err)
	}
	var status struct{ Revision int64 }
	if err := json.Unmarshal(out, &status); err != nil {
		t.Fatalf("etcdutl snapshot status: %v: %s", err, out)
	}
	return status.Revision
}

// pendingAt lists the release Secrets of ns that were pending at etcd revision rev, as the
// apiserver reads them at that revision; nil if none.
func pendingAt(t testing.TB, ns string, rev int64) []string {
	t.Helper()
	list, err := env.Clientset.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: pendingRecords,
		ResourceVersion: strconv.FormatInt(rev, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name+" "+s.Labels["status"])
	}
	return out
}

// pendingRevisions lists the revisions of s's releases that are pending.
func pendingRevisions(s *state) []pendingRevision {
	var out []pendingRevision
	for name, revs := range s.releases {
		for _, r := range revs {
			if release.Status(r.status).IsPending() {
				out = append(out, pendingRevision{name: name, version: r.version, status: r.status})
			}
		}
	}
	return out
}
