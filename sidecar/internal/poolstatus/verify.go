package poolstatus

import (
	"cmp"
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// DefaultVerifyInterval is how often the verifier recounts the claims from scratch.
const DefaultVerifyInterval = 5 * time.Minute

// DefaultRecheckDelay separates a recount that disagrees with the books from the one that
// confirms it: claim events the cache has stored but the books' handler has not yet been
// given make a recount differ for a moment.
const DefaultRecheckDelay = 2 * time.Second

var ledgerRepairs = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "warpdrive_pool_ledger_repairs_total",
	Help: "Times the pool bookkeeping ledger differed from a recount of the claims in the cache and was replaced by it.",
})

func init() {
	metrics.Registry.MustRegister(ledgerRepairs)
}

// Verifier checks, on the leader, that the books equal a recount of the cached claims from
// scratch: every VerifyInterval it lists the claims from the cache, recounts, and compares
// entry by entry and total by total, and checks that the running totals are the sum of the
// entries. A difference that persists across two recounts is logged as an error, counted in
// warpdrive_pool_ledger_repairs_total, and repaired by replacing the books with the recount
// and syncing every pool. This guards against a lost event or a bookkeeping bug; it is not
// how the books are kept (that is one constant-time update per claim event).
//
// Replacing the books with a recount taken while events are in flight is safe: the list is
// taken with the books locked (Books.Verify), so each event the list lacks reaches the
// books after the replacement and sets its claim's entry to the claim's state.
type Verifier struct {
	Reader client.Reader
	Books  *Books
	// Wake syncs every pool.
	Wake func()
	// VerifyInterval and RecheckDelay default to DefaultVerifyInterval and
	// DefaultRecheckDelay.
	VerifyInterval, RecheckDelay time.Duration
}

var _ manager.LeaderElectionRunnable = &Verifier{}

// NeedLeaderElection is true: only the leader's books feed status writes.
func (v *Verifier) NeedLeaderElection() bool { return true }

// Start verifies every VerifyInterval until ctx ends.
func (v *Verifier) Start(ctx context.Context) error {
	tick := time.NewTicker(cmp.Or(v.VerifyInterval, DefaultVerifyInterval))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			v.verify(ctx)
		}
	}
}

func (v *Verifier) verify(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("pool-ledger-verifier")
	var n int
	list := func() ([]Claim, error) {
		claims, err := v.claims(ctx)
		n = len(claims)
		return claims, err
	}
	diff, err := v.Books.Verify(list, false)
	if err != nil {
		logger.Error(err, "Listing claims for the recount")
		return
	}
	if diff == "" {
		logger.V(1).Info("Ledger equals the recount", "claims", n)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(cmp.Or(v.RecheckDelay, DefaultRecheckDelay)):
	}
	if diff, err = v.Books.Verify(list, true); err != nil {
		logger.Error(err, "Listing claims for the recount")
		return
	}
	if diff != "" {
		ledgerRepairs.Inc()
		logger.Error(nil, "Ledger differed from a recount of the claims; replaced it with the recount", "difference", diff, "claims", n)
		if v.Wake != nil {
			v.Wake()
		}
	}
}

// claims lists the claims in the cache, without copying them (they are only read).
func (v *Verifier) claims(ctx context.Context) ([]Claim, error) {
	var list corev1.PersistentVolumeClaimList
	if err := v.Reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]Claim, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, ClaimOf(&list.Items[i]))
	}
	return out, nil
}
