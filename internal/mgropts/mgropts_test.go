package mgropts

import (
	"flag"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// The flags give the manager options both processes rely on: metrics behind authentication
// with --metrics-secure, a Lease released on exit and tried often, controllers warmed up
// before the Lease.
func TestManagerOptionsFromFlags(t *testing.T) {
	var o Options
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs, Flags{MetricsAddr: ":1", ProbeAddr: ":2", LeaderElectionID: "lease"})
	if err := fs.Parse([]string{"--metrics-secure", "--leader-elect", "--leader-election-namespace=ns", "--pprof-bind-address=127.0.0.1:6060"}); err != nil {
		t.Fatal(err)
	}
	m := o.Manager()
	if m.Metrics.BindAddress != ":1" || !m.Metrics.SecureServing || m.Metrics.FilterProvider == nil {
		t.Errorf("metrics options %+v", m.Metrics)
	}
	if m.PprofBindAddress != "127.0.0.1:6060" {
		t.Errorf("pprof address %q", m.PprofBindAddress)
	}
	if m.HealthProbeBindAddress != ":2" {
		t.Errorf("probe address %q", m.HealthProbeBindAddress)
	}
	if !m.LeaderElection || m.LeaderElectionID != "lease" || m.LeaderElectionNamespace != "ns" ||
		!m.LeaderElectionReleaseOnCancel || m.LeaderElectionResourceLock != "leases" {
		t.Errorf("leader election options %+v", m)
	}
	// A candidate tries the Lease more often than controller-runtime's default of 2 s, and the
	// renew deadline (controller-runtime's 10 s) still exceeds the period with its jitter, as
	// client-go requires.
	if r := m.RetryPeriod; r == nil || *r >= 2*time.Second || float64(10*time.Second) <= 1.2*float64(*r) {
		t.Errorf("leader election retry period %v", r)
	}
	if m.Controller.EnableWarmup == nil || !*m.Controller.EnableWarmup {
		t.Error("controllers do not warm up before their process is leader")
	}

	o = Options{}
	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	o.BindFlags(fs, Flags{})
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if m := o.Manager(); m.Metrics.FilterProvider != nil || m.LeaderElection || m.PprofBindAddress != "0" {
		t.Errorf("defaults: %+v", m)
	}
}

// The soft memory limit is a share of the container's, unless GOMEMLIMIT sets one or there
// is no limit.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(MemoryLimitEnv, "536870912") // 512Mi, of which 0.8
	if got, want := SetMemoryLimit(), int64(429496729); got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("limit %d, want %d", got, want)
	}
	for _, v := range []string{"", "0", "junk"} {
		t.Setenv(MemoryLimitEnv, v)
		if got := SetMemoryLimit(); got != 0 {
			t.Errorf("%s=%q: limit %d, want none", MemoryLimitEnv, v, got)
		}
	}
	t.Setenv(MemoryLimitEnv, "536870912")
	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := SetMemoryLimit(); got != 0 {
		t.Errorf("with GOMEMLIMIT: limit %d, want the runtime's", got)
	}
}

// Heap profiling stays on only where a pprof endpoint serves it.
func TestStopUnservedProfiling(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	for _, tc := range []struct {
		addr string
		on   bool
	}{{"0", false}, {"", false}, {"127.0.0.1:6060", true}} {
		runtime.MemProfileRate = 512 * 1024
		(&Options{PprofAddr: tc.addr}).StopUnservedProfiling()
		if on := runtime.MemProfileRate != 0; on != tc.on {
			t.Errorf("--pprof-bind-address=%q: heap profiling on = %v, want %v", tc.addr, on, tc.on)
		}
	}
}

// --gc-percent sets the collector's target, unless GOGC does.
func TestSetGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv("GOGC", "")
	(&Options{GCPercent: 200}).SetGCPercent()
	if got := debug.SetGCPercent(100); got != 200 {
		t.Errorf("--gc-percent=200: the target is %d", got)
	}
	t.Setenv("GOGC", "50")
	(&Options{GCPercent: 200}).SetGCPercent()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("--gc-percent=200 with GOGC set: the target is %d, want GOGC's (the runtime read it at start)", got)
	}
}
