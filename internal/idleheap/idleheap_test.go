package idleheap

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPolicyRelease(t *testing.T) {
	p := Policy{Quiet: 4 << 20, Slack: 16 << 20}
	const mib = 1 << 20
	for _, tc := range []struct {
		name      string
		prev, cur Sample
		want      bool
	}{
		{"idle, 40 MiB free", Sample{Allocated: 100 * mib}, Sample{Allocated: 101 * mib, Live: 30 * mib, Held: 70 * mib}, true},
		{"busy: allocating", Sample{Allocated: 100 * mib}, Sample{Allocated: 200 * mib, Live: 30 * mib, Held: 70 * mib}, false},
		{"idle, little free", Sample{Allocated: 100 * mib}, Sample{Allocated: 100 * mib, Live: 30 * mib, Held: 40 * mib}, false},
		{"idle, exactly the slack", Sample{}, Sample{Live: 30 * mib, Held: 46 * mib}, false},
		{"idle, at the quiet bound", Sample{}, Sample{Allocated: 4 * mib, Live: 30 * mib, Held: 47 * mib}, true},
		{"live above held (a collection between the reads)", Sample{}, Sample{Live: 50 * mib, Held: 40 * mib}, false},
	} {
		if got := p.Release(tc.prev, tc.cur); got != tc.want {
			t.Errorf("%s: Release = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestReleaserLooks states, for a sequence of samples, at which looks the releaser frees.
func TestReleaserLooks(t *testing.T) {
	const mib = 1 << 20
	samples := []Sample{
		{Allocated: 0, Live: 10 * mib, Held: 20 * mib},          // start
		{Allocated: 500 * mib, Live: 40 * mib, Held: 120 * mib}, // wave: busy
		{Allocated: 501 * mib, Live: 30 * mib, Held: 120 * mib}, // idle, 90 MiB held beyond live: release
		{Allocated: 501 * mib, Live: 30 * mib, Held: 32 * mib},  // read again after the release
		{Allocated: 502 * mib, Live: 30 * mib, Held: 33 * mib},  // idle, nothing to give back
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reads, frees []int
	r := &Releaser{
		Interval: time.Millisecond,
		Policy:   Default,
		Read: func() Sample {
			i := len(reads)
			reads = append(reads, i)
			if i == len(samples)-1 {
				cancel()
			}
			return samples[min(i, len(samples)-1)]
		},
		Free: func() { frees = append(frees, len(reads)-1) },
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if len(frees) != 1 || frees[0] != 2 {
		t.Fatalf("freed after reads %v, want only after read 2 (the first idle look after the wave)", frees)
	}
}

var sink [][]byte

// TestReadRuntimeAndRelease checks the metric names against the running runtime: garbage
// left by a burst shows as held beyond live, and a release gives it back.
func TestReadRuntimeAndRelease(t *testing.T) {
	runtime.GC()
	for i := 0; i < 64; i++ {
		sink = append(sink, make([]byte, 1<<20))
	}
	sink = nil
	runtime.GC() // the 64 MiB are now free pages the heap keeps
	before := ReadRuntime()
	if before.Allocated < 64<<20 || before.Live == 0 {
		t.Fatalf("ReadRuntime = %+v: the metrics were not read", before)
	}
	if before.Held < before.Live+32<<20 {
		t.Fatalf("after dropping 64 MiB the heap holds %d MiB beyond its live %d MiB, want at least 32", (before.Held-before.Live)>>20, before.Live>>20)
	}
	released := false
	r := &Releaser{Policy: Policy{Quiet: 1 << 30, Slack: 16 << 20}, Released: func(uint64, uint64) { released = true }}
	r.Interval = time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_ = r.Start(ctx)
	after := ReadRuntime()
	if !released || after.Held > after.Live+16<<20 {
		t.Fatalf("released=%v; after it the heap holds %d MiB beyond its live %d MiB", released, (after.Held-after.Live)>>20, after.Live>>20)
	}
}

// TestFragmentedHeapIsNotReleasedAgain checks that the part of spans left unused among live
// objects, which no release gives back, does not count as held: a heap of many small objects,
// every other one kept, is released at most once and then left alone.
func TestFragmentedHeapIsNotReleasedAgain(t *testing.T) {
	const n = 1 << 20 // 64 MiB of 64-byte objects
	all := make([]*[64]byte, n)
	for i := range all {
		all[i] = new([64]byte)
	}
	kept := make([]*[64]byte, 0, n/2)
	for i := 0; i < n; i += 2 {
		kept = append(kept, all[i])
	}
	// all is not used below, so the collection that FreeOSMemory runs frees every other object.
	debug.FreeOSMemory()

	s := ReadRuntime()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	if unused := m.HeapInuse - m.HeapAlloc; unused < 24<<20 {
		t.Fatalf("the heap leaves %d MiB of its spans unused, want a fragmented heap of at least 24", unused>>20)
	}
	// Live and objects are counted a little differently: Held may be a few bytes below Live.
	if s.Held > s.Live+8<<20 {
		t.Errorf("right after a release, %d MiB held beyond the live %d MiB: the unused part of spans counts as held",
			(s.Held-s.Live)>>20, s.Live>>20)
	}
	if Default.Release(s, ReadRuntime()) {
		t.Error("an idle, fragmented heap right after a release is released again")
	}
	runtime.KeepAlive(kept)
}
