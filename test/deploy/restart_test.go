package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
	"transwarp.io/tos/warpdrive-operator/internal/statuscontract"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// The edit wave of TestOperatorPod: waveCRs Memcached CRs, each edited waveRounds times in a
// burst (200 edits).
const (
	waveCRs    = 40
	waveRounds = 5
	// waveConverge bounds the wait for the wave; it only stops a broken run from hanging.
	waveConverge = 10 * time.Minute
)

// rolloutRestart edits the Memcached sample and at once runs `kubectl rollout restart` of the
// operator's Deployment, then checks the handover: the old pod's containers exit 0 (they
// stopped within their grace period, not killed), the new pod is the only one and holds both
// Leases, and after it has reconciled every CR (a forced reconcile it reports handled) each
// release was upgraded exactly as often as its CR changed: once for the edited CR, never for
// the others. It returns the new pod.
func rolloutRestart(t *testing.T, old *corev1.Pod, crs []*unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	before := map[string]int64{}
	for _, cr := range crs {
		before[crKey(cr)] = revision(t, getCR(t, cr))
	}
	final := watchToDeletion(t, old)

	memcached := sampleOf(t, crs, "Memcached")
	size := setSize(t, memcached, 3)
	t.Logf("rollout restart of %s (leader %s)", deployment, old.Name)
	if out, err := env.Kubectl("-n", namespace, "rollout", "restart", "deployment/"+deployment); err != nil {
		t.Fatalf("kubectl rollout restart: %v\n%s", err, out)
	}
	deletedGracefully(t, final, old.Name)
	waitRolledOut(t, 1)
	pod := readyPod(t, old.Name)
	checkPod(t, pod)
	checkLeases(t, pod.Name)

	// The new leader has reconciled every CR once it has handled a forced reconcile of each.
	requested := "restart-" + rand.String(6)
	for _, cr := range crs {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statuscontract.RequestAnnotation, requested)
		if err := env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	for _, cr := range crs {
		got := waitReady(t, cr)
		framework.Eventually(t, converge, func(ctx context.Context) error {
			got = getCR(t, cr)
			if h, _, _ := unstructured.NestedString(got.Object, "status", "lastHandledReconcileAt"); h != requested {
				return fmt.Errorf("%s: status.lastHandledReconcileAt %q, want %q", crKey(cr), h, requested)
			}
			return nil
		})
		want := before[crKey(cr)]
		if crKey(cr) == crKey(memcached) {
			want++
			if replicas(got) != size {
				t.Errorf("%s: status.replicas %d after spec.size %d", crKey(cr), replicas(got), size)
			}
		}
		if r := revision(t, got); r != want {
			t.Errorf("%s: release revision %d after the restart, want %d (was %d)", crKey(cr), r, want, before[crKey(cr)])
		}
	}
	return pod
}

// deletedGracefully waits for the last state of the pod named name from final (see
// watchToDeletion) and checks that its containers exited 0: they stopped within their grace
// period, not killed. It returns that state.
func deletedGracefully(t *testing.T, final <-chan *corev1.Pod, name string) *corev1.Pod {
	t.Helper()
	var gone *corev1.Pod
	select {
	case gone = <-final:
	case <-time.After(converge):
	}
	if gone == nil {
		t.Fatalf("pod %s: no deletion seen within %s", name, converge)
	}
	for _, s := range gone.Status.ContainerStatuses {
		if term := s.State.Terminated; term == nil || term.ExitCode != 0 {
			t.Errorf("pod %s: container %s ended in state %+v, want exit code 0 (a graceful stop)", name, s.Name, s.State)
		}
	}
	return gone
}

// watchToDeletion watches pod until it is deleted and sends its last state (the kubelet
// reports its containers' end before the pod goes); the channel closes without it when the
// watch ends first.
func watchToDeletion(t *testing.T, pod *corev1.Pod) <-chan *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pod, err := env.Clientset.CoreV1().Pods(namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := env.Clientset.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + pod.Name, ResourceVersion: pod.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	final := make(chan *corev1.Pod, 1)
	go func() {
		defer close(final)
		defer w.Stop()
		last := pod
		for ev := range w.ResultChan() {
			switch p, ok := ev.Object.(*corev1.Pod); {
			case ev.Type == watch.Error:
				t.Errorf("watching pod %s: %v", pod.Name, apierrors.FromObject(ev.Object))
				return
			case ok:
				last = p
			}
			if ev.Type == watch.Deleted {
				final <- last
				return
			}
		}
	}()
	return final
}

// waitRolledOut waits until the operator's Deployment has n pods, all of its current template
// and Ready.
func waitRolledOut(t *testing.T, n int32) {
	t.Helper()
	framework.Eventually(t, converge, func(ctx context.Context) error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, d); err != nil {
			return err
		}
		s := d.Status
		if s.ObservedGeneration != d.Generation || s.Replicas != n || s.UpdatedReplicas != n || s.ReadyReplicas != n {
			return fmt.Errorf("Deployment %s not rolled out: %+v", deployment, s)
		}
		pods := &corev1.PodList{}
		if err := env.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		if len(pods.Items) != int(n) {
			return fmt.Errorf("%d pods of %s, want %d", len(pods.Items), deployment, n)
		}
		return nil
	})
}

// editWave creates waveCRs Memcached CRs in ns, waits for them, then edits each waveRounds
// times without waiting (200 edits), and checks that every CR ends Ready at its last
// generation, upgraded at least once and at most once per edit, while the pod stayed inside
// its limits: the same pod, no container restarted or killed for memory, each container's
// memory peak below its limit.
func editWave(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	var crs []*unstructured.Unstructured
	for i := range waveCRs {
		cr := &unstructured.Unstructured{}
		cr.SetGroupVersionKind(framework.GVK("Memcached"))
		cr.SetNamespace(ns)
		cr.SetName(fmt.Sprintf("wave-%02d", i))
		if err := unstructured.SetNestedField(cr.Object, int64(1), "spec", "size"); err != nil {
			t.Fatal(err)
		}
		env.Create(t, cr)
		crs = append(crs, cr)
	}
	for _, cr := range crs {
		waitReady(t, cr)
	}
	t.Logf("%d edits over %d CRs", waveCRs*waveRounds, waveCRs)
	size := int64(0)
	for round := 1; round <= waveRounds; round++ {
		size = int64(1 + round%2)
		for _, cr := range crs {
			patch := fmt.Sprintf(`{"spec":{"size":%d}}`, size)
			if err := env.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, cr := range crs {
		got := waitReadyWithin(t, cr, waveConverge)
		if replicas(got) != size {
			t.Errorf("%s: status.replicas %d after spec.size %d", crKey(cr), replicas(got), size)
		}
		// Edits that arrive together may be deployed as one upgrade, but every upgrade is of
		// an edit: at least one, at most one per edit.
		if r := revision(t, got); r < 2 || r > 1+waveRounds {
			t.Errorf("%s: release revision %d after %d edits, want 2 to %d", crKey(cr), r, waveRounds, 1+waveRounds)
		}
	}

	now := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), now); err != nil {
		t.Fatalf("the operator's pod after the wave: %v", err)
	}
	limits := map[string]corev1.ResourceList{}
	for _, c := range now.Spec.Containers {
		limits[c.Name] = c.Resources.Limits
	}
	for _, s := range now.Status.ContainerStatuses {
		if s.RestartCount != 0 || s.LastTerminationState.Terminated != nil {
			t.Errorf("container %s restarted %d times during the wave: last state %+v", s.Name, s.RestartCount, s.LastTerminationState)
		}
		u := containerUsage(t, s.ContainerID)
		l := limits[s.Name]
		limit := l.Memory().Value()
		t.Logf("container %s: memory peak %d MiB of its %d MiB limit (cgroup %d MiB); CPU limit %s, throttled %d times",
			s.Name, u.MaxMemory>>20, limit>>20, u.MemoryLimit>>20, l.Cpu(), u.Throttled)
		if u.MemoryLimit != limit {
			t.Errorf("container %s: cgroup memory limit %d, want the pod's %d", s.Name, u.MemoryLimit, limit)
		}
		if u.MaxMemory >= limit {
			t.Errorf("container %s reached its memory limit: peak %d of %d bytes", s.Name, u.MaxMemory, limit)
		}
	}
}

// sampleOf returns the CR of kind among crs.
func sampleOf(t *testing.T, crs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, cr := range crs {
		if cr.GetKind() == kind {
			return cr
		}
	}
	t.Fatalf("no %s among the samples", kind)
	return nil
}

// setSize sets a Memcached CR's spec.size and returns it.
func setSize(t *testing.T, cr *unstructured.Unstructured, size int64) int64 {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"size":%d}}`, size)
	if err := env.Client.Patch(context.Background(), cr, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	return size
}

func crKey(cr *unstructured.Unstructured) string {
	return cr.GetKind() + " " + cr.GetNamespace() + "/" + cr.GetName()
}

func getCR(t *testing.T, cr *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(cr.GroupVersionKind())
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(cr), got); err != nil {
		t.Fatal(err)
	}
	return got
}

// revision is the Helm release revision a CR's status reports.
func revision(t *testing.T, cr *unstructured.Unstructured) int64 {
	t.Helper()
	r, ok, err := unstructured.NestedInt64(cr.Object, "status", "deployedRelease", "revision")
	if !ok || err != nil {
		t.Fatalf("%s: no status.deployedRelease.revision (%v): %v", crKey(cr), err, cr.Object["status"])
	}
	return r
}

// replicas is the replica count the sidecar reports in a CR's status.
func replicas(cr *unstructured.Unstructured) int64 {
	r, _, _ := unstructured.NestedInt64(cr.Object, "status", "replicas")
	return r
}

// waitReady waits until cr is Ready at its current generation (status.observedGeneration
// and the Ready condition's) and returns it as it was then.
func waitReady(t *testing.T, cr *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	return waitReadyWithin(t, cr, converge)
}

func waitReadyWithin(t *testing.T, cr *unstructured.Unstructured, timeout time.Duration) *unstructured.Unstructured {
	t.Helper()
	var got *unstructured.Unstructured
	framework.Eventually(t, timeout, func(ctx context.Context) error {
		got = &unstructured.Unstructured{}
		got.SetGroupVersionKind(cr.GroupVersionKind())
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return err
		}
		observed, _, _ := unstructured.NestedInt64(got.Object, "status", "observedGeneration")
		status, reason, message := framework.Condition(got, "Ready")
		if observed != got.GetGeneration() || status != "True" {
			return fmt.Errorf("%s: generation %d, observed %d, Ready=%s %s: %s", crKey(cr), got.GetGeneration(), observed,
				status, reason, strings.TrimSpace(message))
		}
		return nil
	})
	return got
}

// crashRestart kills both of pod's processes as a crash would (killProcesses) and edits cr
// at once. The kubelet starts both containers again in the same pod, and each takes its
// Lease back as the same holder at its first try, without waiting for the Lease to expire
// (internal/mgropts, podIdentity): each Lease keeps its holder and its count of transitions,
// and the edit is Ready. It logs how long after the kill the edit was Ready.
func crashRestart(t *testing.T, pod *corev1.Pod, cr *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	before := map[string]coordinationv1.Lease{}
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(ctx, leases, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if strings.HasPrefix(ptr.Deref(l.Spec.HolderIdentity, ""), pod.Name+"_") {
			before[l.Name] = l
		}
	}
	if len(before) != 2 {
		t.Fatalf("pod %s holds %d Leases, want the manager's and the sidecar's", pod.Name, len(before))
	}
	killed := killProcesses(t, pod)
	size := setSize(t, cr, 1)
	got := waitReady(t, cr)
	took := time.Since(killed)
	if replicas(got) != size {
		t.Errorf("%s: status.replicas %d after spec.size %d", crKey(cr), replicas(got), size)
	}
	t.Logf("%s: the edit made as the processes were killed was Ready %.1f s later", crKey(cr), took.Seconds())

	restarted := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), restarted); err != nil {
		t.Fatal(err)
	}
	for _, s := range restarted.Status.ContainerStatuses {
		if last := s.LastTerminationState.Terminated; s.RestartCount != 1 || last == nil || last.ExitCode != 137 {
			t.Errorf("container %s: %d restarts, last state %+v; want 1, killed (137)", s.Name, s.RestartCount, s.LastTerminationState)
		}
	}
	for name, old := range before {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
			t.Fatal(err)
		}
		holder, transitions := ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseTransitions, 0)
		if holder != ptr.Deref(old.Spec.HolderIdentity, "") || transitions != ptr.Deref(old.Spec.LeaseTransitions, 0) {
			t.Errorf("Lease %s: holder %q after %d transitions; before the kill %q after %d: the restarted process took it as another holder",
				name, holder, transitions, ptr.Deref(old.Spec.HolderIdentity, ""), ptr.Deref(old.Spec.LeaseTransitions, 0))
		}
		if renewed := l.Spec.RenewTime; renewed == nil || !renewed.After(killed) {
			t.Errorf("Lease %s: last renewed %v, not since the kill at %v", name, renewed, killed)
		}
	}
}

// killProcesses kills both of pod's processes as a crash would: SIGKILL through the node's
// containerd, which a process cannot catch to release its Lease. It returns when.
func killProcesses(t *testing.T, pod *corev1.Pod) time.Time {
	t.Helper()
	t.Logf("killing the processes of pod %s (SIGKILL)", pod.Name)
	for _, s := range pod.Status.ContainerStatuses {
		id, _ := strings.CutPrefix(s.ContainerID, "containerd://")
		if out, err := ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
			t.Fatalf("container %s: %v\n%s", s.Name, err, out)
		}
	}
	return time.Now()
}

// crashToStandby scales the operator's Deployment to two pods, kills both processes of the
// leader's pod, and edits cr at once. The other pod, Ready with its cache filled, takes each
// Lease as soon as the kubelet reports the process ended (internal/handover, Succession), or
// the restarted process hands it over, finding it left held by its pod (YieldToStandby),
// whichever comes first; without either, the restarted process would take it back once its
// own cache is filled. Both Leases end with the standby as holder, one transition more each,
// the edit is Ready, and both restarted processes fill their caches only later. It logs how long after the kill the edit was Ready, then scales the Deployment
// back to one pod, the standby, and returns it.
func crashToStandby(t *testing.T, leader *corev1.Pod, cr *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	scale(t, 2)
	standby := readyPod(t, leader.Name)
	checkLeases(t, leader.Name)
	before := map[string]int32{}
	leases := &coordinationv1.LeaseList{}
	if err := env.Client.List(ctx, leases, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		before[l.Name] = ptr.Deref(l.Spec.LeaseTransitions, 0)
	}

	killed := killProcesses(t, leader)
	size := setSize(t, cr, 2)
	if got := waitReady(t, cr); replicas(got) != size {
		t.Errorf("%s: status.replicas %d after spec.size %d", crKey(cr), replicas(got), size)
	}
	t.Logf("%s: the edit made as the leader's processes were killed was Ready %.1f s later", crKey(cr), time.Since(killed).Seconds())
	want := podidentity.LeaseHolder(standby.Name, string(standby.UID))
	framework.Eventually(t, converge, func(ctx context.Context) error {
		for name, transitions := range before {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
				return err
			}
			holder, n := ptr.Deref(l.Spec.HolderIdentity, ""), ptr.Deref(l.Spec.LeaseTransitions, 0)
			if holder != want || n != transitions+1 {
				return fmt.Errorf("lease %s: holder %q after %d transitions, want the standby %q after %d", name, holder, n, want, transitions+1)
			}
		}
		return nil
	})
	// The restarted processes leave the API server to the standby before they fill their
	// caches (handover.DeferredCache).
	for _, c := range leader.Spec.Containers {
		framework.Eventually(t, converge, func(ctx context.Context) error {
			return logged(ctx, leader, c.Name, "filling the cache later")
		})
	}

	// The ReplicaSet removes the pod of the lowest deletion cost first.
	patch := []byte(`{"metadata":{"annotations":{"controller.kubernetes.io/pod-deletion-cost":"-1000"}}}`)
	if err := env.Client.Patch(ctx, leader, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	final := watchToDeletion(t, leader)
	scale(t, 1)
	deletedGracefully(t, final, leader.Name)
	waitRolledOut(t, 1)
	return standby
}

// logged is nil once the running process of pod's container has logged text.
func logged(ctx context.Context, pod *corev1.Pod, container, text string) error {
	out, err := env.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name,
		&corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(string(out), text) {
		return fmt.Errorf("container %s of pod %s has not logged %q", container, pod.Name, text)
	}
	return nil
}

// scale sets the operator's Deployment's replicas.
func scale(t *testing.T, replicas int) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: deployment}}
	if err := env.Client.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

// deleteLeader deletes the leader's pod old, as a drain or an eviction does, and edits cr at
// once, then checks the handover (internal/handover): old's containers go on until the next
// pod is Ready and then exit 0, and the edit is Ready. It logs how long after the deletion
// the edit was Ready and old's containers ended, and returns the next pod.
func deleteLeader(t *testing.T, old *corev1.Pod, cr *unstructured.Unstructured) *corev1.Pod {
	t.Helper()
	final := watchToDeletion(t, old)
	t.Logf("deleting the leader's pod %s", old.Name)
	if err := env.Client.Delete(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	size := setSize(t, cr, 2)
	if got := waitReady(t, cr); replicas(got) != size {
		t.Errorf("%s: status.replicas %d after spec.size %d", crKey(cr), replicas(got), size)
	}
	t.Logf("%s: the edit made as the leader's pod was deleted was Ready %.1f s later", crKey(cr), time.Since(deleted).Seconds())
	next := readyPod(t, old.Name)
	gone := deletedGracefully(t, final, old.Name)
	var ready time.Time
	for _, c := range next.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.LastTransitionTime.Time
		}
	}
	for _, s := range gone.Status.ContainerStatuses {
		term := s.State.Terminated
		if term == nil {
			continue // deletedGracefully
		}
		// Both times are in whole seconds.
		if term.FinishedAt.Before(&metav1.Time{Time: ready.Truncate(time.Second)}) {
			t.Errorf("deleted pod's container %s ended at %s, before the next pod %s was Ready at %s: nobody led in between",
				s.Name, term.FinishedAt.UTC(), next.Name, ready.UTC())
		}
		t.Logf("deleted pod's container %s ended %.0f s after the deletion; the next pod was Ready after %.0f s",
			s.Name, term.FinishedAt.Sub(deleted.Truncate(time.Second)).Seconds(), ready.Sub(deleted.Truncate(time.Second)).Seconds())
	}
	return next
}
