// Package heaptest measures, for the tests of cache transforms, how much live heap an object
// holds: the figure a transform exists to shrink.
package heaptest

import "runtime"

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
