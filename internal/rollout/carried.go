package rollout

import (
	"sync/atomic"

	"helm.sh/helm/v3/pkg/chart"
)

// Carried recognises the chart the operator carries by its Digest, remembering the chart
// value last recognised so that the reconciler's chart is hashed once. The operator's rollout
// controller (internal/operator/rollout_controller.go) makes one per kind and its rollout gate
// (internal/operator/pipeline/layer_rolloutgate.go) asks it which chart a release is on.
type Carried struct {
	digest string
	last   atomic.Pointer[chart.Chart]
}

// NewCarried recognises the chart whose Digest is digest.
func NewCarried(digest string) *Carried { return &Carried{digest: digest} }

// Digest is the Digest of the carried chart.
func (cc *Carried) Digest() string { return cc.digest }

// Is reports whether c is the carried chart.
func (cc *Carried) Is(c *chart.Chart) bool {
	if c == nil {
		return false
	}
	if cc.last.Load() == c {
		return true
	}
	if Digest(c) != cc.digest {
		return false
	}
	cc.last.Store(c)
	return true
}
