package testkit

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
	mu   sync.Mutex
	path string // "" until built
	dir  string // temp dir holding a built binary; removed by Main
	err  error
}

// Main runs the tests, then removes the binary StrataBinary built (if any).
// Use as: func TestMain(m *testing.M) { os.Exit(testkit.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	RemoveBuilt()
	return code
}

// RemoveBuilt removes the binary StrataBinary built, for a TestMain that
// does more than Main.
func RemoveBuilt() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		os.RemoveAll(built.dir)
		built.dir, built.path = "", ""
	}
}

// StrataBinary returns the strata binary under test: $STRATA_BIN, else
// cmd/strata built once per test process. The caller's TestMain should use
// Main (or RemoveBuilt) to delete it afterwards.
func StrataBinary(t testing.TB) string {
	t.Helper()
	path, err := BuildStrata()
	if err != nil {
		t.Fatalf("strata binary: %v", err)
	}
	return path
}

// BuildStrata is StrataBinary for callers without a testing.TB.
func BuildStrata() (string, error) {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.path == "" && built.err == nil {
		built.path, built.err = buildLocked()
	}
	return built.path, built.err
}

// REQUIRES: built.mu held.
func buildLocked() (string, error) {
	if bin := os.Getenv("STRATA_BIN"); bin != "" {
		return filepath.Abs(bin)
	}
	dir, err := os.MkdirTemp("", "strata-test-bin-")
	if err != nil {
		return "", err
	}
	built.dir = dir
	out := filepath.Join(dir, "strata")
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/strata")
	cmd.Dir = ModuleRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, b)
	}
	return out, nil
}

// ModuleRoot is the directory of the module's go.mod (this file lives two
// levels below it).
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
