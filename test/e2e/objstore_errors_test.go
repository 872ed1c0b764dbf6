package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// serveMustFail runs `strata serve` with args and wants it to exit non-zero
// within bound, printing want.
func serveMustFail(t *testing.T, want string, bound time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound+20*time.Second)
	defer cancel()
	all := append([]string{"serve", "--data-dir", t.TempDir(),
		"--listen", testkit.FreeAddr(t), "--http", testkit.FreeAddr(t)}, args...)
	start := time.Now()
	cmd := exec.CommandContext(ctx, strataBin, all...)
	cmd.Env = scrubbedAWSEnv(t)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		t.Fatalf("strata serve %v: %v after %v, want a non-zero exit\n%s", args, err, time.Since(start), out)
	}
	if !strings.Contains(string(out), want) {
		t.Fatalf("strata serve %v said:\n%s\nwant %q", args, out, want)
	}
	if elapsed := time.Since(start); elapsed > bound {
		t.Fatalf("strata serve %v failed after %v, want within %v", args, elapsed, bound)
	}
}

// scrubbedAWSEnv is the test's environment without any AWS credentials
// and with a HOME that has no ~/.aws.
func scrubbedAWSEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+t.TempDir(), "AWS_EC2_METADATA_DISABLED=true")
}

// A broker whose bucket cannot work (wrong keys, no bucket, no keys) stops
// at start with the reason instead of reporting ready and failing at its
// first upload.
func TestBrokerRefusesABrokenBucket(t *testing.T) {
	m := tiertest.StartMinIO(t)
	wrongKeys := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(wrongKeys, []byte("[default]\naws_access_key_id = "+tiertest.AccessKey+"\naws_secret_access_key = wrong-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := func(url, file string) string {
		base, _, _ := strings.Cut(url, "&credentials-file=")
		return base + "&credentials-file=" + file
	}
	noKeys, _, _ := strings.Cut(m.URL("e2e"), "&credentials-file=")
	for _, c := range []struct {
		name, url, want string
	}{
		{"wrong secret", withFile(m.URL("e2e"), wrongKeys), "bucket probe: write: s3: put strata/probe/1-"},
		{"wrong secret reason", withFile(m.URL("e2e"), wrongKeys), "(SignatureDoesNotMatch): check the credentials"},
		{"no bucket", strings.Replace(m.URL("e2e"), "s3://"+m.Bucket, "s3://no-such-bucket", 1), "the bucket does not exist (NoSuchBucket)"},
		{"no keys", noKeys, "no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
	} {
		t.Run(c.name, func(t *testing.T) {
			serveMustFail(t, c.want, 20*time.Second, "--object-store", c.url)
		})
	}
}

// /readyz names each check with its reason: a broker that started while
// the bucket was down is not ready, says why, and becomes ready once the
// bucket answers.
func TestReadyzReportsTheBucket(t *testing.T) {
	m := tiertest.StartMinIO(t)
	m.Stop()
	b := newBroker(t, withArgs("--object-store", m.URL("e2e")))
	b.startServing()
	readyz := func() (int, string) {
		resp, err := http.Get("http://" + b.HTTPAddr + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	deadline := time.Now().Add(60 * time.Second)
	code, body := readyz()
	for !strings.Contains(body, "[-]bucket") && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		code, body = readyz()
	}
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "[+]etcd ok") ||
		!strings.Contains(body, "[-]bucket: bucket probe: write") || !strings.Contains(body, "cannot reach the endpoint") {
		t.Fatalf("/readyz with the bucket down: %d\n%s", code, body)
	}
	if err := b.waitLogLine("object store unreachable at start", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	m.Start()
	for code != http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		code, body = readyz()
	}
	if code != http.StatusOK || !strings.Contains(body, "[+]bucket ok") || !strings.HasSuffix(body, "ready\n") {
		t.Fatalf("/readyz once the bucket is back: %d\n%s", code, body)
	}
}

// The bucket tools say in one line what is missing, at once: no
// credentials, or a file:// directory that does not exist.
func TestBucketToolsFailClearly(t *testing.T) {
	m := tiertest.StartMinIO(t)
	noKeys, _, _ := strings.Cut(m.URL("e2e"), "&credentials-file=")
	missingDir := "file://" + filepath.Join(t.TempDir(), "nonexistent")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "--object-store", noKeys, "--topic", "t", "--from", "0"},
			"strata replay: --object-store: no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or add credentials-file=PATH to the --object-store URL\n"},
		{[]string{"restore", "--object-store", noKeys},
			"no S3 credentials found"},
		{[]string{"replay", "--object-store", missingDir, "--topic", "t", "--from", "0"},
			"directory " + strings.TrimPrefix(missingDir, "file://") + " does not exist"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		start := time.Now()
		cmd := exec.CommandContext(ctx, strataBin, c.args...)
		cmd.Env = scrubbedAWSEnv(t)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		if err == nil || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("strata %v: %v\n%s\nwant %q", c.args, err, stderr.String(), c.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr.String()), "\n"); n > 0 {
			t.Errorf("strata %v printed %d lines, want one:\n%s", c.args, n+1, stderr.String())
		}
		if elapsed := time.Since(start); elapsed > 10*time.Second {
			t.Errorf("strata %v took %v", c.args, elapsed)
		}
	}
	if _, err := os.Stat(strings.TrimPrefix(missingDir, "file://")); !os.IsNotExist(err) {
		t.Errorf("replay created the missing directory: %v", err)
	}
}
