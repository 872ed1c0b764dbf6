package testkit

import (
	"os"
	"os/exec"
	"testing"
)

// InCI says the tests run in CI (CI=true), where every external dependency
// is installed and a missing one fails the test instead of skipping it.
func InCI() bool { return os.Getenv("CI") == "true" }

// Missing ends t because a dependency is missing: a failure under CI=true,
// a skip elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// NeedBinary returns the path of an external tool on $PATH, or ends t
// through Missing.
func NeedBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if InCI() {
			t.Fatalf("%s is required in CI: %v", name, err)
		}
		t.Skipf("%s not installed: %v", name, err)
	}
	return path
}
