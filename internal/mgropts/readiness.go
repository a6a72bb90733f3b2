package mgropts

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// cacheSyncWait bounds how long one readiness probe waits for the informers: less than a
// probe's default timeout of 1 s.
const cacheSyncWait = 500 * time.Millisecond

// syncWaiter is what cacheSynced reads of the manager's cache.
type syncWaiter interface {
	WaitForCacheSync(ctx context.Context) bool
}

// cacheSynced is the /readyz check: ready once every informer of the cache has listed its
// objects, and ready from then on (informers added later, as the dependent watches are, do
// not make the pod unready).
//
// The cache fills before leader election (controller-runtime starts it first, with the
// informers added before the manager starts: each process adds those of the types its
// controllers read), so a pod that is ready can take over at once: at 10,000 CRs filling it
// takes about 20 s on the bench's machine (docs/bench/restart-10000). A Deployment's
// rolling update (one surge pod, none unavailable: the default with one replica) keeps the
// old pod, which keeps serving, until the new one is ready; the old one releases its Lease
// as it stops, and the new one, retrying every 2 s, takes it with its cache full. A check
// that answered at once would have the old pod stopped while the new one had yet to list
// everything.
func cacheSynced(c syncWaiter) healthz.Checker {
	var synced atomic.Bool
	return func(req *http.Request) error {
		if synced.Load() {
			return nil
		}
		ctx, cancel := context.WithTimeout(req.Context(), cacheSyncWait)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informers have not listed their objects yet")
		}
		synced.Store(true)
		return nil
	}
}
