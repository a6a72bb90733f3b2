package handover

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// recordingLock keeps the records written to it.
type recordingLock struct {
	resourcelock.Interface
	written []resourcelock.LeaderElectionRecord
}

func (l *recordingLock) Create(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.written = append(l.written, rec)
	return nil
}

func (l *recordingLock) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.written = append(l.written, rec)
	return nil
}

// A renewal of a record acquired before the process started carries the process's start;
// a later acquire time is kept.
func TestStampedLock(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	inner := &recordingLock{}
	lock := StampedLock{Interface: inner, Since: since}
	ctx := context.Background()
	older := metav1.NewTime(since.Add(-time.Hour))
	later := metav1.NewTime(since.Add(time.Minute))
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{AcquireTime: older}); err != nil {
		t.Fatal(err)
	}
	if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{AcquireTime: older}); err != nil {
		t.Fatal(err)
	}
	if err := lock.Update(ctx, resourcelock.LeaderElectionRecord{AcquireTime: later}); err != nil {
		t.Fatal(err)
	}
	want := []metav1.Time{since, since, later}
	if len(inner.written) != len(want) {
		t.Fatalf("%d writes, want %d", len(inner.written), len(want))
	}
	for i, rec := range inner.written {
		if !rec.AcquireTime.Equal(&want[i]) {
			t.Errorf("write %d: acquired %v, want %v", i, rec.AcquireTime, want[i])
		}
	}
}
