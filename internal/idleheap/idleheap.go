// Package idleheap gives back to the system the memory that a burst of work left in the
// Go heap, once the process has gone quiet.
//
// The Go runtime collects when the heap has grown by GOGC percent over what the last
// collection found live, and returns to the system only what lies above about that goal. A
// wave of reconciles (every CR upgraded, a relist of every cached object) raises the heap
// to its peak; when the wave ends, the collections that would bring the goal down come
// only every two minutes (the runtime's forced collection), and the free pages between the
// live heap and the old goal stay resident. An operator spends most of its life idle after
// such a wave, so its RSS is the wave's peak rather than what it holds
// (docs/bench/findings.md, "The idle memory release").
//
// A Releaser reads the runtime's metrics at an interval. When the process allocated little
// since the last look (it is idle) and the heap keeps more than Slack beyond the live data,
// it runs debug.FreeOSMemory: one collection, and every free page returned. A busy process
// is left alone: it reuses those pages, and forcing collections would only cost CPU.
package idleheap

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Sample is what a Releaser reads of the runtime at each look.
type Sample struct {
	// Allocated is every byte the heap has allocated since the process started.
	Allocated uint64
	// Live is the heap that the last collection found reachable.
	Live uint64
	// Held is the heap memory a release could give back, with the live data: the heap's
	// objects, live or dead, and its free pages not yet returned. It leaves out the unused
	// part of spans that still hold live objects: no collection frees those, and a heap that
	// has held many small objects keeps more of it than Slack (the manager's heap in use was
	// 1.6 times its live heap at 1000 CRs), which would have made every idle look a release.
	Held uint64
}

// Policy says when a look ends in a release. With its zero value, any allocation counts as
// busy and any free heap is worth giving back.
type Policy struct {
	// Quiet is the most the heap may have allocated since the last look for the process
	// to count as idle: below it, waiting for the runtime's own collection would hold the
	// pages for minutes.
	Quiet uint64
	// Slack is the memory held beyond the live heap worth a collection to give back.
	Slack uint64
}

// Release reports whether, going from sample prev to cur, the process is idle and holds
// enough free heap to give back.
func (p Policy) Release(prev, cur Sample) bool {
	if cur.Allocated-prev.Allocated > p.Quiet {
		return false
	}
	return cur.Held > cur.Live && cur.Held-cur.Live > p.Slack
}

// Default is the policy both processes run with: idle below 4 MiB of allocations per look,
// about one reconcile's worth (the manager allocated 3.4 GB restarting over 1000 CRs,
// docs/bench/memory.md), and a release when more than 16 MiB would go back.
var Default = Policy{Quiet: 4 << 20, Slack: 16 << 20}

// Releaser looks at the runtime every Interval and releases by Policy. It is a
// controller-runtime Runnable that runs on every replica, leader or not.
type Releaser struct {
	Interval time.Duration
	Policy   Policy
	// Read and Free default to the runtime's metrics and debug.FreeOSMemory.
	Read func() Sample
	Free func()
	// Released, if set, is told of each release: the heap held before it and the live heap.
	Released func(held, live uint64)
}

// Start looks at the runtime every Interval until ctx ends.
func (r *Releaser) Start(ctx context.Context) error {
	read, free := r.Read, r.Free
	if read == nil {
		read = ReadRuntime
	}
	if free == nil {
		free = debug.FreeOSMemory
	}
	tick := time.NewTicker(r.Interval)
	defer tick.Stop()
	prev := read()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		cur := read()
		if r.Policy.Release(prev, cur) {
			free()
			if r.Released != nil {
				r.Released(cur.Held, cur.Live)
			}
			// The release's own collection allocates nothing worth counting, but the next
			// look must compare with the heap after it.
			cur = read()
		}
		prev = cur
	}
}

// NeedLeaderElection is false: a standby replica's cache holds memory too.
func (r *Releaser) NeedLeaderElection() bool { return false }

// The runtime/metrics names a Sample is made of.
const (
	allocsName  = "/gc/heap/allocs:bytes"
	liveName    = "/gc/heap/live:bytes"
	objectsName = "/memory/classes/heap/objects:bytes"
	freeName    = "/memory/classes/heap/free:bytes"
)

// ReadRuntime samples the running process's heap.
func ReadRuntime() Sample {
	s := []metrics.Sample{{Name: allocsName}, {Name: liveName}, {Name: objectsName}, {Name: freeName}}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Sample{Allocated: v(0), Live: v(1), Held: v(2) + v(3)}
}
