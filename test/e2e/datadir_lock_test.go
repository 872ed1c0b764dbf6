package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// A second broker on a data directory in use is refused at once, naming
// the process that holds it, instead of blocking forever on the embedded
// etcd's lock.
func TestSecondBrokerOnDataDirRefused(t *testing.T) {
	b := StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, strataBin, "serve", "--data-dir", b.DataDir,
		"--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("second broker: %v (after %v), want a prompt non-zero exit\n%s", err, time.Since(start), out)
	}
	want := fmt.Sprintf("is used by another strata process (pid %d)", b.proc.Pid())
	if !strings.Contains(string(out), want) {
		t.Fatalf("second broker said:\n%s\nwant it to contain %q", out, want)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Fatalf("refused after %v, want at once", elapsed)
	}
}

// SIGTERM ends a broker promptly and cleanly while a start step waits (here
// for an etcd that accepts connections and never answers), and the log
// names the step it was in.
func TestSIGTERMDuringStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and hold connections without a byte in reply
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	logPath := filepath.Join(t.TempDir(), "broker.log")
	proc, err := testkit.StartProcess(testkit.ProcessConfig{Bin: strataBin, LogPath: logPath, Args: []string{"serve",
		"--data-dir", t.TempDir(), "--listen", testkit.FreeAddr(t), "--http", testkit.FreeAddr(t), "--etcd", ln.Addr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Kill(5 * time.Second)
	readLog := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(readLog(), "connecting to etcd") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(readLog(), "connecting to etcd") {
		t.Fatalf("the broker never logged the etcd step:\n%s", readLog())
	}
	time.Sleep(500 * time.Millisecond) // inside the step
	start := time.Now()
	if err := proc.Stop(10 * time.Second); err != nil {
		t.Fatalf("SIGTERM while connecting to etcd: %v (want exit 0)\n%s", err, readLog())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("SIGTERM took %v to stop a starting broker", took)
	}
	if !strings.Contains(readLog(), "stopped while starting") {
		t.Fatalf("no 'stopped while starting' line:\n%s", readLog())
	}
}
