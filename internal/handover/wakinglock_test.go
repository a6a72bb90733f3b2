package handover

import (
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// identityLock is a lock of that identity.
type identityLock struct {
	resourcelock.Interface
	identity string
}

func (l identityLock) Identity() string { return l.identity }

// Get waits only while another holder renews the Lease, and until it changes hands.
func TestWakingLockWaits(t *testing.T) {
	synced := true
	l := newWakingLock(identityLock{identity: "me"}, time.Second)
	l.synced = func() bool { return synced }
	now := time.Now()
	if wait, _ := l.wait(now); wait > 0 {
		t.Errorf("no holder seen yet: waits %v", wait)
	}
	l.written("other")
	wait, changed := l.wait(time.Now())
	if wait <= 2500*time.Millisecond || wait > 3*time.Second {
		t.Errorf("another holder just renewed: waits %v, want up to 3 s", wait)
	}
	if wait, _ := l.wait(time.Now().Add(3 * time.Second)); wait > 0 {
		t.Errorf("no renewal for 3 s: waits %v", wait)
	}
	synced = false
	if wait, _ := l.wait(time.Now()); wait > 0 {
		t.Errorf("the watch not synced: waits %v", wait)
	}
	synced = true
	l.see("me")
	select {
	case <-changed:
	default:
		t.Error("a new holder does not end the wait")
	}
	if wait, _ := l.wait(time.Now()); wait > 0 {
		t.Errorf("holding the Lease: waits %v", wait)
	}
	l.written("")
	if wait, _ := l.wait(time.Now()); wait > 0 {
		t.Errorf("the Lease released: waits %v", wait)
	}
}
