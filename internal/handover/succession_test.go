package handover

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func withContainer(status corev1.ContainerStatus) *corev1.Pod {
	status.Name = "manager"
	other := corev1.ContainerStatus{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	return &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{other, status}}}
}

// The end of a process is seen when the container that ran it is running no more, or runs
// another; the time is the kubelet's for the last end it reports.
func TestProcessEnded(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 7, 0, time.UTC)
	running := corev1.ContainerStatus{ContainerID: "c1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	terminated := corev1.ContainerStatus{ContainerID: "c1", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}
	restarted := corev1.ContainerStatus{ContainerID: "c2", RestartCount: 1,
		State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}
	backingOff := corev1.ContainerStatus{ContainerID: "c1", RestartCount: 1,
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)}}}
	for _, c := range []struct {
		name     string
		old, new corev1.ContainerStatus
		ended    bool
	}{
		{"still running", running, running, false},
		{"terminated", running, terminated, true},
		{"started again", running, restarted, true},
		{"backing off", running, backingOff, true},
		{"was not running", backingOff, restarted, false},
		{"started again, seen running before", restarted, restarted, false},
	} {
		end, ended := processEnded(withContainer(c.old), withContainer(c.new), "manager")
		if ended != c.ended || ended && !end.Equal(at) {
			t.Errorf("%s: ended %v at %v, want %v at %v", c.name, ended, end, c.ended, at)
		}
	}
	// Another container's end is not this process's.
	if _, ended := processEnded(withContainer(running), withContainer(terminated), "sidecar"); ended {
		t.Error("the manager's end taken for the sidecar's")
	}
}

// A Lease is taken from a pod only if that pod holds it under a record acquired before its
// process ended.
func TestLeftBy(t *testing.T) {
	end := time.Date(2026, 12, 2, 10, 0, 7, 0, time.UTC)
	rec := func(holder string, acquired time.Time) resourcelock.LeaderElectionRecord {
		return resourcelock.LeaderElectionRecord{HolderIdentity: holder, AcquireTime: metav1.NewTime(acquired)}
	}
	for _, c := range []struct {
		name string
		rec  resourcelock.LeaderElectionRecord
		left bool
	}{
		{"held by the ended process", rec("old_1", end.Add(-time.Hour)), true},
		{"written by a process started since", rec("old_1", end.Add(time.Second)), false},
		{"acquired in the second it ended", rec("old_1", end), false},
		{"held by another pod", rec("other_2", end.Add(-time.Hour)), false},
		{"released", rec("", end.Add(-time.Hour)), false},
	} {
		if left := leftBy(c.rec, "old_1", end); left != c.left {
			t.Errorf("%s: left %v, want %v", c.name, left, c.left)
		}
	}
}
