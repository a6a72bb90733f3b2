package framework

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is one of the operator's binaries running as a child of the test process, its
// output in a log file under Env.LogDir.
type Process struct {
	Name     string
	Log      string
	logStart int64
	cmd      *exec.Cmd
	done     chan struct{}
}

// Output is what the process has logged so far.
func (p *Process) Output() (string, error) {
	f, err := os.Open(p.Log)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(p.logStart, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// Run starts bin/<binary> with args in the repository root, against the test cluster, with
// the operator's identity (OperatorKubeconfig). name tells apart several processes of one
// binary (for example a leader and a standby).
func (e *Env) Run(name, binary string, args ...string) (*Process, error) {
	return e.RunWithEnv(name, binary, nil, args...)
}

// RunWithEnv is Run with env (NAME=value) added to the suite's environment.
func (e *Env) RunWithEnv(name, binary string, env []string, args ...string) (*Process, error) {
	path := filepath.Join(e.Root, "bin", binary)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s is not built (make build): %w", path, err)
	}
	logPath := filepath.Join(e.LogDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = e.Root
	cmd.Env = append(append(os.Environ(), env...), "KUBECONFIG="+e.OperatorKubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A test binary that panics or is killed takes its operator processes with it: an
	// orphaned operator would go on reconciling under the next run's feet.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// The log is appended to; Output reads what this run writes.
	start, err := logFile.Seek(0, io.SeekEnd)
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &Process{Name: name, Log: logPath, logStart: start, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop ends the process gracefully (SIGTERM), and kills it if it has not ended in 15 s.
func (p *Process) Stop() { p.StopWithin(15 * time.Second) }

// StopWithin ends the process as the kubelet ends a container: SIGTERM, then SIGKILL if it
// has not ended within grace.
func (p *Process) StopWithin(grace time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
	}
}

// Kill ends the process at once (SIGKILL), as a crash would.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// ExitCode is the process's exit status once it has ended: -1 while it runs, or when a
// signal ended it.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Kubectl runs bin/kubectl against the test cluster, as a user would, and returns its
// combined output.
func (e *Env) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.Root, "bin", "kubectl"), append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return string(out), nil
}
