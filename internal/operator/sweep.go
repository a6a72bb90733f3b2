package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// sweepPeriod is how often goneSweep looks for the state of CRs that are gone.
const sweepPeriod = time.Minute

// goneSweep forgets, every sweepPeriod, what the manager keeps in memory per CR (its metric
// series, its outcomes) for the CRs that the cache no longer holds. The readiness controller
// forgets a CR when it sees it gone; a Helm operation that ends after that (an install still
// running when a person removed the CR's finalizer) records it again, and without the sweep
// that state would stay until the process ends, one CR at a time, as many as a tenant
// creates and deletes.
type goneSweep struct {
	reader  client.Reader // the manager's cache of the CRs
	kinds   []sweptKind
	metrics *fleetSeries
}

// sweptKind is a CR kind and its outcomes.
type sweptKind struct {
	gvk      schema.GroupVersionKind
	outcomes *outcomes
}

// Start sweeps every sweepPeriod until ctx ends.
func (s *goneSweep) Start(ctx context.Context) error {
	t := time.NewTicker(sweepPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.sweep(ctx)
		}
	}
}

// NeedLeaderElection: the state swept is written by the leader's controllers.
func (s *goneSweep) NeedLeaderElection() bool { return true }

// sweep forgets the state of every CR that the cache does not hold and that was recorded
// before the cache was read: one recorded since may be of a CR the list missed.
func (s *goneSweep) sweep(ctx context.Context) {
	for _, k := range s.kinds {
		since := time.Now()
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		if err := s.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			continue // the next sweep
		}
		live := make(map[types.NamespacedName]bool, len(list.Items))
		for i := range list.Items {
			live[client.ObjectKeyFromObject(&list.Items[i])] = true
		}
		s.metrics.forgetGone(k.gvk.Kind, live, since)
		k.outcomes.forgetGone(live, since)
	}
}
