package handover

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// heldLease is a record held by holder, taken acquiredAgo before now and renewed just now.
func heldLease(holder string, acquiredAgo time.Duration, now time.Time) resourcelock.LeaderElectionRecord {
	return resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15,
		AcquireTime: metav1.NewTime(now.Add(-acquiredAgo)), RenewTime: metav1.NewTime(now)}
}

// The wait is the rest of the room since another holder took the Lease, and nothing when this
// process holds it, nobody does, the holder's term has run out or the room has passed.
func TestRoomLeft(t *testing.T) {
	now := time.Now()
	room := 10 * time.Second
	expired := heldLease("other", time.Second, now)
	expired.RenewTime = metav1.NewTime(now.Add(-16 * time.Second))
	for _, tc := range []struct {
		name string
		rec  resourcelock.LeaderElectionRecord
		want time.Duration
	}{
		{"taken by another 3 s ago", heldLease("other", 3*time.Second, now), 7 * time.Second},
		{"taken by another 11 s ago", heldLease("other", 11*time.Second, now), 0},
		{"taken by another in the future (a clock ahead)", heldLease("other", -time.Minute, now), room},
		{"held by this process", heldLease("me", time.Second, now), 0},
		{"free", heldLease("", time.Second, now), 0},
		{"expired", expired, 0},
	} {
		if got := roomLeft(tc.rec, "me", room, now); got.Round(time.Millisecond) != tc.want {
			t.Errorf("%s: waits %v, want %v", tc.name, got, tc.want)
		}
	}
}

// recordLock is a lock of identity "me" whose Get returns rec, or err.
type recordLock struct {
	resourcelock.Interface
	rec resourcelock.LeaderElectionRecord
	err error
}

func (l recordLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	return &l.rec, nil, l.err
}
func (recordLock) Identity() string { return "me" }
func (recordLock) Describe() string { return "ns/lease" }

// startCache records when it was started.
type startCache struct {
	cache.Cache
	started chan time.Time
}

func (c startCache) Start(context.Context) error { c.started <- time.Now(); return nil }

// The cache starts once the room is over when another pod has just taken the Lease, at once
// otherwise, and not at all when the process stops during the wait. "At once" is told without
// a clock: Start with a stopped context starts the cache only if it does not wait.
func TestDeferredCacheStart(t *testing.T) {
	room := time.Second
	start := func(ctx context.Context, lock recordLock) (time.Duration, bool) {
		c := DeferredCache{Cache: startCache{started: make(chan time.Time, 1)}, Lock: lock, Room: room, Log: logr.Discard()}
		begun := time.Now()
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case at := <-c.Cache.(startCache).started:
			return at.Sub(begun), true
		default:
			return 0, false
		}
	}
	if after, ok := start(context.Background(), recordLock{rec: heldLease("other", 0, time.Now())}); !ok || after < room-100*time.Millisecond {
		t.Errorf("Lease just taken by another: started %v after Start (started: %v), want after %v", after, ok, room)
	}
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := start(stopped, recordLock{rec: heldLease("me", 0, time.Now())}); !ok {
		t.Error("Lease held by this process: the cache waited, want it started at once")
	}
	if _, ok := start(stopped, recordLock{err: errors.New("forbidden")}); !ok {
		t.Error("Lease unreadable: the cache waited, want it started at once")
	}
	if _, ok := start(stopped, recordLock{rec: heldLease("other", 0, time.Now())}); ok {
		t.Error("stopped during the wait: the cache started")
	}
}
