package handover

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func pod(name string, ready, deleting bool) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	if deleting {
		p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	return p
}

// A stopping pod goes on until another pod, not itself nor one stopping too, is Ready; it
// stops sooner only when no other pod comes at all, and later never.
func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name   string
		pods   []corev1.Pod
		waited time.Duration
		stop   bool
	}{
		{"successor Ready", []corev1.Pod{pod("old", true, true), pod("new", true, false)}, 0, true},
		{"successor starting", []corev1.Pod{pod("old", true, true), pod("new", false, false)}, 10 * time.Second, false},
		{"successor never Ready", []corev1.Pod{pod("old", true, true), pod("new", false, false)}, MaxWait, true},
		{"only another stopping pod Ready", []corev1.Pod{pod("old", true, true), pod("older", true, true)}, time.Second, false},
		{"no other pod yet", []corev1.Pod{pod("old", true, true)}, time.Second, false},
		{"no other pod comes", []corev1.Pod{pod("old", true, true)}, appearWait, true},
		{"itself Ready, not deleted yet", []corev1.Pod{pod("old", true, false)}, time.Second, false},
	} {
		if stop, why := decide("old", c.pods, c.waited); stop != c.stop {
			t.Errorf("%s: stop %v (%q), want %v", c.name, stop, why, c.stop)
		}
	}
}

// A Lease handed over names the new holder, acquired and renewed at the hand-over, and counts
// one transition more; its duration is kept.
func TestHandedTo(t *testing.T) {
	now := time.Now()
	old := resourcelock.LeaderElectionRecord{
		HolderIdentity: "old_1", LeaseDurationSeconds: 15, LeaderTransitions: 2,
		AcquireTime: metav1.NewTime(now.Add(-time.Hour)), RenewTime: metav1.NewTime(now.Add(-time.Second)),
	}
	got := handedTo(old, "new_2", now)
	if got.HolderIdentity != "new_2" || got.LeaderTransitions != 3 || got.LeaseDurationSeconds != 15 ||
		!got.AcquireTime.Time.Equal(now) || !got.RenewTime.Time.Equal(now) {
		t.Errorf("handed over: %+v", got)
	}
}
