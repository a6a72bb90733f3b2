// Package heaptest measures, for the tests of cache transforms, how much live heap an object
// holds: the figure a transform exists to shrink.
package heaptest

import (
	"fmt"
	"runtime"
	"strings"
)

// PerObject is the live heap that each of n objects made by mk holds, in bytes: the heap
// after a collection with all n kept, less the heap before, divided by n.
func PerObject(n int, mk func(i int) any) int64 {
	live := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	keep := make([]any, n)
	before := live()
	for i := range keep {
		keep[i] = mk(i)
	}
	after := live()
	runtime.KeepAlive(keep)
	return (after - before) / int64(n)
}

// FleetMember makes the i-th of a fleet from one of the benchmark's objects read back from
// the local cluster at 10,000 CRs (sidecar/internal/workloadstatus/testdata: app-0000, its
// Deployment): its own name, UIDs, resource version and times, as a cache would hold them.
// A fleet of copies of one object would share every interned name and overstate what
// interning saves.
func FleetMember(sample []byte, i int) []byte {
	return []byte(strings.NewReplacer(
		"0000", fmt.Sprintf("%04d", i),
		"1ba6bfb8", fmt.Sprintf("%08x", i),
		"ffc3c75b", fmt.Sprintf("%08x", 1<<20+i),
		`"808"`, fmt.Sprintf(`"%d"`, 1000+i),
		`"675"`, fmt.Sprintf(`"%d"`, 100000+i),
		"03:00:30Z", fmt.Sprintf("03:%02d:%02dZ", i/60%60, i%60),
		"03:00:31Z", fmt.Sprintf("04:%02d:%02dZ", i/60%60, i%60),
	).Replace(string(sample)))
}
