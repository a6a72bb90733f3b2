package faults

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// fixtureOptions says which CRs a fixture makes Ready: n CRs of kind, the i-th named name(i)
// with replicas(i) replicas (1 when replicas is nil).
type fixtureOptions struct {
	kind     kind
	n        int
	name     func(i int) string
	replicas func(i int) int64
}

// faultFixture is where the tests on a signing key of their own start: the key, a manager that
// signs with it and leads, a sidecar, and the fixture's CRs Ready. The tests then stop, break
// or restore what they are about from there.
type faultFixture struct {
	op *operator
	ns string
	// keyRef and startManager are ownSigningKey's: the key's Secret, and how to start another
	// manager that signs with it.
	keyRef       client.ObjectKey
	startManager func() *proc
	manager      *proc
	sidecar      *proc
	// ready is the snapshot that said every CR was at its spec and Ready.
	ready *state
}

// newFaultFixture starts the fixture for t in the order the tests started it before they
// shared it, which orders their cleanups: the operator before the namespace (see
// newOperator), then the key, its manager and sidecar, then the CRs.
func newFaultFixture(t *testing.T, opts fixtureOptions) *faultFixture {
	t.Helper()
	f := &faultFixture{op: newOperator(t)}
	f.ns = env.Namespace(t)
	f.keyRef, f.startManager = ownSigningKey(t, f.op)
	f.manager = f.startManager()
	f.sidecar = f.op.sidecar()
	for i := range opts.n {
		replicas := int64(1)
		if opts.replicas != nil {
			replicas = opts.replicas(i)
		}
		env.Create(t, opts.kind.newCR(f.ns, opts.name(i), replicas))
	}
	f.ready = waitKindReady(t, f.ns, opts.kind)
	return f
}
