package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// etcdReadyTimeout bounds an etcd start to a healthy /health.
const etcdReadyTimeout = 30 * time.Second

// EtcdServer is the cluster's etcd: one member whose data dir and ports are
// fixed at Start, so that it can be killed and started again and the
// brokers (through their etcd proxies) find the same server with the same
// data. Its ports come from the harness's fixed range, below the ephemeral
// one, so no client connection can take them while etcd is down.
type EtcdServer struct {
	Endpoints []string // client URLs, "http://127.0.0.1:port"

	bin, dataDir, logPath string
	clientURL, peerURL    string

	mu struct {
		sync.Mutex
		proc *testkit.Process // current or last process; nil before the first start
	}
}

// startEtcd starts etcd in dir, skipping the test when the binary is
// missing (failing it when CI=true); cleanup kills it.
func startEtcd(t testing.TB, dir string) *EtcdServer {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testkit.Missing(t, "etcd binary not found on PATH (install Debian's etcd-server): %v", err)
	}
	e := &EtcdServer{bin: bin, dataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "etcd.log")}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e.clientURL, e.peerURL = "http://"+testkit.FreeAddr(t), "http://"+testkit.FreeAddr(t)
	e.Endpoints = []string{e.clientURL}
	t.Cleanup(func() { _ = e.Kill() })
	if err := e.Start(); err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	return e
}

// Running says the etcd process is alive (possibly SIGSTOPped).
func (e *EtcdServer) Running() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runningLocked()
}

// REQUIRES: e.mu held.
func (e *EtcdServer) runningLocked() bool {
	return e.mu.proc != nil && !e.mu.proc.HasExited()
}

// Start runs etcd on its data dir and ports and waits until it is healthy.
// A first start creates the member; later ones recover it from the data
// dir (etcd ignores the --initial-* flags then).
func (e *EtcdServer) Start() error {
	exited, err := e.launch()
	if err != nil {
		return err
	}
	if err := waitEtcdHealthy(e.clientURL, exited, etcdReadyTimeout); err != nil {
		_ = e.Kill()
		return fmt.Errorf("%w; etcd log:\n%s", err, tailFile(e.logPath, logTailBytes))
	}
	return nil
}

// launch starts the process and returns the channel closed when it exits.
func (e *EtcdServer) launch() (<-chan struct{}, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runningLocked() {
		return nil, fmt.Errorf("etcd already running")
	}
	proc, err := testkit.StartProcess(testkit.ProcessConfig{Bin: e.bin, LogPath: e.logPath, Args: []string{
		"--name", "test",
		"--data-dir", e.dataDir,
		"--listen-client-urls", e.clientURL, "--advertise-client-urls", e.clientURL,
		"--listen-peer-urls", e.peerURL, "--initial-advertise-peer-urls", e.peerURL,
		"--initial-cluster", "test=" + e.peerURL,
		"--logger", "zap", "--log-level", "warn",
	}})
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", e.bin, err)
	}
	e.mu.proc = proc
	return proc.Exited(), nil
}

// Kill SIGKILLs etcd (an outage, not a shutdown) and waits for the exit.
// Killing a stopped server does nothing.
func (e *EtcdServer) Kill() error {
	e.mu.Lock()
	proc, running := e.mu.proc, e.runningLocked()
	e.mu.Unlock()
	if !running {
		return nil
	}
	_ = proc.Signal(syscall.SIGKILL) // also ends a SIGSTOPped process
	if proc.Wait(exitTimeout) != nil {
		return fmt.Errorf("etcd did not exit within %v of SIGKILL", exitTimeout)
	}
	return nil
}

// waitEtcdHealthy polls /health until etcd reports healthy, exits, or the
// timeout passes.
func waitEtcdHealthy(clientURL string, exited <-chan struct{}, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"true"`)) {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("etcd exited before becoming healthy")
		case <-ctx.Done():
			return fmt.Errorf("etcd not healthy after %v", timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tailFile returns the last n bytes of a file ("" if unreadable).
func tailFile(path string, n int) string {
	data, _ := os.ReadFile(path)
	return testkit.Tail(string(data), n)
}
