package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"transwarp.io/tos/warpdrive-operator/internal/handover"
	"transwarp.io/tos/warpdrive-operator/internal/podidentity"
	"transwarp.io/tos/warpdrive-operator/test/framework"
)

// TestYieldToStandby runs handover.YieldToStandby as a restarted process would, against the
// apiserver: a Lease left held by its own pod goes to another pod of the same labels only
// once that pod is Ready, and a Lease another pod holds is left alone. kwok plays the pods'
// kubelet: a pod it runs turns Ready, one that no node can take stays Pending.
func TestYieldToStandby(t *testing.T) {
	env := newEnv(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	labels := map[string]string{"app": "yield", "pod-template-hash": "a"}
	newPod := func(name string, runs bool, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}},
		}
		if !runs {
			p.Spec.NodeSelector = map[string]string{"no-such-node": "true"}
		}
		env.Create(t, p)
		return p
	}
	self := newPod("self", false, labels)
	// Another ReplicaSet's pod of the same Deployment: its pod-template-hash differs.
	standbyLabels := map[string]string{"app": "yield", "pod-template-hash": "b"}
	newPod("pending", false, standbyLabels)
	newPod("elsewhere", true, map[string]string{"app": "other"})

	selfHolder := podidentity.LeaseHolder(self.Name, string(self.UID))
	lease := createHeldLease(t, env, ns, "yield", selfHolder, time.Now())
	t.Setenv(podidentity.NameEnv, self.Name)
	t.Setenv(podidentity.NamespaceEnv, ns)
	log := zap.New(zap.UseDevMode(true))
	yield := func() (holder string, transitions int32) {
		t.Helper()
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lease.Name},
			Client:     env.Clientset.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: selfHolder},
		}
		handover.YieldToStandby(ctx, env.Config, lock, log)
		got := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), got); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(got.Spec.HolderIdentity, ""), ptr.Deref(got.Spec.LeaseTransitions, 0)
	}

	// The only other pod of the Deployment is Pending, and the Ready one is another app's.
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		return podIsReady(ctx, env, ns, "elsewhere")
	})
	if holder, transitions := yield(); holder != selfHolder || transitions != 3 {
		t.Errorf("no Ready standby: Lease held by %q after %d transitions, want it kept by %q after 3", holder, transitions, selfHolder)
	}

	standby := newPod("standby", true, standbyLabels)
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		return podIsReady(ctx, env, ns, standby.Name)
	})
	want := podidentity.LeaseHolder(standby.Name, string(standby.UID))
	if holder, transitions := yield(); holder != want || transitions != 4 {
		t.Errorf("a Ready standby: Lease held by %q after %d transitions, want %q after 4", holder, transitions, want)
	}
	// The restarted process's next start finds the Lease held by the standby: it stays there.
	if holder, _ := yield(); holder != want {
		t.Errorf("Lease held by another pod: moved to %q, want it left with %q", holder, want)
	}
}

// podIsReady is nil once the pod named name in ns is Ready.
func podIsReady(ctx context.Context, env *framework.Env, ns, name string) error {
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return err
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("pod %s is not Ready", name)
}

// TestSuccession runs handover.Succession as a standby's process would, against the apiserver:
// the Lease goes to the standby once the leader pod's status shows the process of the
// standby's container ended, the Lease's record being older than that end. Nothing runs the
// pods (no node takes them): the test writes their status as a kubelet would.
func TestSuccession(t *testing.T) {
	env := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.Namespace(t)
	newPod := func(name string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "takeover"}},
			Spec: corev1.PodSpec{
				Containers:   []corev1.Container{{Name: "manager", Image: "none"}, {Name: "sidecar", Image: "none"}},
				NodeSelector: map[string]string{"no-such-node": "true"},
			},
		}
		env.Create(t, p)
		return p
	}
	leader, standby := newPod("leader"), newPod("standby")
	from := podidentity.LeaseHolder(leader.Name, string(leader.UID))
	lease := createHeldLease(t, env, ns, "takeover", from, time.Now().Add(-time.Hour))
	t.Setenv(podidentity.NameEnv, standby.Name)
	t.Setenv(podidentity.NamespaceEnv, ns)
	to := podidentity.LeaseHolder(standby.Name, string(standby.UID))
	succession := &handover.Succession{
		Config: env.Config,
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lease.Name},
			Client:     env.Clientset.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: to},
		},
		Container: "manager",
		Elected:   make(chan struct{}),
		Log:       zap.New(zap.UseDevMode(true)),
	}
	done := make(chan error)
	go func() { done <- succession.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	// The leader's manager container runs a process, then that process ends and the kubelet
	// starts another: written again each try, since the standby's watch may start after it.
	running := func() corev1.ContainerState {
		return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	}
	setStatus := func(manager corev1.ContainerStatus) error {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(leader), p); err != nil {
			return err
		}
		manager.Name = "manager"
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{manager,
			{Name: "sidecar", ContainerID: "containerd://sidecar", State: running()}}
		return env.Client.Status().Update(ctx, p)
	}
	try := 0
	framework.Eventually(t, time.Minute, func(ctx context.Context) error {
		try++
		id := fmt.Sprintf("containerd://manager-%d", try)
		if err := setStatus(corev1.ContainerStatus{ContainerID: id, RestartCount: int32(try), State: running()}); err != nil {
			return err
		}
		ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.Now()}}
		if err := setStatus(corev1.ContainerStatus{ContainerID: id, RestartCount: int32(try), State: ended}); err != nil {
			return err
		}
		got := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), got); err != nil {
			return err
		}
		if holder := ptr.Deref(got.Spec.HolderIdentity, ""); holder != to {
			return fmt.Errorf("the Lease is held by %q, want %q", holder, to)
		}
		if transitions := ptr.Deref(got.Spec.LeaseTransitions, 0); transitions != 4 {
			t.Errorf("taken over after %d transitions, want 4", transitions)
		}
		return nil
	})
}

// TestWakingLock runs a standby's Get through handover.WakingLock against the apiserver: while
// another holder renews the Lease, Get waits; once the Lease is handed to this process, Get
// returns it at once, long before the wait's bound (1.5 renewal periods of a minute) would.
func TestWakingLock(t *testing.T) {
	env := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ns := env.Namespace(t)
	lease := createHeldLease(t, env, ns, "waking", "other", time.Now())
	// The holder renews every 200 ms until told to hand the Lease to "me".
	handOver := make(chan struct{})
	renewed := make(chan error, 1)
	go func() {
		holder := "other"
		for {
			select {
			case <-ctx.Done():
				renewed <- nil
				return
			case <-handOver:
				holder, handOver = "me", nil
			case <-time.After(200 * time.Millisecond):
			}
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), l); err != nil {
				renewed <- err
				return
			}
			l.Spec.HolderIdentity = ptr.To(holder)
			l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
			if err := env.Client.Update(ctx, l); err != nil {
				renewed <- err
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-renewed; err != nil && ctx.Err() == nil {
			t.Error(err)
		}
	})

	inner := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: lease.Name},
		Client:     env.Clientset.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "me"},
	}
	lock, err := handover.NewWakingLock(inner, env.Clientset, ns, lease.Name, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The watch starts with the lock, so that the elector's first Get already waits.
	framework.Eventually(t, time.Minute, func(context.Context) error {
		if !lock.HasSynced() {
			return errors.New("the Lease's watch has not listed it yet")
		}
		return nil
	})
	got := make(chan string, 1)
	go func() {
		rec, _, err := lock.Get(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- rec.HolderIdentity
	}()
	select {
	case holder := <-got:
		t.Fatalf("Get returned %q while another holder renews the Lease", holder)
	case <-time.After(2 * time.Second):
	}
	close(handOver)
	select {
	case holder := <-got:
		if holder != "me" {
			t.Errorf("Get returned the Lease held by %q, want me", holder)
		}
	case <-time.After(45 * time.Second): // well short of the wait's own bound, 90 s
		t.Error("Get still waits after the Lease was handed to this process")
	}
}

// createHeldLease creates the Lease ns/name held by holder since acquired, renewed now, after
// three transitions.
func createHeldLease(t *testing.T, env *framework.Env, ns, name, holder string, acquired time.Time) *coordinationv1.Lease {
	t.Helper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To[int32](15),
			LeaseTransitions:     ptr.To[int32](3),
			AcquireTime:          &metav1.MicroTime{Time: acquired},
			RenewTime:            &metav1.MicroTime{Time: time.Now()},
		},
	}
	env.Create(t, lease)
	return lease
}
