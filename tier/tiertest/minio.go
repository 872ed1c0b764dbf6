// Package tiertest starts a real MinIO server for tests: the binary that
// scripts/install-minio.sh builds into <repo>/.tools/bin/minio (or
// $STRATA_MINIO_BIN), on a free loopback port, with its data in a temp dir
// and one bucket created. Without the binary a test skips, or fails when
// CI=true (CI must run the real thing).
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

// MinIO is a running (or stopped) test server. Stop and Start simulate an
// outage; the data directory and port survive them.
type MinIO struct {
	t       testing.TB
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

	mu  sync.Mutex
	cmd *exec.Cmd // guarded by mu; nil while stopped
}

// Binary returns the MinIO binary path, or "" if it is missing.
func Binary() string {
	p := os.Getenv("STRATA_MINIO_BIN")
	if p == "" {
		root, err := repoRoot()
		if err != nil {
			return ""
		}
		p = filepath.Join(root, ".tools", "bin", "minio")
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

// StartMinIO starts a server with a fresh bucket; t.Cleanup stops it.
func StartMinIO(t testing.TB) *MinIO {
	t.Helper()
	bin := Binary()
	if bin == "" {
		testkit.Missing(t, "MinIO binary missing: run scripts/install-minio.sh (or set STRATA_MINIO_BIN)")
	}
	dir := t.TempDir()
	m := &MinIO{t: t, bin: bin, dataDir: filepath.Join(dir, "data"), logFile: filepath.Join(dir, "minio.log"), Bucket: "strata-test"}
	t.Cleanup(m.Stop)
	m.CredentialsFile = filepath.Join(dir, "aws-credentials")
	creds := fmt.Sprintf("[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n", AccessKey, SecretKey)
	if err := os.WriteFile(m.CredentialsFile, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	for attempt := 0; attempt < 3; attempt++ { // the free port may be taken before MinIO binds it
		m.Addr = testkit.FreeAddr(t)
		m.Endpoint = "http://" + m.Addr
		if err = m.start(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("starting MinIO: %v (log %s)", err, m.logFile)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := m.Client().MakeBucket(ctx, m.Bucket, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("creating bucket: %v", err)
	}
	return m
}

// Start restarts a stopped server on the same port and data.
func (m *MinIO) Start() {
	m.t.Helper()
	if err := m.start(); err != nil {
		m.t.Fatalf("restarting MinIO: %v", err)
	}
}

func (m *MinIO) start() error {
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
	cmd := exec.Command(m.bin, "server", "--quiet", "--address", m.Addr, m.dataDir)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+AccessKey, "MINIO_ROOT_PASSWORD="+SecretKey,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "MINIO_CI_CD=1", "MINIO_KMS_SECRET_KEY="+kmsSecretKey)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := waitReady(m.Endpoint, exited); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	m.cmd = cmd
	go m.reap(cmd, exited)
	return nil
}

// reap forgets the process once it exits (a crash shows as a stopped server).
func (m *MinIO) reap(cmd *exec.Cmd, exited <-chan error) {
	<-exited
	m.mu.Lock()
	if m.cmd == cmd {
		m.cmd = nil
	}
	m.mu.Unlock()
}

func waitReady(endpoint string, exited <-chan error) error {
	deadline := time.Now().Add(startTimeout)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("minio exited: %v", err)
		default:
		}
		resp, err := client.Get(endpoint + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("minio not ready in time")
}

// Stop kills the server (an outage, not a graceful stop) and waits for it
// to exit. Safe to call when stopped.
func (m *MinIO) Stop() {
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
func (m *MinIO) Client() *minio.Client {
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
func (m *MinIO) URL(prefix string) string {
	return fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&credentials-file=%s",
		m.Bucket, prefix, m.Endpoint, Region, url.QueryEscape(m.CredentialsFile))
}

// Env is the AWS chain's environment for the test keys, for processes
// given a URL without credentials-file.
func Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + AccessKey, "AWS_SECRET_ACCESS_KEY=" + SecretKey, "AWS_REGION=" + Region}
}
