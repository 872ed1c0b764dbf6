package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

// buildTimeout bounds `go build ./cmd/strata`.
const buildTimeout = 5 * time.Minute

// built is the strata binary of this test process, built at most once.
var built struct {
	sync.Mutex
	path string // "" until built
	dir  string // temp dir holding a built binary; removed by Main
	err  error
}

// Main runs the tests, then removes the binary Binary built (if any).
// Use as: func TestMain(m *testing.M) { os.Exit(cluster.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}

// Binary returns the strata binary: $STRATA_BIN, else cmd/strata built once.
func Binary(t testing.TB) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	if built.path == "" && built.err == nil {
		built.path, built.err = build()
	}
	if built.err != nil {
		t.Fatalf("strata binary: %v", built.err)
	}
	return built.path
}

// REQUIRES: built's mutex held.
func build() (string, error) {
	if bin := os.Getenv("STRATA_BIN"); bin != "" {
		return filepath.Abs(bin)
	}
	dir, err := os.MkdirTemp("", "strata-cluster-bin-")
	if err != nil {
		return "", err
	}
	built.dir = dir
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	out := filepath.Join(dir, "strata")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/strata")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
}

// NeedBinary returns the path of an external tool (kcat), skipping the test
// when it is missing, or failing it when CI=true.
func NeedBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is required in CI: %v", name, err)
	}
	t.Skipf("%s not installed: %v", name, err)
	return ""
}
