package handover

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// Rules of the namespaced Role the waking lock needs (config/rbac/leader_election_role.yaml).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=system,resources=leases,verbs=list;watch

// stallPeriods is how many renew periods without a renewal end a wait. A crashed leader is
// taken by a successor (Succession) once the kubelet reports its container ended: at 10,000 CRs up to
// 1.2 s after the kill, itself up to a period after the last renewal, so up to 2.5 s after
// it with the API server's latency. The wait must outlast that, or the elector, back on its
// retries, learns of the succession up to 2.2 s late (with a bound of 1.5 periods it did, in
// one round of four: docs/bench/restart-10000/fairness.md). The cost is in a lost node's
// succession: the elector starts counting the Lease's term when the wait ends, so it takes
// the Lease about 18 s after the last renewal, where 1.5 periods took 16.5 to 18.7 s.
const stallPeriods = 3

// WakingLock is a Lease lock whose Get, while another process holds the Lease and renews it,
// waits until the Lease changes hands: released, taken by a successor (Succession), deleted.
//
// client-go's elector tries the Lease every RetryPeriod plus up to 1.2 times as much jitter,
// and learns only then that the Lease was released (a rolling update, a drain) or handed to
// this process: 1 to 2.2 s later with internal/mgropts' LeaderRetryPeriod, which is most of
// what a standby's succession after a crash waits once the kubelet has reported it. With a
// watch on the one Lease the standby's elector, held in Get, tries it at once.
//
// The wait ends as well when the holder stops renewing (none seen for stallPeriods times its
// period): from then on the elector tries every period as without the watch, so a leader
// lost with its node is taken when its term ends, as before. A stalled watch looks the
// same and ends the wait. The leader's own tries are never held: Get waits only while the
// holder is another.
type WakingLock struct {
	resourcelock.Interface
	synced cache.InformerSynced
	// stall is how long after the last renewal seen the holder is taken to have missed one.
	stall time.Duration

	mu sync.Mutex
	// holder is the holder last seen, by Get or the watch; changed is closed when another is
	// seen.
	holder  string
	changed chan struct{}
	// renewed is when the watch last showed the Lease written.
	renewed time.Time
}

// NewWakingLock wraps lock, the Lease ns/name renewed every renewEvery, with a watch on that
// Lease through cs, started at once and for the life of the process: controller-runtime
// starts the elector once the caches are filled, by when the watch has listed the Lease, so
// that the elector's first Get already waits.
func NewWakingLock(lock resourcelock.Interface, cs kubernetes.Interface, ns, name string, renewEvery time.Duration) (*WakingLock, error) {
	leases := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	l := newWakingLock(lock, renewEvery)
	informer := leases.Coordination().V1().Leases().Informer()
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { l.written(holderOf(obj)) },
		UpdateFunc: func(_, obj any) { l.written(holderOf(obj)) },
		DeleteFunc: func(any) { l.see("") },
	})
	if err != nil {
		return nil, err
	}
	l.synced = informer.HasSynced
	leases.Start(nil)
	return l, nil
}

// newWakingLock is lock, renewed every renewEvery, without its watch: the state Get waits on.
func newWakingLock(lock resourcelock.Interface, renewEvery time.Duration) *WakingLock {
	return &WakingLock{Interface: lock, stall: stallPeriods * renewEvery, changed: make(chan struct{})}
}

// Get returns the Lease's record, once the wait described on WakingLock is over.
func (l *WakingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
wait:
	for {
		wait, changed := l.wait(time.Now())
		if wait <= 0 {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			break wait
		case <-changed:
			timer.Stop()
			break wait
		case <-timer.C: // a renewal seen since moves the end of the wait
		}
	}
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil {
		l.see(rec.HolderIdentity)
	}
	return rec, raw, err
}

// HasSynced says whether the watch has listed the Lease: Get waits only then.
func (l *WakingLock) HasSynced() bool { return l.synced() }

// wait is how long Get may wait at now, unless changed is closed first.
func (l *WakingLock) wait(now time.Time) (time.Duration, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.synced() || l.holder == "" || l.holder == l.Identity() {
		return 0, nil
	}
	return l.renewed.Add(l.stall).Sub(now), l.changed
}

// written records that the watch showed the Lease written, held by holder.
func (l *WakingLock) written(holder string) {
	l.mu.Lock()
	l.renewed = time.Now()
	l.mu.Unlock()
	l.see(holder)
}

// see records holder as the Lease's holder.
func (l *WakingLock) see(holder string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if holder != l.holder {
		l.holder = holder
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

func holderOf(obj any) string {
	if lease, ok := obj.(*coordinationv1.Lease); ok {
		return ptr.Deref(lease.Spec.HolderIdentity, "")
	}
	return ""
}
