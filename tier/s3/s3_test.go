package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/tier/objstore"
	"github.com/strata-log/strata/tier/objtest"
	"github.com/strata-log/strata/tier/s3"
	"github.com/strata-log/strata/tier/tiertest"
)

const partSize = 5 << 20

func config(m *tiertest.S3Server, prefix string) s3.Config {
	return s3.Config{
		Bucket: m.Bucket, Prefix: prefix, Endpoint: m.Endpoint, Region: tiertest.Region, PathStyle: true,
		AccessKeyID: tiertest.AccessKey, SecretAccessKey: tiertest.SecretKey,
		MultipartThreshold: partSize, PartSize: partSize, Concurrency: 3,
		ListPageSize: 2, // every List of the contract spans pages
		PartRetry:    objstore.RetryPolicy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond},
	}
}

func newStore(t testing.TB, cfg s3.Config) *s3.Store {
	t.Helper()
	s, err := s3.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// verifyWithMinioGo checks an object through minio-go, not our client.
func verifyWithMinioGo(m *tiertest.S3Server, prefix string) func(t *testing.T, key string, want []byte) {
	return func(t *testing.T, key string, want []byte) {
		t.Helper()
		ctx := context.Background()
		full := prefix + "/" + key
		obj, err := m.Client().GetObject(ctx, m.Bucket, full, minio.GetObjectOptions{})
		if err == nil {
			var got []byte
			got, err = io.ReadAll(obj)
			obj.Close()
			if err == nil && want != nil && !bytes.Equal(got, want) {
				t.Fatalf("minio-go: %s has %d bytes, not the %d written", full, len(got), len(want))
			}
		}
		notFound := err != nil && minio.ToErrorResponse(err).Code == "NoSuchKey"
		switch {
		case want == nil && !notFound:
			t.Fatalf("minio-go: %s exists (err %v), want none", full, err)
		case want != nil && err != nil:
			t.Fatalf("minio-go: %s: %v", full, err)
		}
	}
}

func TestContractOnMinIO(t *testing.T) { runContract(t, tiertest.StartMinIO(t)) }

// TestContractOnSeaweedFS runs the same contract against a second S3
// server, checked through minio-go as well.
func TestContractOnSeaweedFS(t *testing.T) { runContract(t, tiertest.StartSeaweedFS(t)) }

// runContract runs objtest's contract on m, each case under its own prefix,
// checking every write through minio-go and that no upload is left open.
func runContract(t *testing.T, m *tiertest.S3Server) {
	var n atomic.Int32
	var verify func(t *testing.T, key string, want []byte)
	objtest.Run(t, func(t *testing.T) objstore.ObjectStore {
		prefix := fmt.Sprintf("case%d/p", n.Add(1))
		verify = verifyWithMinioGo(m, prefix)
		return newStore(t, config(m, prefix))
	}, objtest.Options{
		LargeSize: 2*partSize + 12345, // three parts, the last one short
		Verify:    func(t *testing.T, key string, want []byte) { verify(t, key, want) },
	})
	assertNoIncompleteUploads(t, m)
}

func assertNoIncompleteUploads(t *testing.T, m *tiertest.S3Server) {
	t.Helper()
	for u := range m.Client().ListIncompleteUploads(context.Background(), m.Bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("listing incomplete uploads: %v", u.Err)
		}
		t.Fatalf("incomplete multipart upload left behind: %s %s", u.Key, u.UploadID)
	}
}

// faultTransport answers matching requests with a canned S3 error instead
// of forwarding them, remaining times (negative: forever).
type faultTransport struct {
	base   http.RoundTripper
	match  func(*http.Request) bool
	status int
	code   string

	mu        sync.Mutex
	remaining int           // guarded by mu
	injected  int           // guarded by mu
	headers   []http.Header // of every request; guarded by mu
}

func (f *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.headers = append(f.headers, req.Header.Clone())
	inject := f.match != nil && f.match(req) && f.remaining != 0
	if inject {
		f.remaining--
		f.injected++
	}
	f.mu.Unlock()
	if !inject {
		return f.base.RoundTrip(req)
	}
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, f.code)
	return &http.Response{
		StatusCode: f.status, Status: fmt.Sprintf("%d %s", f.status, http.StatusText(f.status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/xml"}},
		Body:   io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}, nil
}

func isUploadPart(n string) func(*http.Request) bool {
	return func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == n
	}
}

func TestMultipartFailedPartIsRetried(t *testing.T) {
	m := tiertest.StartMinIO(t)
	ft := &faultTransport{base: http.DefaultTransport, match: isUploadPart("2"), status: 503, code: "SlowDown", remaining: 2}
	cfg := config(m, "mp")
	cfg.HTTPClient = &http.Client{Transport: ft}
	s := newStore(t, cfg)
	data := objtest.Payload(9, 3*partSize-7)
	if err := s.Put(context.Background(), "seg", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put with two SlowDowns on part 2: %v", err)
	}
	if ft.injected != 2 {
		t.Fatalf("injected %d faults, want 2", ft.injected)
	}
	if st := s.MultipartStats(); st != (s3.MultipartStats{Uploads: 1, Parts: 5, PartRetries: 2, Completed: 1}) {
		t.Fatalf("multipart stats %+v, want 1 upload of 3 parts + 2 retries", st)
	}
	verifyWithMinioGo(m, "mp")(t, "seg", data)
	assertNoIncompleteUploads(t, m)
}

func TestMultipartPermanentFailureAborts(t *testing.T) {
	m := tiertest.StartMinIO(t)
	ft := &faultTransport{base: http.DefaultTransport, match: isUploadPart("3"), status: 403, code: "AccessDenied", remaining: -1}
	cfg := config(m, "mp")
	cfg.HTTPClient = &http.Client{Transport: ft}
	s := newStore(t, cfg)
	data := objtest.Payload(10, 3*partSize)
	err := s.Put(context.Background(), "seg", bytes.NewReader(data), int64(len(data)))
	if err == nil || objstore.IsTransient(err) {
		t.Fatalf("put with part 3 denied: %v, want a permanent error", err)
	}
	verifyWithMinioGo(m, "mp")(t, "seg", nil)
	assertNoIncompleteUploads(t, m)
	if st := s.MultipartStats(); st.Aborted != 1 || st.Completed != 0 {
		t.Fatalf("multipart stats %+v, want one abort", st)
	}
}

func TestSlowDownIsTransient(t *testing.T) {
	m := tiertest.StartMinIO(t)
	ft := &faultTransport{base: http.DefaultTransport, match: func(r *http.Request) bool { return r.Method == http.MethodGet },
		status: 503, code: "SlowDown", remaining: 1}
	cfg := config(m, "sd")
	cfg.HTTPClient = &http.Client{Transport: ft}
	s := newStore(t, cfg)
	objtest.MustPut(t, s, "k", []byte("data"))
	_, err := s.ReadRange(context.Background(), "k", 0, 4)
	if !errors.Is(err, objstore.ErrTransient) || s.IsNotFound(err) {
		t.Fatalf("GET answered 503 SlowDown: %v, want transient", err)
	}
	r, _ := objstore.NewRetrying(s, objstore.RetryPolicy{InitialBackoff: time.Millisecond})
	ft.mu.Lock()
	ft.remaining = 2
	ft.mu.Unlock()
	if got := objtest.MustRead(t, r, "k", 1, 3); string(got) != "ata" {
		t.Fatalf("read through retries: %q", got)
	}
}

func TestOutageIsTransientAndRecovers(t *testing.T) {
	m := tiertest.StartMinIO(t)
	s := newStore(t, config(m, "outage"))
	m.Stop()
	err := s.Put(context.Background(), "k", strings.NewReader("abc"), 3)
	if !objstore.IsTransient(err) {
		t.Fatalf("put while MinIO is down: %v, want transient", err)
	}
	r, _ := objstore.NewRetrying(s, objstore.RetryPolicy{MaxAttempts: 100, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	restarted := make(chan struct{})
	go func() {
		time.Sleep(500 * time.Millisecond)
		m.Start()
		close(restarted)
	}()
	data := objtest.Payload(11, partSize+1) // multipart through the outage
	if err := r.Put(context.Background(), "big", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put across the outage: %v", err)
	}
	<-restarted
	verifyWithMinioGo(m, "outage")(t, "big", data)
}

// SSE-S3 against MinIO with its built-in KMS (tiertest): the header is
// sent on single and multipart PUTs, MinIO accepts it, and the stored
// objects are encrypted.
func TestServerSideEncryptionS3(t *testing.T) {
	m := tiertest.StartMinIO(t)
	ft := &faultTransport{base: http.DefaultTransport}
	cfg := config(m, "sse")
	cfg.HTTPClient = &http.Client{Transport: ft}
	cfg.SSE = "AES256"
	s := newStore(t, cfg)
	ctx := context.Background()
	if err := s.Put(ctx, "small", strings.NewReader("x"), 1); err != nil {
		t.Fatalf("SSE-S3 put: %v", err)
	}
	big := objtest.Payload(13, partSize+1)
	if err := s.Put(ctx, "big", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatalf("SSE-S3 multipart put: %v", err)
	}
	ft.mu.Lock()
	sent := 0
	for _, h := range ft.headers {
		if h.Get("X-Amz-Server-Side-Encryption") == "AES256" {
			sent++
		}
	}
	ft.mu.Unlock()
	if sent < 2 { // the PUT and the CreateMultipartUpload
		t.Fatalf("X-Amz-Server-Side-Encryption: AES256 on %d requests, want the PUT and the multipart create", sent)
	}
	for _, key := range []string{"small", "big"} {
		info, err := m.Client().StatObject(ctx, m.Bucket, "sse/"+key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Metadata.Get("X-Amz-Server-Side-Encryption"); got != "AES256" {
			t.Errorf("%s stored with server-side encryption %q, want AES256", key, got)
		}
	}
	verifyWithMinioGo(m, "sse")(t, "big", big)
}

// Keys from an AWS shared-credentials file work; a file without the
// profile fails at New, and neither errors nor String show a secret.
func TestCredentialsFile(t *testing.T) {
	m := tiertest.StartMinIO(t)
	cfg := config(m, "credfile")
	cfg.AccessKeyID, cfg.SecretAccessKey = "", ""
	cfg.CredentialsFile = m.CredentialsFile
	s := newStore(t, cfg)
	if err := s.Put(context.Background(), "k", strings.NewReader("abc"), 3); err != nil {
		t.Fatalf("put with keys from the credentials file: %v", err)
	}
	verifyWithMinioGo(m, "credfile")(t, "k", []byte("abc"))

	cfg.Profile = "no-such-profile"
	if _, err := s3.New(context.Background(), cfg); err == nil {
		t.Fatal("New with a missing profile succeeded")
	} else if strings.Contains(err.Error(), tiertest.SecretKey) {
		t.Fatalf("error shows the secret: %v", err)
	}
	cfg.Profile, cfg.CredentialsFile = "", filepath.Join(t.TempDir(), "missing")
	if _, err := s3.New(context.Background(), cfg); err == nil {
		t.Fatal("New with a missing credentials file succeeded")
	}
	static := config(m, "")
	if str := fmt.Sprintf("%v %+v %s", static, static, static); strings.Contains(str, tiertest.SecretKey) {
		t.Fatalf("Config formats its secret: %s", str)
	}
}

func TestMissingBucketIsPermanent(t *testing.T) {
	m := tiertest.StartMinIO(t)
	cfg := config(m, "")
	cfg.Bucket = "no-such-bucket"
	s := newStore(t, cfg)
	err := s.Put(context.Background(), "k", strings.NewReader("x"), 1)
	if err == nil || objstore.IsTransient(err) || s.IsNotFound(err) {
		t.Fatalf("put into a missing bucket: %v, want permanent and not 'object not found'", err)
	}
	if want := "s3: put k: the bucket does not exist (NoSuchBucket)"; !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("put into a missing bucket says %q, want one line starting %q", err, want)
	}
}

// Wrong keys are a permanent error told in one line with what to check.
func TestWrongKeysSayAccessDenied(t *testing.T) {
	m := tiertest.StartMinIO(t)
	cfg := config(m, "")
	cfg.SecretAccessKey = "not-the-secret"
	err := newStore(t, cfg).Put(context.Background(), "k", strings.NewReader("x"), 1)
	if err == nil || objstore.IsTransient(err) {
		t.Fatalf("put with a wrong secret: %v, want a permanent error", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "(SignatureDoesNotMatch): check the credentials") || strings.Contains(msg, "RequestID") {
		t.Fatalf("put with a wrong secret says %q", msg)
	}
}

// With no credentials anywhere, New fails at once with ErrNoCredentials,
// bounded even where the instance-metadata endpoint does not answer.
func TestNoCredentialsFailsAtOpen(t *testing.T) {
	m := tiertest.StartMinIO(t)
	home := t.TempDir() // no ~/.aws
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(home, "none"), "AWS_CONFIG_FILE": filepath.Join(home, "none"),
		"AWS_WEB_IDENTITY_TOKEN_FILE": "", "AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "",
		// An address that swallows packets, like instance metadata off EC2.
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://10.255.255.1", "HOME": home,
	} {
		t.Setenv(k, v)
	}
	cfg := config(m, "")
	cfg.AccessKeyID, cfg.SecretAccessKey = "", ""
	start := time.Now()
	_, err := s3.New(context.Background(), cfg)
	if !errors.Is(err, s3.ErrNoCredentials) {
		t.Fatalf("New without credentials: %v, want ErrNoCredentials", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("New without credentials took %v: the lookup is not bounded", took)
	}
	if !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") || !strings.Contains(err.Error(), "credentials-file=") {
		t.Fatalf("the error does not say what to set: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []s3.Config{
		{},
		{Bucket: "b", PartSize: 1 << 20},
		{Bucket: "b", SSE: "rot13"},
		{Bucket: "b", AccessKeyID: "only-id"},
		{Bucket: "b", AccessKeyID: "a", SecretAccessKey: "s", CredentialsFile: "/f"},
		{Bucket: "b", SSE: "AES256", SSEKMSKeyID: "k"},
		{Bucket: "b", Prefix: "a/../b"},
		{Bucket: "b", Concurrency: 1000},
	} {
		if _, err := s3.New(context.Background(), cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

// BenchmarkGetRange8MiB is the raw-GET baseline the cold-read benchmark
// compares against: aligned 8 MiB ranged GETs of one object, through this
// client, on a local MinIO. Not a test: numbers only.
func BenchmarkGetRange8MiB(b *testing.B) {
	m := tiertest.StartMinIO(b)
	s := newStore(b, config(m, "bench"))
	const chunk, size = 8 << 20, 64 << 20
	data := objtest.Payload(12, size)
	if err := s.Put(context.Background(), "obj", bytes.NewReader(data), size); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(chunk)
	for i := 0; b.Loop(); i++ {
		rc, err := s.ReadRange(context.Background(), "obj", int64(i%(size/chunk))*chunk, chunk)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, rc); err != nil || n != chunk {
			b.Fatalf("read %d bytes, %v", n, err)
		}
		rc.Close()
	}
}
