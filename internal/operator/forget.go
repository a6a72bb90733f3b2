package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"transwarp.io/tos/warpdrive-operator/internal/operator/metrics"
	"transwarp.io/tos/warpdrive-operator/internal/operator/outcomes"
)

// forgetPeriod is how often goneForgetter looks for the state of CRs that are gone.
const forgetPeriod = time.Minute

// goneForgetter forgets, every forgetPeriod, what the manager keeps in memory per CR (its metric
// series, its outcomes) for the CRs that the cache no longer holds. The readiness controller
// forgets a CR when it sees it gone; a Helm operation that ends after that (an install still
// running when a person removed the CR's finalizer) records it again, and without goneForgetter
// that state would stay until the process ends, one CR at a time, as many as a tenant
// creates and deletes.
type goneForgetter struct {
	reader  client.Reader // the manager's cache of the CRs
	kinds   []forgetKind
	metrics *metrics.Fleet
}

// forgetKind is a CR kind and its outcomes.
type forgetKind struct {
	gvk      schema.GroupVersionKind
	outcomes *outcomes.Store
}

// Start forgets the gone CRs every forgetPeriod until ctx ends.
func (s *goneForgetter) Start(ctx context.Context) error {
	t := time.NewTicker(forgetPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			s.forget(ctx)
		}
	}
}

// NeedLeaderElection: the state forgotten is written by the leader's controllers.
func (s *goneForgetter) NeedLeaderElection() bool { return true }

// forget forgets the state of every CR that the cache does not hold and that was recorded
// before the cache was read: one recorded since may be of a CR the list missed.
func (s *goneForgetter) forget(ctx context.Context) {
	for _, k := range s.kinds {
		since := time.Now()
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		if err := s.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
			continue // the next look
		}
		live := make(map[types.NamespacedName]bool, len(list.Items))
		for i := range list.Items {
			live[client.ObjectKeyFromObject(&list.Items[i])] = true
		}
		s.metrics.ForgetGone(k.gvk.Kind, live, since)
		k.outcomes.ForgetGone(live, since)
	}
}
