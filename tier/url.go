package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/strata-log/strata/tier/file"
	"github.com/strata-log/strata/tier/objstore"
	"github.com/strata-log/strata/tier/s3"
)

// Bucket is an opened object store as the broker uses it:
// Retrying(Counting(backend)), so every attempt is counted as a request.
type Bucket struct {
	objstore.ObjectStore                      // the top of the stack: use this
	Counts               *objstore.Counting   // counters per operation and topic
	Backend              objstore.ObjectStore // the bare backend (tests, tools)
	// URL is the URL with any secret removed, for logs.
	URL string
}

// OpenURL opens the object store an --object-store URL names (DESIGN.md §11):
//
//	file:///path/to/dir      (file:relative/dir is relative to the working directory)
//	s3://bucket[/prefix][?endpoint=http://host:port][&region=R][&path-style=true|false]
//	   [&sse=AES256|aws:kms][&sse-kms-key-id=ID][&credentials-file=PATH][&profile=P]
//	   [&part-size=BYTES][&multipart-threshold=BYTES][&concurrency=N]
//
// s3 credentials come from credentials-file (an AWS shared-credentials
// file; its profile P, default "default"), else the standard AWS chain
// (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity,
// instance roles). Keys in the URL (access-key, secret-key) are refused
// with ErrCredentialsInURL: URLs end up in logs, process lists and shell
// history. sse asks for server-side encryption of every object: AES256
// (SSE-S3) or aws:kms (SSE-KMS, with sse-kms-key-id or the account's
// default key). path-style defaults to true when an endpoint is given
// (MinIO), false for AWS. Errors wrap ErrBadURL.
func OpenURL(ctx context.Context, rawURL string, logger *slog.Logger) (*Bucket, error) {
	return openURL(ctx, rawURL, logger, true)
}

// OpenExistingURL is OpenURL for tools that read a bucket: a file:// path
// that does not exist is an error saying so (OpenURL creates it, as a
// broker's new local store).
func OpenExistingURL(ctx context.Context, rawURL string, logger *slog.Logger) (*Bucket, error) {
	return openURL(ctx, rawURL, logger, false)
}

func openURL(ctx context.Context, rawURL string, logger *slog.Logger, create bool) (*Bucket, error) {
	if logger == nil {
		logger = slog.Default()
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error quotes the whole URL, secrets and all
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	var backend objstore.ObjectStore
	switch u.Scheme {
	case "file":
		backend, err = openFileURL(u, create)
	case "s3":
		backend, err = openS3URL(ctx, u, logger)
	default:
		err = fmt.Errorf("%w: scheme %q (want file or s3)", ErrBadURL, u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	counts := objstore.NewCounting(backend)
	retrying, err := objstore.NewRetrying(counts, objstore.RetryPolicy{Logger: logger})
	if err != nil {
		return nil, err
	}
	return &Bucket{ObjectStore: retrying, Counts: counts, Backend: backend, URL: Redact(u)}, nil
}

func openFileURL(u *url.URL, create bool) (objstore.ObjectStore, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("%w: file URL with host %q (want file:///path)", ErrBadURL, u.Host)
	}
	path := u.Path
	if u.Opaque != "" {
		path = u.Opaque // file:relative/dir
	}
	if path == "" || len(u.Query()) > 0 {
		return nil, fmt.Errorf("%w: file URL needs a path and takes no parameters", ErrBadURL)
	}
	if !create {
		if info, err := os.Stat(path); err != nil {
			if os.IsNotExist(err) {
				return nil, fmt.Errorf("%w: directory %s does not exist", ErrBadURL, path)
			}
			return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
		} else if !info.IsDir() {
			return nil, fmt.Errorf("%w: %s is not a directory", ErrBadURL, path)
		}
	}
	store, err := file.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return store, nil
}

func openS3URL(ctx context.Context, u *url.URL, logger *slog.Logger) (objstore.ObjectStore, error) {
	cfg, err := S3ConfigFromURL(u)
	if err != nil {
		return nil, err
	}
	cfg.Logger = logger
	store, err := s3.New(ctx, cfg)
	if errors.Is(err, s3.ErrNoCredentials) {
		return nil, err // the URL is fine; the environment lacks keys
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return store, nil
}

// ErrCredentialsInURL: an s3 URL carried access-key or secret-key.
var ErrCredentialsInURL = errors.New("tier: credentials in the object-store URL are not accepted " +
	"(use credentials-file=PATH, an AWS shared-credentials file, or the AWS chain: " +
	"AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, instance roles)")

// s3URLParams are the parameters an s3 URL may carry.
var s3URLParams = map[string]bool{"endpoint": true, "region": true, "sse": true, "sse-kms-key-id": true,
	"credentials-file": true, "profile": true, "path-style": true, "part-size": true,
	"multipart-threshold": true, "concurrency": true}

// S3ConfigFromURL parses an s3:// URL into the backend's Config.
func S3ConfigFromURL(u *url.URL) (s3.Config, error) {
	q := u.Query()
	cfg := s3.Config{
		Bucket:          u.Host,
		Prefix:          strings.Trim(u.Path, "/"),
		Endpoint:        q.Get("endpoint"),
		Region:          q.Get("region"),
		SSE:             q.Get("sse"),
		SSEKMSKeyID:     q.Get("sse-kms-key-id"),
		CredentialsFile: q.Get("credentials-file"),
		Profile:         q.Get("profile"),
		PathStyle:       q.Get("endpoint") != "",
	}
	if q.Has("access-key") || q.Has("secret-key") || u.User != nil {
		return s3.Config{}, fmt.Errorf("%w: %w", ErrBadURL, ErrCredentialsInURL)
	}
	for k := range q {
		if !s3URLParams[k] {
			return cfg, fmt.Errorf("%w: unknown s3 URL parameter %q", ErrBadURL, k)
		}
	}
	if cfg.Bucket == "" {
		return cfg, fmt.Errorf("%w: s3 URL without bucket", ErrBadURL)
	}
	switch cfg.SSE {
	case "", "AES256", "aws:kms":
	default:
		return cfg, fmt.Errorf("%w: sse=%q (want AES256 or aws:kms)", ErrBadURL, cfg.SSE)
	}
	if cfg.SSEKMSKeyID != "" && cfg.SSE != "aws:kms" {
		return cfg, fmt.Errorf("%w: sse-kms-key-id needs sse=aws:kms", ErrBadURL)
	}
	return cfg, parseS3Numbers(q, &cfg)
}

func parseS3Numbers(q url.Values, cfg *s3.Config) error {
	var err error
	parse := func(name string) int64 {
		v := q.Get(name)
		if v == "" || err != nil {
			return 0
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n <= 0 {
			err = fmt.Errorf("%w: %s=%q is not a positive integer", ErrBadURL, name, v)
		}
		return n
	}
	if v := q.Get("path-style"); v != "" {
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return fmt.Errorf("%w: path-style=%q", ErrBadURL, v)
		}
		cfg.PathStyle = b
	}
	cfg.PartSize = parse("part-size")
	cfg.MultipartThreshold = parse("multipart-threshold")
	cfg.Concurrency = int(min(parse("concurrency"), 1<<16))
	return err
}

// Redact returns u without secrets (key parameters, user info), for logs.
// OpenURL refuses such URLs; Redact still hides what a refused one carried.
func Redact(u *url.URL) string {
	c := *u
	q := c.Query()
	redacted := false
	for _, k := range []string{"secret-key", "access-key"} {
		if q.Has(k) {
			q.Set(k, "REDACTED")
			redacted = true
		}
	}
	if redacted {
		c.RawQuery = q.Encode()
	}
	c.User = nil
	return c.String()
}
