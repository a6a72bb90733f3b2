package renderbound

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// workerEnv starts a process of this binary as a worker instead of what it would be: its
// value is "<memory>,<output>", the bounds in bytes. Every binary that links this package
// can serve as a worker, the manager and the tests that run the operator alike, so the
// checker needs no second executable.
const workerEnv = "WARPDRIVE_RENDER_WORKER"

// The worker's ends of the two pipes, passed as the command's ExtraFiles: its standard
// output stays free for whatever a library may print.
const (
	requestFD = 3
	replyFD   = 4
)

// init turns the process into a worker when workerEnv says so; it never returns then.
func init() {
	spec, ok := os.LookupEnv(workerEnv)
	if !ok {
		return
	}
	memory, output, err := parseWorkerEnv(spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "render worker:", err)
		os.Exit(2)
	}
	limitSelf(memory)
	serve(os.NewFile(requestFD, "requests"), os.NewFile(replyFD, "replies"), output)
	os.Exit(0)
}

func parseWorkerEnv(spec string) (memory, output int64, err error) {
	m, o, ok := strings.Cut(spec, ",")
	if !ok {
		return 0, 0, fmt.Errorf("%s=%q: want <memory>,<output>", workerEnv, spec)
	}
	if memory, err = strconv.ParseInt(m, 10, 64); err != nil {
		return 0, 0, err
	}
	output, err = strconv.ParseInt(o, 10, 64)
	return memory, output, err
}

// limitSelf bounds the worker before it reads a request.
//   - Address space: what it has now (the Go runtime reserves much more than it uses) plus
//     memory. An allocation past it fails, and the Go runtime dies of it at once, instead of
//     the kernel killing whichever process of the container is largest.
//   - The collector aims at three quarters of memory, so that garbage does not count against
//     a render that holds less.
//   - Goroutine stacks at 64 MiB: a template recursion dies here, not at Go's 1 GB.
//   - The OOM killer takes the worker first. Its CPU is not lowered: the render that waits
//     for it is the manager's own work, and a niced worker starved behind a loaded API server
//     slowed every reconcile; a render's time is bounded by the deadline instead.
func limitSelf(memory int64) {
	if vm := vmSize(); vm > 0 && memory > 0 {
		lim := uint64(vm + memory)
		_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: lim, Max: lim})
		debug.SetMemoryLimit(memory * 3 / 4)
	}
	debug.SetMaxStack(64 << 20)
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
}

// vmSize is the process's address space in bytes (VmSize of /proc/self/status), 0 if unknown.
func vmSize() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// serve renders one request at a time until its requests end.
func serve(requests, replies *os.File, output int64) {
	dec := json.NewDecoder(bufio.NewReaderSize(requests, 1<<16))
	enc := json.NewEncoder(replies)
	charts := map[string]*wireChart{}
	for {
		var req request
		if err := dec.Decode(&req); err != nil {
			return // the manager closed the pipe, or went away
		}
		if req.Chart != nil {
			charts[req.ChartKey] = req.Chart
		}
		var rep reply
		if w := charts[req.ChartKey]; w == nil {
			rep.Err = "render worker: no chart " + req.ChartKey
		} else {
			rep = render(w, req, output)
		}
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
			rep.PeakRSS = ru.Maxrss << 10 // kilobytes on Linux
		}
		if err := enc.Encode(rep); err != nil {
			return
		}
	}
}

// render renders as Helm's install and upgrade do before they apply anything: subcharts
// enabled by their conditions, values coalesced with the chart's, then the templates.
func render(w *wireChart, req request, output int64) reply {
	c := fromWire(w)
	if req.Values == nil {
		req.Values = map[string]any{}
	}
	if err := chartutil.ProcessDependenciesWithMerge(c, req.Values); err != nil {
		return reply{Err: err.Error()}
	}
	vals, err := chartutil.ToRenderValues(c, req.Values, req.Release, nil)
	if err != nil {
		return reply{Err: err.Error()}
	}
	files, err := engine.Engine{}.Render(c, vals)
	if err != nil {
		return reply{Err: err.Error()}
	}
	var n int64
	for _, f := range files {
		n += int64(len(f))
	}
	rep := reply{OutputBytes: n}
	if output > 0 && n > output {
		rep.Exceeded = BoundOutput
	}
	return rep
}
