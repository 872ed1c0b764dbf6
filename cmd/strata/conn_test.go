package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestConnPrecedence: a flag beats the environment, which beats the
// profile, which beats the default; the default profile is optional, a
// named one is not.
func TestConnPrecedence(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "client.yaml")
	if err := os.WriteFile(profile, []byte("# staging\nbrokers: p1:9093,p2:9093\ntls: true # encrypted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	resolve := func(args ...string) (connConfig, error) {
		c := &cli{getenv: func(k string) string { return env[k] }}
		fs := newFlagSetTo("x", &strings.Builder{})
		conn := newConnFlags(fs, c)
		if _, err := parseArgs(fs, args); err != nil {
			t.Fatal(err)
		}
		return conn.resolve()
	}
	seeds := func(args ...string) []string {
		t.Helper()
		cfg, err := resolve(args...)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.seeds
	}
	env["HOME"] = dir // no ~/.config/strata/client.yaml there
	if got := seeds(); !reflect.DeepEqual(got, []string{defaultBrokers}) {
		t.Fatalf("no profile, no env: %v", got)
	}
	if got := seeds("--profile", profile); !reflect.DeepEqual(got, []string{"p1:9093", "p2:9093"}) {
		t.Fatalf("profile: %v", got)
	}
	env["STRATA_PROFILE"] = profile
	if got := seeds(); !reflect.DeepEqual(got, []string{"p1:9093", "p2:9093"}) {
		t.Fatalf("$STRATA_PROFILE: %v", got)
	}
	env["STRATA_BROKERS"] = "e1:9092"
	if got := seeds(); !reflect.DeepEqual(got, []string{"e1:9092"}) {
		t.Fatalf("env over profile: %v", got)
	}
	if got := seeds("--brokers", "f1:9092"); !reflect.DeepEqual(got, []string{"f1:9092"}) {
		t.Fatalf("flag over env: %v", got)
	}
	// tls: true from the profile adds the TLS dialer; --tls=false overrides.
	withTLS, _ := resolve()
	noTLS, _ := resolve("--tls=false")
	if len(withTLS.opts) != len(noTLS.opts)+1 {
		t.Fatalf("tls from the profile: %d options, with --tls=false %d", len(withTLS.opts), len(noTLS.opts))
	}
	if _, err := resolve("--profile", filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("a named profile that is missing: %v", err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("brokers: a:1\npassword: hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve("--profile", bad); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("an unknown profile key: %v", err)
	}
	if _, err := resolve("--sasl-mechanism", "SCRAM-SHA-256"); err == nil || !strings.Contains(err.Error(), "--sasl-username") {
		t.Fatalf("SASL without a user: %v", err)
	}
}
