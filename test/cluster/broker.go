package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// Broker is one slot of the cluster: fixed node id, addresses, data dir and
// proxies; the process behind it comes and goes.
type Broker struct {
	c         *Cluster
	ID        int32
	Addr      string // Kafka listener, also what clients use
	HTTPAddr  string // /readyz, /metrics, /v1/tier/status
	DataDir   string
	LogPath   string // stdout+stderr of every run, appended
	EtcdProxy *Proxy

	mu struct {
		sync.Mutex
		started bool             // started at least once
		proc    *testkit.Process // current or last process
		paused  bool             // SIGSTOPped
		cut     bool
	}
}

// Started says the broker was started at least once.
func (b *Broker) Started() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.started
}

// Running says a process is alive (possibly SIGSTOPped).
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runningLocked()
}

// REQUIRES: b.mu held.
func (b *Broker) runningLocked() bool {
	return b.mu.proc != nil && !b.mu.proc.HasExited()
}

// Paused says the process is SIGSTOPped.
func (b *Broker) Paused() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.paused && b.runningLocked()
}

// IsCut says the broker's links are cut.
func (b *Broker) IsCut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mu.cut
}

// Log returns everything the broker printed (all runs).
func (b *Broker) Log() string {
	data, _ := os.ReadFile(b.LogPath)
	return string(data)
}

// start launches the process and waits for /readyz and the serving line.
func (b *Broker) start() {
	t := b.c.t
	t.Helper()
	if b.Running() {
		t.Fatalf("broker %d already running", b.ID)
	}
	proc, err := testkit.StartProcess(testkit.ProcessConfig{
		Bin: b.c.bin, Args: b.c.args(b), Env: testkit.EnvWithout("STRATA_"), LogPath: b.LogPath,
	})
	if err != nil {
		t.Fatalf("start broker %d: %v", b.ID, err)
	}
	b.mu.Lock()
	b.mu.started, b.mu.proc, b.mu.paused = true, proc, false
	b.mu.Unlock()
	if err := b.waitReady(proc.Exited()); err != nil {
		t.Fatalf("broker %d not ready: %v\n%s", b.ID, err, testkit.Tail(b.Log(), logTailBytes))
	}
}

func (b *Broker) waitReady(exited <-chan struct{}) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(readyTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("process exited during start")
		default:
		}
		if resp, err := client.Get("http://" + b.HTTPAddr + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(b.Log(), "strata: serving kafka on") {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready within %v", readyTimeout)
}

// signal sends sig to the running process.
func (b *Broker) signal(sig syscall.Signal) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.runningLocked() {
		return fmt.Errorf("broker %d is not running", b.ID)
	}
	return b.mu.proc.Signal(sig)
}

// waitExit waits for the current process to be reaped.
func (b *Broker) waitExit(timeout time.Duration) error {
	b.mu.Lock()
	proc := b.mu.proc
	b.mu.Unlock()
	if proc == nil {
		return nil
	}
	if proc.Wait(timeout) != nil {
		return fmt.Errorf("broker %d did not exit within %v", b.ID, timeout)
	}
	return nil
}

// kill SIGKILLs the process if it runs and waits for it (cleanup: no t).
func (b *Broker) kill() {
	if b.signal(syscall.SIGKILL) == nil {
		_ = b.waitExit(exitTimeout)
	}
}

// ExitCode is the last process's exit code (-1 while running or killed).
func (b *Broker) ExitCode() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.proc == nil {
		return -1
	}
	return b.mu.proc.ExitCode()
}

// MetricSum adds every sample of a Prometheus metric on /metrics.
func (b *Broker) MetricSum(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.HTTPAddr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum, nil
}
