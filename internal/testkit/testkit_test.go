package testkit

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of ending
// the test; like the real ones, both end the calling goroutine.
type recorder struct {
	testing.TB
	mu      sync.Mutex
	fatal   string
	skipped string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Fatal(args ...any)         { r.Fatalf("%s", fmt.Sprint(args...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.end(&r.fatal, fmt.Sprintf(f, a...)) }
func (r *recorder) Skipf(f string, a ...any)  { r.end(&r.skipped, fmt.Sprintf(f, a...)) }

func (r *recorder) end(field *string, msg string) {
	r.mu.Lock()
	*field = msg
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own, since Fatalf ends it.
func (r *recorder) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
}

func TestWaitFor(t *testing.T) {
	calls := 0
	WaitFor(t, time.Second, "third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
	r := &recorder{TB: t}
	r.run(func(tb testing.TB) { WaitFor(tb, 20*time.Millisecond, "never", func() bool { return false }) })
	if !strings.Contains(r.fatal, "waiting for never") {
		t.Fatalf("fatal message %q", r.fatal)
	}
}

func TestMissingFailsInCI(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		r.run(func(tb testing.TB) { NeedBinary(tb, "no-such-tool-strata") })
		if failed := r.fatal != ""; failed != (ci == "true") || (r.skipped != "") == failed {
			t.Errorf("CI=%q: fatal %q, skipped %q", ci, r.fatal, r.skipped)
		}
	}
}

func TestFreeAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		addr := FreeAddr(t)
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		if seen[addr] || port < fixedPortLow || port >= fixedPortHigh {
			t.Fatalf("FreeAddr returned %s (seen before: %v)", addr, seen[addr])
		}
		seen[addr] = true
	}
}

// TestFreePortsBelowEphemeralRange checks that every port of a range is
// below the kernel's ephemeral range, free, and never handed out twice, also
// interleaved with FreeAddr.
func TestFreePortsBelowEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		base := FreePorts(t, 3)
		for p := base; p < base+3; p++ {
			if seen[p] || p < fixedPortLow || p >= fixedPortHigh || !portFree(p) {
				t.Fatalf("FreePorts gave %d..%d; port %d seen before %v, or outside %d-%d, or taken",
					base, base+2, p, seen[p], fixedPortLow, fixedPortHigh)
			}
			seen[p] = true
		}
		_, p, _ := net.SplitHostPort(FreeAddr(t))
		port, _ := strconv.Atoi(p)
		if seen[port] {
			t.Fatalf("FreeAddr returned %d, a port of a FreePorts range", port)
		}
		seen[port] = true
	}
}

func TestConnTrackerKill(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			accepted <- c
		}
	}()
	var ct ConnTracker
	if _, err := ct.Dial(context.Background(), "tcp", l.Addr().String()); err != nil {
		t.Fatal(err)
	}
	server := <-accepted
	defer server.Close()
	ct.Kill()
	_ = server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := server.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("server read after Kill: %v, want a connection reset", err)
	}
	if _, err := ct.Dial(context.Background(), "tcp", l.Addr().String()); !errors.Is(err, ErrClientKilled) {
		t.Errorf("dial after Kill: %v, want ErrClientKilled", err)
	}
}

func TestProcessStopAndKill(t *testing.T) {
	sh := NeedBinary(t, "sh")
	log := filepath.Join(t.TempDir(), "log")
	p, err := StartProcess(ProcessConfig{Bin: sh, Args: []string{"-c", "echo hello; exec sleep 60"}, LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 5*time.Second, "hello in the log", func() bool {
		b, _ := os.ReadFile(log)
		return strings.Contains(string(b), "hello")
	})
	if p.HasExited() || p.ExitCode() != -1 {
		t.Fatalf("running process: exited %v, code %d", p.HasExited(), p.ExitCode())
	}
	if err := p.Stop(5 * time.Second); err == nil {
		t.Fatal("SIGTERM of sleep: want an exit error")
	}
	if !p.HasExited() {
		t.Fatal("not exited after Stop")
	}
	p2, err := StartProcess(ProcessConfig{Bin: sh, Args: []string{"-c", "exit 3"}, LogPath: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Wait(5 * time.Second); err != nil || p2.ExitCode() != 3 {
		t.Fatalf("exit 3: wait %v, code %d", err, p2.ExitCode())
	}
	b, _ := os.ReadFile(log)
	if n := strings.Count(string(b), "=== "); n != 2 {
		t.Errorf("log has %d start lines, want 2 (appended runs):\n%s", n, b)
	}
}

func TestRunScriptsRewrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "echo.txt")
	script := "# comment\n\necho a b\n----\nstale\n\n# between\nsilent\n----\n\necho c\n----\nc\n"
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	exec := func(*testing.T) ScriptExec {
		return func(t *testing.T, c Command) string {
			if c.Name() == "silent" {
				return ""
			}
			return strings.Join(c.Args(), "\n")
		}
	}
	RunScripts(t, filepath.Join(dir, "*.txt"), true, exec)
	got, _ := os.ReadFile(path)
	want := strings.Replace(script, "stale", "a\nb", 1)
	if string(got) != want {
		t.Fatalf("rewritten:\n%s\nwant:\n%s", got, want)
	}
	RunScripts(t, filepath.Join(dir, "*.txt"), false, exec)
}
