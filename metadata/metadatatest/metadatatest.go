// Package metadatatest starts etcd servers for tests: the embedded one
// (StartEmbedded) and the real etcd binary of the machine (StartExternal),
// so that every package can run its tests against both, as production does.
package metadatatest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
)

// StartEmbedded starts an embedded etcd in a temporary directory, closed at
// cleanup, and returns its client endpoints.
func StartEmbedded(t testing.TB) []string {
	t.Helper()
	e, err := metadata.StartEmbedded(metadata.EmbeddedConfig{
		Dir:    filepath.Join(t.TempDir(), "etcd"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return e.Endpoints()
}

// StartExternal runs the etcd binary found on PATH with a temporary data dir
// and free loopback ports, waits until it answers, and kills it at cleanup.
// Without the binary the test is skipped, or fails when CI=true (CI must
// not silently skip the external-etcd half of the suite).
func StartExternal(t testing.TB) []string {
	t.Helper()
	return StartExternalProcess(t).Endpoints
}

// External is a running etcd process.
type External struct {
	Endpoints []string
	process   *os.Process
	stop      func()
}

// Kill ends the process (SIGKILL) and waits until it is gone: its ports
// are free again, and connections to them are refused.
func (e *External) Kill() { e.stop() }

// Pause stops the process (SIGSTOP): it holds its sockets but answers
// nothing, like a hung or partitioned server.
func (e *External) Pause() error { return e.process.Signal(syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (e *External) Resume() error { return e.process.Signal(syscall.SIGCONT) }

// StartExternalProcess is StartExternal returning the process handle.
func StartExternalProcess(t testing.TB) *External {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		testkit.Missing(t, "etcd binary not found on PATH (install Debian's etcd-server): %v", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a chosen port may be taken before etcd binds it
		e, err := startExternalOnce(t, bin)
		if err == nil {
			return e
		}
		lastErr = err
	}
	t.Fatalf("start external etcd: %v", lastErr)
	return nil
}

func startExternalOnce(t testing.TB, bin string) (*External, error) {
	clientURL, peerURL := "http://"+testkit.FreeAddr(t), "http://"+testkit.FreeAddr(t)
	cmd := exec.Command(bin,
		"--name", "test",
		"--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "test="+peerURL,
		"--logger", "zap", "--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	output := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = output, output
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Kill() // SIGKILL also ends a paused process
		<-exited
	}
	if err := waitHealthy(clientURL, exited, 30*time.Second); err != nil {
		stop()
		return nil, fmt.Errorf("%w; etcd output:\n%s", err, output.String())
	}
	t.Cleanup(stop)
	return &External{Endpoints: []string{clientURL}, process: cmd.Process, stop: stop}, nil
}

// waitHealthy polls etcd's /health until it reports healthy, etcd exits, or
// the timeout passes.
func waitHealthy(clientURL string, exited <-chan struct{}, timeout time.Duration) error {
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

// syncBuffer collects a process's output; the process writes while a
// failing test may read.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 { // keep the first MiB: enough to diagnose
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
