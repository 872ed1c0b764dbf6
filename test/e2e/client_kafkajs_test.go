package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
)

// TestKafkajs runs test/e2e/kafkajs/check.js (kafkajs from the npm registry,
// installed by scripts/test.sh with npm ci) against a broker: admin calls,
// produce and consume with keys, headers and kafkajs's built-in codecs, an
// idempotent producer, transactions read with read_committed, and a consumer
// group through a rebalance. Each step prints a line; the script exits
// non-zero at the first failed check.
func TestKafkajs(t *testing.T) {
	testkit.NeedBinary(t, "node")
	dir, err := filepath.Abs("kafkajs")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err != nil {
		testkit.Missing(t, "kafkajs is not installed (npm ci --prefix test/e2e/kafkajs; scripts/test.sh installs it): %v", err)
	}
	b := StartBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "check.js", b.Addr)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("node check.js:\n%s", out)
	if err != nil {
		t.Fatalf("kafkajs: %v", err)
	}
	if !strings.Contains(string(out), "kafkajs: all steps passed") {
		t.Fatal("kafkajs: the script ended without passing every step")
	}
}
