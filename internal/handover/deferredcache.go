package handover

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// NewLeaderRoom is how long a process leaves the API server to a pod that has just taken its
// Lease before it fills its cache (DeferredCache). Over 10,000 CRs a new leader's first edits
// were Ready within a few seconds of its Lease when nothing else was starting, and took about
// twice as long beside the crashed processes filling their caches
// (docs/bench/restart-10000/fairness.md, "A crash with a standby"). Ten seconds is several
// times what the new leader needs, and short beside the 20 s the fill itself takes there.
const NewLeaderRoom = 10 * time.Second

// DeferredCache is a cache that waits, before it starts filling, while another pod has held
// Lock's Lease for less than Room: the kubelet's restart of a crashed leader's process, whose
// Lease a standby has just taken (Succession), or which it has just handed to one
// (YieldToStandby).
//
// Why: filling a cache at 10,000 CRs takes nearly both of a small control plane's cores for
// about 20 s, most of them the API server's, encoding every CR for the watch. A restarted
// process that starts at once, about 2 s after the crash, does so exactly while the new
// leader loads its keys and serves the edits queued during the hand-over, and doubled the
// time those took. Waiting leaves the restarted pod without a filled cache, so not Ready as a
// standby, for up to Room longer; its process answers /healthz meanwhile.
//
// A process whose own pod holds the Lease (one replica), or that finds the Lease free,
// expired or held for longer than Room, starts at once.
type DeferredCache struct {
	cache.Cache
	Lock resourcelock.Interface
	Room time.Duration
	Log  logr.Logger
}

// DeferCache returns the NewCacheFunc that wraps what newCache builds (cache.New if nil) in a
// DeferredCache of lock for NewLeaderRoom.
func DeferCache(newCache cache.NewCacheFunc, lock resourcelock.Interface, log logr.Logger) cache.NewCacheFunc {
	if newCache == nil {
		newCache = cache.New
	}
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := newCache(cfg, opts)
		if err != nil {
			return nil, err
		}
		return DeferredCache{Cache: c, Lock: lock, Room: NewLeaderRoom, Log: log.WithName("handover")}, nil
	}
}

// Start starts the cache, once the wait described on DeferredCache is over. The Lease is read
// now rather than when the cache is built, so that a hand-over made in between
// (YieldToStandby) counts. A Lease that cannot be read does not delay the start.
func (c DeferredCache) Start(ctx context.Context) error {
	if rec, _, err := c.Lock.Get(ctx); err == nil {
		if wait := roomLeft(*rec, c.Lock.Identity(), c.Room, time.Now()); wait > 0 {
			c.Log.Info("filling the cache later: another pod has just taken the Lease",
				"lease", c.Lock.Describe(), "holder", rec.HolderIdentity, "wait", wait)
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return nil
			case <-timer.C:
			}
		}
	}
	return c.Cache.Start(ctx)
}

// roomLeft is what is left at now of room since rec's holder took the Lease, when that holder
// is another than self and still holds it; else 0. It is at most room, whatever the clocks.
func roomLeft(rec resourcelock.LeaderElectionRecord, self string, room time.Duration, now time.Time) time.Duration {
	if rec.HolderIdentity == "" || rec.HolderIdentity == self {
		return 0
	}
	if now.After(rec.RenewTime.Add(time.Duration(rec.LeaseDurationSeconds) * time.Second)) {
		return 0
	}
	return min(max(rec.AcquireTime.Add(room).Sub(now), 0), room)
}
