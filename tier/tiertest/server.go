// Package tiertest starts real S3 servers for tests, on free loopback ports,
// with their data in a temp dir and one bucket created: MinIO (the binary
// scripts/install-minio.sh builds into <repo>/.tools/bin/minio, or
// $STRATA_MINIO_BIN) and SeaweedFS (scripts/install-seaweedfs.sh,
// <repo>/.tools/bin/weed, or $STRATA_WEED_BIN). Without the binary a test
// skips, or fails when CI=true (CI must run the real thing).
package tiertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/strata-log/strata/internal/testkit"
)

// Credentials of every test server.
const (
	AccessKey = "strata-test"
	SecretKey = "strata-test-secret"
	Region    = "us-east-1"
)

// kmsSecretKey gives every test server MinIO's built-in single-key KMS
// (MINIO_KMS_SECRET_KEY, "<name>:<base64 of 32 bytes>"), so SSE-S3
// (sse=AES256) works as on AWS. A fixed test key, not a secret.
const kmsSecretKey = "strata-test-key:c3RyYXRhLXRlc3Qta21zLWtleS0wMTIzNDU2Nzg5YWI="

const startTimeout = 60 * time.Second

// S3Server is a running (or stopped) test server. Stop and Start simulate
// an outage; the data directory and ports survive them.
type S3Server struct {
	t       testing.TB
	flavor  flavor
	bin     string
	dataDir string
	logFile string
	// Addr is host:port of the S3 API; Endpoint is "http://" + Addr.
	Addr, Endpoint string
	// Bucket was created by StartMinIO.
	Bucket string
	// CredentialsFile is an AWS shared-credentials file holding the test
	// keys (profile "default"): URL names it, so no key is in a URL.
	CredentialsFile string

	// extraPorts and configFile are the flavor's own (SeaweedFS: its
	// other servers' ports and its S3 identities).
	extraPorts []string
	configFile string

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu; nil while stopped
}

// flavor is what differs between servers: the command that runs one and
// the probe that says it serves.
type flavor struct {
	name    string
	command func(s *S3Server) *exec.Cmd
	ready   func(s *S3Server) bool
}

// Binary returns the MinIO binary path, or "" if it is missing.
func Binary() string { return toolBinary("STRATA_MINIO_BIN", "minio") }

// toolBinary is $env, else <repo>/.tools/bin/name; "" if it is missing.
func toolBinary(env, name string) string {
	p := os.Getenv(env)
	if p == "" {
		root, err := repoRoot()
		if err != nil {
			return ""
		}
		p = filepath.Join(root, ".tools", "bin", name)
	}
	if info, err := os.Stat(p); err != nil || info.IsDir() {
		return ""
	}
	return p
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("tiertest: go.mod not found")
		}
		dir = parent
	}
}

// minioFlavor runs `minio server` with the test keys and a built-in KMS.
var minioFlavor = flavor{
	name: "MinIO",
	command: func(s *S3Server) *exec.Cmd {
		cmd := exec.Command(s.bin, "server", "--quiet", "--address", s.Addr, s.dataDir)
		cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
			"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1", "MINIO_KMS_SECRET_KEY="+kmsSecretKey)
		return cmd
	},
	ready: func(s *S3Server) bool { return httpOK(s.Endpoint + "/minio/health/ready") },
}

// StartMinIO starts a MinIO server with a fresh bucket; t.Cleanup stops it.
func StartMinIO(t testing.TB) *S3Server {
	t.Helper()
	bin := Binary()
	if bin == "" {
		testkit.Missing(t, "MinIO binary missing: run scripts/install-minio.sh (or set STRATA_MINIO_BIN)")
	}
	return startServer(t, minioFlavor, bin, nil)
}

// startServer starts a server of flavor f with a fresh bucket; t.Cleanup
// stops it. ports, when set, picks the flavor's other ports before each
// attempt.
func startServer(t testing.TB, f flavor, bin string, ports func(s *S3Server)) *S3Server {
	t.Helper()
	dir := t.TempDir()
	s := &S3Server{t: t, flavor: f, bin: bin, dataDir: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "server.log"),
		Bucket: "strata-test"}
	t.Cleanup(s.Stop)
	s.CredentialsFile = filepath.Join(dir, "aws-credentials")
	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", AccessKey, SecretKey)
	if err := os.WriteFile(s.CredentialsFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken before the server binds it
		s.Addr = testkit.FreeAddr(t)
		s.Endpoint = "http://" + s.Addr
		if ports != nil {
			ports(s)
		}
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("starting %s: %v (log %s)", f.name, err, s.logFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		err := s.Client().MakeBucket(ctx, s.Bucket, minio.MakeBucketOptions{Region: Region})
		if err == nil {
			return s
		}
		if ctx.Err() != nil { // a server may serve before it can store (SeaweedFS's volumes)
			t.Fatalf("creating bucket on %s: %v (log %s)", f.name, err, s.logFile)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Start restarts a stopped server on the same port and data.
func (m *S3Server) Start() {
	m.t.Helper()
	if err := m.start(); err != nil {
		m.t.Fatalf("restarting %s: %v", m.flavor.name, err)
	}
}

func (m *S3Server) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return nil
	}
	log, err := os.OpenFile(m.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := m.flavor.command(m)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := m.waitReady(exited); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	m.cmd = cmd
	go m.reap(cmd, exited)
	return nil
}

// reap forgets the process once it exits (a crash shows as a stopped server).
func (m *S3Server) reap(cmd *exec.Cmd, exited <-chan error) {
	<-exited
	m.mu.Lock()
	if m.cmd == cmd {
		m.cmd = nil
	}
	m.mu.Unlock()
}

func (m *S3Server) waitReady(exited <-chan error) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited: %v", m.flavor.name, err)
		default:
		}
		if m.flavor.ready(m) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready in time", m.flavor.name)
}

// httpOK reports whether GET url answers 200.
func httpOK(url string) bool {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop kills the server (an outage, not a graceful stop) and waits for it
// to exit. Safe to call when stopped.
func (m *S3Server) Stop() {
	m.mu.Lock()
	cmd := m.cmd
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m.mu.Lock()
		gone := m.cmd != cmd
		m.mu.Unlock()
		if gone {
			return
		}
	}
}

// Client returns a minio-go client: tests check the bucket with it,
// independently of Strata's S3 client.
func (m *S3Server) Client() *minio.Client {
	c, err := minio.New(m.Addr, &minio.Options{
		Creds:  credentials.NewStaticV4(AccessKey, SecretKey, ""),
		Region: Region,
	})
	if err != nil {
		m.t.Fatal(err)
	}
	return c
}

// URL returns the --object-store URL of the bucket with prefix (may be
// ""). Its credentials come from CredentialsFile; the URL holds no key.
func (m *S3Server) URL(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&credentials-file=%s",
		m.Bucket, prefix, m.Endpoint, Region, url.QueryEscape(m.CredentialsFile))
}

// Env is the AWS chain's environment for the test keys, for processes
// given a URL without credentials-file.
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=" + Region}
}
