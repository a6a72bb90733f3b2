package renderbound

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"transwarp.io/tos/warpdrive-operator/internal/rollout"
)

// maxVerdicts is how many verdicts a checker remembers before it forgets them all: 32 bytes
// and an error each, so a fleet of 10,000 CRs, each with its values, costs about 1 MiB.
const maxVerdicts = 50000

// maxWorkerCharts is how many charts one worker keeps; past it the worker is replaced.
const maxWorkerCharts = 64

// Input is one render the manager is about to make.
type Input struct {
	Chart   *chart.Chart
	Values  map[string]any
	Release chartutil.ReleaseOptions
}

// Checker renders inputs in workers within its bounds. Its zero value is not usable: see
// NewChecker. Safe for concurrent use.
type Checker struct {
	bounds Bounds
	exe    string
	slots  chan *worker // Workers slots; nil for one not started yet or gone

	mu       sync.Mutex
	verdicts map[[32]byte]error // nil: within bounds

	// refused counts the verdicts of each bound, for the manager's metrics.
	refused func(bound string)
}

// NewChecker returns a checker whose workers run this process's own executable. refused, if
// not nil, is called once for each new verdict over a bound, with the bound.
func NewChecker(b Bounds, refused func(bound string)) (*Checker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the render workers run this executable: %w", err)
	}
	if b.Workers < 1 {
		b.Workers = 1
	}
	c := &Checker{bounds: b, exe: exe, slots: make(chan *worker, b.Workers), verdicts: map[[32]byte]error{}, refused: refused}
	for range b.Workers {
		c.slots <- nil
	}
	return c, nil
}

// Check renders in a worker and returns an *Exceeded if the render passed a bound, nil if it
// stayed within them (or failed on its own, which Helm's render then reports). The verdict on
// the same chart, values and release is remembered. Any other error (ctx done, a worker that
// cannot start) is no verdict.
func (c *Checker) Check(ctx context.Context, in Input) error {
	chartKey := rollout.Digest(in.Chart)
	key, err := inputKey(chartKey, in)
	if err != nil {
		return err
	}
	c.mu.Lock()
	verdict, known := c.verdicts[key]
	c.mu.Unlock()
	if known {
		return verdict
	}

	var w *worker
	select {
	case w = <-c.slots:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { c.slots <- w }()
	if w == nil || len(w.charts) >= maxWorkerCharts {
		w.stop()
		if w, err = c.start(); err != nil {
			return err
		}
	}
	verdict, err = w.render(ctx, chartKey, in, c.bounds)
	if !w.alive {
		w = nil
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	if len(c.verdicts) >= maxVerdicts {
		clear(c.verdicts)
	}
	c.verdicts[key] = verdict
	c.mu.Unlock()
	var ex *Exceeded
	if errors.As(verdict, &ex) && c.refused != nil {
		c.refused(ex.Bound)
	}
	return verdict
}

// inputKey is the digest of what a render depends on.
func inputKey(chartKey string, in Input) ([32]byte, error) {
	vals, err := json.Marshal(in.Values) // map keys come out sorted
	if err != nil {
		return [32]byte{}, fmt.Errorf("values to render: %w", err)
	}
	rel, _ := json.Marshal(in.Release) // plain data: it always marshals
	h := sha256.New()
	for _, part := range [][]byte{[]byte(chartKey), rel, vals} {
		h.Write(part)
		h.Write([]byte{0})
	}
	var key [32]byte
	h.Sum(key[:0])
	return key, nil
}

// worker is one worker process and the manager's ends of its pipes.
type worker struct {
	cmd     *exec.Cmd
	enc     *json.Encoder
	dec     *json.Decoder
	toW     *os.File
	fromW   *os.File
	stderr  *head
	charts  map[string]bool // the charts it was sent
	peakRSS int64           // the worker's peak resident memory after its last render
	alive   bool
	exited  chan struct{} // closed once cmd.Wait returned
	waitErr error
}

func (c *Checker) start() (*worker, error) {
	reqR, reqW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	repR, repW, err := os.Pipe()
	if err != nil {
		reqR.Close()
		reqW.Close()
		return nil, err
	}
	w := &worker{stderr: &head{max: 4096}, charts: map[string]bool{}, toW: reqW, fromW: repR, exited: make(chan struct{})}
	w.cmd = exec.Command(c.exe)
	w.cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", workerEnv, c.bounds.Memory, c.bounds.Output))
	w.cmd.ExtraFiles = []*os.File{reqR, repW} // fds 3 and 4: requestFD, replyFD
	w.cmd.Stderr = w.stderr
	// A worker dies with the manager, even in the middle of a render that would take hours.
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = w.cmd.Start()
	reqR.Close() // the worker's ends, now its own
	repW.Close()
	if err != nil {
		reqW.Close()
		repR.Close()
		return nil, fmt.Errorf("starting a render worker: %w", err)
	}
	go func() { w.waitErr = w.cmd.Wait(); close(w.exited) }()
	w.enc, w.dec, w.alive = json.NewEncoder(reqW), json.NewDecoder(repR), true
	return w, nil
}

// render sends one request and waits for the reply, the deadline or ctx, whichever comes
// first. The worker is killed (and alive false) past the deadline, on ctx, and when it broke
// a bound on its way.
func (w *worker) render(ctx context.Context, chartKey string, in Input, b Bounds) (verdict, err error) {
	req := request{ChartKey: chartKey, Values: in.Values, Release: in.Release}
	if !w.charts[chartKey] {
		req.Chart = toWire(in.Chart)
	}
	done := make(chan error, 1)
	var rep reply
	go func() {
		if err := w.enc.Encode(req); err != nil {
			done <- err
			return
		}
		done <- w.dec.Decode(&rep)
	}()
	timer := time.NewTimer(b.Timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err == nil {
			w.charts[chartKey], w.peakRSS = true, rep.PeakRSS
			switch {
			case rep.Exceeded == BoundOutput:
				return &Exceeded{Bound: BoundOutput, Limit: ByteSize(b.Output), Flag: "--render-max-output",
					Detail: fmt.Sprintf("%d bytes rendered", rep.OutputBytes)}, nil
			case rep.Exceeded != "":
				return nil, fmt.Errorf("render worker: unknown bound %q", rep.Exceeded)
			}
			return nil, nil
		}
		return w.died(b)
	case <-timer.C:
		w.stop()
		return &Exceeded{Bound: BoundTime, Limit: b.Timeout.String(), Flag: "--render-timeout"}, nil
	case <-ctx.Done():
		w.stop()
		return nil, ctx.Err()
	}
}

// died tells why the worker stopped answering. The Go runtime says "out of memory" when an
// allocation passes the address-space limit, and the kernel's OOM killer kills with SIGKILL.
func (w *worker) died(b Bounds) (verdict, err error) {
	w.stop()
	said := w.stderr.String()
	memory := &Exceeded{Bound: BoundMemory, Limit: ByteSize(b.Memory), Flag: "--render-max-memory"}
	var exit *exec.ExitError
	switch {
	case strings.Contains(said, "out of memory"), strings.Contains(said, "stack exceeds"):
		return memory, nil
	case errors.As(w.waitErr, &exit) && exit.Sys().(syscall.WaitStatus).Signaled():
		return memory, nil // SIGKILL that the checker did not send: the OOM killer's
	case strings.Contains(said, "fatal error") || strings.Contains(said, "panic"):
		return &Exceeded{Bound: BoundCrash, Flag: "a crash is never let through", Detail: lastLine(said)}, nil
	}
	return nil, fmt.Errorf("render worker stopped (%v): %s", w.waitErr, lastLine(said))
}

// stop kills the worker, if it runs, and waits for it. Safe on a nil worker.
func (w *worker) stop() {
	if w == nil || !w.alive {
		return
	}
	w.alive = false
	w.toW.Close()
	_ = w.cmd.Process.Kill()
	<-w.exited
	w.fromW.Close()
}

// Close stops the workers, once each has finished the render it is making. The checker
// starts new ones if it is used again.
func (c *Checker) Close() {
	stopped := make([]*worker, 0, cap(c.slots))
	for range cap(c.slots) {
		w := <-c.slots
		w.stop()
		stopped = append(stopped, nil)
	}
	for _, w := range stopped {
		c.slots <- w
	}
}

// lastLine is the line of what a worker said that names its error, else its last.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.Contains(l, "error") || strings.Contains(l, "panic") {
			return l
		}
	}
	return lines[len(lines)-1]
}

// head keeps the first max bytes a worker writes to its standard error: the Go runtime's
// fatal error comes first, its goroutine dump after.
type head struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *head) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *head) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

var _ io.Writer = (*head)(nil)
