package renderbound

import (
	"fmt"
	"time"
)

// Bounds are what one render may cost. Their defaults fit every chart of the test suite and a
// monitoring-stack-sized chart (TestMonitoringStackFitsDefaults) with room to spare, and keep
// the workers' worst case, Workers times Memory, within the manager container's memory limit
// beside the manager itself (config/manager/manager.yaml).
type Bounds struct {
	// Memory is the address space a render may add to the worker's own at start: the heap,
	// and the stacks of its goroutines.
	Memory int64
	// Output is how many bytes the rendered templates may hold in all.
	Output int64
	// Timeout is how long a render may take; the worker is killed past it.
	Timeout time.Duration
	// Workers is how many renders may be checked at once.
	Workers int
}

// Defaults of the manager's --render-* flags.
const (
	DefaultMemory  = 160 << 20
	DefaultOutput  = 16 << 20
	DefaultTimeout = 30 * time.Second
	DefaultWorkers = 2
)

// DefaultBounds are the bounds the manager runs with unless its flags say otherwise.
func DefaultBounds() Bounds {
	return Bounds{Memory: DefaultMemory, Output: DefaultOutput, Timeout: DefaultTimeout, Workers: DefaultWorkers}
}

// The bounds a render can pass, as Exceeded names them.
const (
	BoundMemory = "memory"
	BoundOutput = "output"
	BoundTime   = "time"
	// BoundCrash is a worker that died of something else than the memory bound while it
	// rendered (a fatal error of the Go runtime): the same render would take the manager.
	BoundCrash = "crash"
)

// Exceeded says that a render passed one of the bounds. It is the verdict on a chart and its
// values: the same inputs pass it again, so it holds until the values or the chart change.
type Exceeded struct {
	Bound  string // BoundMemory, BoundOutput, BoundTime or BoundCrash
	Limit  string // the bound's value, as its flag takes it
	Flag   string // the flag that sets it
	Detail string // what the worker said, if anything
}

func (e *Exceeded) Error() string {
	var what string
	switch e.Bound {
	case BoundMemory:
		what = "the templates' render took more memory than " + e.Limit
	case BoundOutput:
		what = "the templates rendered more than " + e.Limit + " of manifests"
	case BoundTime:
		what = "the templates' render took longer than " + e.Limit
	default:
		what = "the templates' render crashed the process that rendered it"
	}
	msg := fmt.Sprintf("%s (the bound of this operator, %s): a value that templates evaluate (through tpl) or a count "+
		"they loop over asks for too much; the release is left as it is until the spec, a source or the chart changes", what, e.Flag)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	return msg
}

// ByteSize formats n bytes as the flags take it: 160Mi, 16Mi, 512Ki.
func ByteSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGi", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMi", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKi", n>>10)
	}
	return fmt.Sprintf("%d", n)
}
