package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
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
