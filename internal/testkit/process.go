package testkit

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// ProcessConfig says how to start a child process.
type ProcessConfig struct {
	Bin  string
	Args []string
	// Env is the child's whole environment; nil inherits the test's.
	Env []string
	// LogPath receives the child's stdout and stderr, appended after a
	// "=== <time> start: <command line>" line, so one file holds every run
	// of a server that a test restarts.
	LogPath string
}

// Process is one run of a child process. The kernel SIGKILLs it when the
// test binary dies (a go test timeout, say), so no server outlives the run.
// Its methods may be called from any goroutine.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has been reaped
	err    error         // Wait's result; written before exited is closed
}

// StartProcess starts cfg's process.
func StartProcess(cfg ProcessConfig) (*Process, error) {
	f, err := os.OpenFile(cfg.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s start: %s %s\n", time.Now().Format(time.RFC3339Nano), cfg.Bin, strings.Join(cfg.Args, " "))
	cmd := exec.Command(cfg.Bin, cfg.Args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = cfg.Env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the process has exited and been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// HasExited says the process has exited and been reaped.
func (p *Process) HasExited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Err is the exit error (nil for exit code 0), or nil while it runs.
func (p *Process) Err() error {
	if !p.HasExited() {
		return nil
	}
	return p.err
}

// ExitCode is the exit code, or -1 while it runs or when a signal ended it.
func (p *Process) ExitCode() int {
	if !p.HasExited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("pid %d did not exit within %v", p.Pid(), timeout)
	}
}

// Stop sends SIGTERM and returns the exit error (nil for exit code 0). A
// process still running after timeout is killed and Stop says so.
func (p *Process) Stop(timeout time.Duration) error {
	if p.HasExited() {
		return p.err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := p.Wait(timeout); err != nil {
		p.Kill(timeout)
		return fmt.Errorf("did not exit within %v of SIGTERM", timeout)
	}
	return p.err
}

// Kill sends SIGKILL and waits up to timeout for the process to go.
func (p *Process) Kill(timeout time.Duration) {
	if p.HasExited() {
		return
	}
	_ = p.Signal(syscall.SIGKILL)
	_ = p.Wait(timeout)
}

// EnvWithout is the test's environment without the variables whose names
// start with prefix, so that only the harness configures a child (for
// example "STRATA_" for a broker).
func EnvWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}

// WaitHTTP200 polls url until it answers 200 OK, giving up after timeout or
// as soon as alive (if not nil) returns an error, such as "the server
// exited".
func WaitHTTP200(url string, timeout time.Duration, alive func() error) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for time.Now().Before(deadline) {
		if alive != nil {
			if err := alive(); err != nil {
				return err
			}
		}
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("timeout after %v: %v", timeout, last)
}

// Tail is the last n bytes of s, for a log in a failure message.
func Tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
