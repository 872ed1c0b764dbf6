package tier

import (
	"context"
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
//	   [&sse=AES256|aws:kms][&sse-kms-key-id=ID][&access-key=K&secret-key=S]
//	   [&part-size=BYTES][&multipart-threshold=BYTES][&concurrency=N]
//
// s3 credentials come from access-key/secret-key, else the standard AWS
// chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, profiles, web identity,
// instance roles). path-style defaults to true when an endpoint is given
// (MinIO), false for AWS. Errors wrap ErrBadURL.
func OpenURL(ctx context.Context, rawURL string, logger *slog.Logger) (*Bucket, error) {
	if logger == nil {
		logger = slog.Default()
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	var backend objstore.ObjectStore
	switch u.Scheme {
	case "file":
		backend, err = openFileURL(u)
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

func openFileURL(u *url.URL) (objstore.ObjectStore, error) {
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
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	return store, nil
}

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
		AccessKeyID:     q.Get("access-key"),
		SecretAccessKey: q.Get("secret-key"),
		PathStyle:       q.Get("endpoint") != "",
	}
	known := map[string]bool{"endpoint": true, "region": true, "sse": true, "sse-kms-key-id": true,
		"access-key": true, "secret-key": true, "path-style": true, "part-size": true,
		"multipart-threshold": true, "concurrency": true}
	for k := range q {
		if !known[k] {
			return cfg, fmt.Errorf("%w: unknown s3 URL parameter %q", ErrBadURL, k)
		}
	}
	if cfg.Bucket == "" {
		return cfg, fmt.Errorf("%w: s3 URL without bucket", ErrBadURL)
	}
	if cfg.AccessKeyID == "" && cfg.SecretAccessKey == "" {
		// Also honour MinIO's own variables for local development.
		cfg.AccessKeyID, cfg.SecretAccessKey = os.Getenv("MINIO_ROOT_USER"), os.Getenv("MINIO_ROOT_PASSWORD")
		if os.Getenv("AWS_ACCESS_KEY_ID") != "" || cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
			cfg.AccessKeyID, cfg.SecretAccessKey = "", "" // the standard chain wins
		}
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

// Redact returns u without the secret-key parameter, for logs.
func Redact(u *url.URL) string {
	c := *u
	q := c.Query()
	if q.Has("secret-key") {
		q.Set("secret-key", "REDACTED")
		c.RawQuery = q.Encode()
	}
	c.User = nil
	return c.String()
}
