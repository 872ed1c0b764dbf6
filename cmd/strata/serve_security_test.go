package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/test/testcerts"
)

// certFiles writes a CA and a broker certificate into a temp dir.
func certFiles(t *testing.T) testcerts.Files {
	t.Helper()
	ca, err := testcerts.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	f, err := ca.WriteFiles(t.TempDir(), "broker", "broker", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestServeSecurityFlags(t *testing.T) {
	files := certFiles(t)
	pass := filepath.Join(t.TempDir(), "pass")
	if err := os.WriteFile(pass, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--listeners", "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"--advertised-listeners", "CLIENT://kafka.example:9093",
		"--listener-security-protocol-map", "CLIENT:SASL_SSL,INTERNAL:SSL",
		"--inter-broker-listener-name", "internal",
		"--ssl-cert-file", files.Cert, "--ssl-key-file", files.Key, "--ssl-ca-file", files.CA,
		"--ssl-client-auth", "required",
		"--inter-broker-sasl-username", "broker", "--inter-broker-sasl-password-file", pass,
		"--super-users", "User:admin; User:broker",
		"--authorizer", "--allow-everyone-if-no-acl-found", "--max-connections", "100",
	}
	// The rest through the environment: STRATA_<NAME> reaches every flag.
	env := map[string]string{"STRATA_MAX_CONNECTIONS_PER_IP": "7", "STRATA_QUEUED_MAX_REQUEST_BYTES": "1048576",
		"STRATA_SASL_ENABLED_MECHANISMS": "PLAIN,SCRAM-SHA-512"}
	cfg, err := parseServeForTest(t, args, env)
	if err != nil {
		t.Fatal(err)
	}
	b := cfg.broker
	if len(b.Listeners) != 3 || b.InterBrokerListener != "INTERNAL" || !b.Authorizer || !b.AllowEveryoneIfNoACL || b.MaxConnections != 100 ||
		b.MaxConnectionsPerIP != 7 || b.QueuedMaxRequestBytes != 1<<20 || strings.Join(b.SuperUsers, ";") != "User:admin;User:broker" {
		t.Fatalf("broker config %+v", b)
	}
	client, internal, plain := b.Listeners[0], b.Listeners[1], b.Listeners[2]
	if client.Security != broker.SASLSSL || client.Advertise != "kafka.example:9093" || client.TLS == nil ||
		client.TLS.ClientAuth != tls.RequireAndVerifyClientCert || client.TLS.MinVersion != tls.VersionTLS12 ||
		strings.Join(client.SASLMechanisms, ",") != "PLAIN,SCRAM-SHA-512" {
		t.Errorf("CLIENT listener %+v", client)
	}
	if internal.Security != broker.SSL || internal.TLS == nil || plain.Security != broker.Plaintext {
		t.Errorf("INTERNAL %+v, PLAINTEXT %+v", internal, plain)
	}
	if b.InterBrokerTLS == nil || b.InterBrokerTLS.RootCAs == nil || len(b.InterBrokerTLS.Certificates) != 1 {
		t.Errorf("inter-broker TLS %+v", b.InterBrokerTLS)
	}
	if s := b.InterBrokerSASL; s.Username != "broker" || s.Password != "s3cret" || s.Mechanism != "SCRAM-SHA-512" {
		t.Errorf("inter-broker SASL %v (password %q)", s, s.Password)
	}
	// broker.New validates (after defaults) before it needs a store.
	if _, err := broker.New(b, nil); err == nil || !strings.Contains(err.Error(), "nil metadata store") {
		t.Errorf("resolved config invalid: %v", err)
	}
}

func TestServeSecurityFlagsRejected(t *testing.T) {
	files := certFiles(t)
	bad := map[string][]string{
		"advertise with listeners": {"--listeners", "PLAINTEXT://127.0.0.1:0", "--advertise", "h:1"},
		"map without listeners":    {"--listener-security-protocol-map", "A:SSL"},
		"unmapped listener":        {"--listeners", "CLIENT://127.0.0.1:0"},
		"TLS without certificate":  {"--listeners", "SSL://127.0.0.1:0"},
		"client auth without CA":   {"--listeners", "SSL://127.0.0.1:0", "--ssl-cert-file", files.Cert, "--ssl-key-file", files.Key, "--ssl-client-auth", "required"},
		"bad client auth":          {"--listeners", "SSL://127.0.0.1:0", "--ssl-cert-file", files.Cert, "--ssl-key-file", files.Key, "--ssl-client-auth", "maybe"},
		"password file missing":    {"--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--inter-broker-sasl-username", "b"},
		"negative limit":           {"--max-connections", "-1"},
	}
	for name, args := range bad {
		if _, err := parseServeForTest(t, args, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Without --listeners, --listen/--advertise keep working.
	cfg, err := parseServeForTest(t, []string{"--listen", "127.0.0.1:0", "--advertise", "h:9"}, nil)
	if err != nil || cfg.broker.Listeners != nil || cfg.broker.Listen != "127.0.0.1:0" || cfg.broker.Advertise != "h:9" {
		t.Fatalf("--listen/--advertise: %+v, %v", cfg.broker, err)
	}
}

// TestBootstrapScramUsersConcurrently: brokers starting together with the
// same file create each credential exactly once.
func TestBootstrapScramUsersConcurrently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	endpoints := metadatatest.StartEmbedded(t)
	path := filepath.Join(t.TempDir(), "users")
	var lines strings.Builder
	for i := range 8 {
		fmt.Fprintf(&lines, "user%d:pw-%d\n", i, i)
	}
	if err := os.WriteFile(path, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	const brokers = 3
	created := make(chan int, brokers)
	errs := make(chan error, brokers)
	for range brokers {
		store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		go func() {
			n, err := bootstrapScramUsers(ctx, store, path, quiet)
			created <- n
			errs <- err
		}()
	}
	total := 0
	for range brokers {
		total += <-created
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if total != 16 {
		t.Fatalf("%d brokers created %d credentials for 8 users, want 16", brokers, total)
	}
}

func TestBootstrapScramUsers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: metadatatest.StartEmbedded(t), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	path := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(path, []byte("# users\nalice:pw-a\n\nbob:pw:with:colons\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := bootstrapScramUsers(ctx, store, path, quiet); err != nil {
		t.Fatal(err)
	}
	before, _, err := store.ScramCredential(ctx, "alice", auth.MechScramSHA512)
	if err != nil {
		t.Fatal(err)
	}
	// A second start keeps existing credentials (salts unchanged).
	if _, err := bootstrapScramUsers(ctx, store, path, quiet); err != nil {
		t.Fatal(err)
	}
	users, err := store.ScramUsers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 || len(users["alice"]) != 2 || len(users["bob"]) != 2 {
		t.Fatalf("stored users %v", users)
	}
	after, _, _ := store.ScramCredential(ctx, "alice", auth.MechScramSHA512)
	if string(after.Salt) != string(before.Salt) {
		t.Fatal("bootstrap replaced an existing credential")
	}
	// The password is "pw:with:colons": PLAIN verification proves it.
	if _, err := auth.VerifyPlain([]byte("\x00bob\x00pw:with:colons"), func(u string) (auth.ScramCredential, bool, error) {
		return store.ScramCredential(ctx, u, auth.MechScramSHA512)
	}); err != nil {
		t.Fatalf("bob's password: %v", err)
	}
	if err := os.WriteFile(path, []byte("no-colon-line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = bootstrapScramUsers(ctx, store, path, quiet)
	if err == nil || strings.Contains(err.Error(), "no-colon-line") {
		t.Fatalf("bad line: %v (must fail without echoing the line)", err)
	}
}
