package handover

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// StampedLock is a Lease lock whose writes never carry an acquire time older than Since, the
// start of the process that writes them.
//
// client-go's elector keeps a record's acquire time when it renews a Lease held under its own
// identity, and a process restarted in the pod that held the Lease has that identity
// (podidentity.LeaseHolder): without the stamp it would renew its predecessor's record
// unchanged. With it, a record whose acquire time is older than the moment a process of that
// container ended was written by that process or an earlier one, all ended: Succession relies
// on it.
type StampedLock struct {
	resourcelock.Interface
	Since metav1.Time
}

// Create creates the Lease with rec, stamped.
func (l StampedLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.Interface.Create(ctx, l.stamp(rec))
}

// Update writes rec, stamped.
func (l StampedLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	return l.Interface.Update(ctx, l.stamp(rec))
}

func (l StampedLock) stamp(rec resourcelock.LeaderElectionRecord) resourcelock.LeaderElectionRecord {
	if rec.AcquireTime.Before(&l.Since) {
		rec.AcquireTime = l.Since
	}
	return rec
}
