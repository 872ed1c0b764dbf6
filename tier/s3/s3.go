// Package s3 is the S3 backend of the tier's object store, for AWS S3 and
// S3-compatible stores such as MinIO. It is the only package that imports
// aws-sdk-go-v2.
//
// Object keys are Config.Prefix + "/" + key (just key with no prefix).
// Objects at or above MultipartThreshold go up as multipart uploads with
// Concurrency parts in flight; each part is retried on transient errors by
// PartRetry, and a failed upload is aborted so that no parts linger (a bucket
// lifecycle rule for incomplete uploads is still advisable). The SDK's own
// retryer is disabled: retries happen in one place, objstore.Retrying (and
// PartRetry for parts), so attempts are counted and bounded once.
//
// Errors: 404 / NoSuchKey / NotFound wrap objstore.ErrNotFound; 5xx, 429,
// SlowDown, RequestTimeout, throttling codes and failures to send a request
// or read a response (connection refused or reset, timeouts) wrap
// objstore.ErrTransient; the rest (403, NoSuchBucket, 400, ...) are permanent.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/strata-log/strata/tier/objstore"
)

// Limits of S3 multipart uploads.
const (
	minPartSize = 5 << 20
	maxParts    = 10000
)

// Config configures the S3 backend.
type Config struct {
	// Bucket is the bucket name. Required.
	Bucket string
	// Prefix is prepended to every key ("" for none; no leading or trailing '/').
	Prefix string
	// Endpoint is the service URL, e.g. http://127.0.0.1:9000 for MinIO; "" for AWS.
	Endpoint string
	// Region; "" takes it from the AWS chain (AWS_REGION, profile), else us-east-1.
	Region string
	// PathStyle addresses buckets as endpoint/bucket (MinIO) rather than bucket.endpoint.
	PathStyle bool
	// AccessKeyID and SecretAccessKey (and SessionToken) are static credentials
	// for programs and tests; empty means CredentialsFile, else the standard
	// AWS chain (env, profile, web identity, IMDS). See credentials.go.
	AccessKeyID, SecretAccessKey, SessionToken string
	// CredentialsFile is an AWS shared-credentials file to take the keys of
	// Profile from (nothing else is read then). "" for the AWS chain.
	CredentialsFile string
	// Profile is the profile of CredentialsFile (default "default"), or,
	// without one, the AWS chain's profile (as AWS_PROFILE).
	Profile string
	// SSE is server-side encryption: "" (bucket default), "AES256" or "aws:kms".
	SSE string
	// SSEKMSKeyID is the KMS key for SSE "aws:kms" ("" for the account default).
	SSEKMSKeyID string
	// MultipartThreshold: objects of at least this many bytes use multipart upload. Default 16 MiB.
	MultipartThreshold int64
	// PartSize is the multipart part size in bytes (>= 5 MiB); grown if an
	// object would need more than 10,000 parts. Default 8 MiB.
	PartSize int64
	// Concurrency is the number of parts uploaded in parallel. Default 4.
	Concurrency int
	// ListPageSize is the MaxKeys of each ListObjectsV2 page (0: the
	// server's default, 1000 on AWS); List follows continuation tokens
	// across pages either way.
	ListPageSize int32
	// PartRetry retries one part's upload on transient errors. Defaults as objstore.RetryPolicy.
	PartRetry objstore.RetryPolicy
	// HTTPClient replaces the SDK's HTTP client (tests inject faults with it).
	HTTPClient *http.Client
	// Logger gets structured logs. Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.MultipartThreshold == 0 {
		c.MultipartThreshold = 16 << 20
	}
	if c.PartSize == 0 {
		c.PartSize = 8 << 20
	}
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.PartRetry = c.PartRetry.WithDefaults()
	c.Prefix = strings.Trim(c.Prefix, "/")
	return c
}

// Validate rejects nonsense (after defaults).
func (c Config) Validate() error {
	switch {
	case c.Bucket == "":
		return errors.New("s3: empty bucket name")
	case c.PartSize < minPartSize:
		return fmt.Errorf("s3: part size %d below the S3 minimum %d", c.PartSize, minPartSize)
	case c.MultipartThreshold < c.PartSize:
		return fmt.Errorf("s3: multipart threshold %d below part size %d", c.MultipartThreshold, c.PartSize)
	case c.Concurrency < 1 || c.Concurrency > 64:
		return fmt.Errorf("s3: concurrency %d not in [1, 64]", c.Concurrency)
	case c.SSE != "" && c.SSE != "AES256" && c.SSE != "aws:kms":
		return fmt.Errorf("s3: server-side encryption %q not one of AES256, aws:kms", c.SSE)
	case (c.AccessKeyID == "") != (c.SecretAccessKey == ""):
		return errors.New("s3: static credentials need both access key id and secret")
	case c.AccessKeyID != "" && c.CredentialsFile != "":
		return errors.New("s3: static credentials and a credentials file both given")
	case c.SSEKMSKeyID != "" && c.SSE != "aws:kms":
		return errors.New("s3: an SSE KMS key id needs sse aws:kms")
	}
	if c.Prefix != "" {
		if err := objstore.ValidateKey(c.Prefix); err != nil {
			return fmt.Errorf("s3: prefix: %w", err)
		}
	}
	return c.PartRetry.Validate()
}

// Store is an S3-backed objstore.ObjectStore. Immutable after New; the SDK
// client is safe for concurrent use.
type Store struct {
	cfg    Config
	client *s3.Client
	stats  multipartCounters
}

// MultipartStats counts the requests a multipart Put makes beyond the one
// PUT that objstore.Counting sees (S3 bills each of them).
type MultipartStats struct {
	Uploads     int64 // CreateMultipartUpload requests that succeeded
	Parts       int64 // UploadPart requests, including retries
	PartRetries int64 // UploadPart attempts after the first, per part
	Completed   int64 // CompleteMultipartUpload requests that succeeded
	Aborted     int64 // AbortMultipartUpload requests made after a failure
}

// multipartCounters is updated by upload goroutines; atomics, no lock.
type multipartCounters struct {
	uploads, parts, partRetries, completed, aborted atomic.Int64
}

// MultipartStats returns a snapshot of the multipart counters.
func (s *Store) MultipartStats() MultipartStats {
	c := &s.stats
	return MultipartStats{Uploads: c.uploads.Load(), Parts: c.parts.Load(), PartRetries: c.partRetries.Load(),
		Completed: c.completed.Load(), Aborted: c.aborted.Load()}
}

var _ objstore.ObjectStore = (*Store)(nil)

// New builds a client. It makes no request: a missing bucket shows up on first use.
func New(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var opts []func(*awsconfig.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	creds, err := credentialOptions(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, creds...)
	// The SDK's own log lines (e.g. "falling back to IMDSv1") would reach
	// stderr raw; what matters comes back as errors, reported by us.
	opts = append(opts, awsconfig.WithLogger(logging.Nop{}))
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: loading AWS config: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	if err := checkCredentials(ctx, awsCfg.Credentials); err != nil {
		return nil, err
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		if cfg.HTTPClient != nil {
			o.HTTPClient = cfg.HTTPClient
		}
		o.Retryer = aws.NopRetryer{}
		// Our objects carry their own CRCs; WhenRequired avoids aws-chunked
		// trailers that some S3-compatible stores reject.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	return &Store{cfg: cfg, client: client}, nil
}

// fullKey maps a store key to the bucket key.
func (s *Store) fullKey(key string) string {
	if s.cfg.Prefix == "" {
		return key
	}
	return s.cfg.Prefix + "/" + key
}

// classify wraps SDK errors in the objstore error classes (see package doc).
func classify(op, key string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("s3: %s %s: %w", op, key, err)
	}
	short := &shortError{msg: shortMessage(err), err: err}
	if isNotFound(err) {
		return fmt.Errorf("s3: %s %s: %w: %w", op, key, objstore.ErrNotFound, short)
	}
	if isTransient(err) {
		return fmt.Errorf("s3: %s %s: %w: %w", op, key, objstore.ErrTransient, short)
	}
	return fmt.Errorf("s3: %s %s: %w", op, key, short)
}

// shortError is an SDK error told in one line: the SDK's own text nests
// the operation, the request id and the whole middleware chain. The
// original stays reachable through errors.As / errors.Is.
type shortError struct {
	msg string
	err error
}

func (e *shortError) Error() string { return e.msg }
func (e *shortError) Unwrap() error { return e.err }

// shortMessage names the cause of an SDK error, with what to do about the
// common ones.
func shortMessage(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code, msg := apiErr.ErrorCode(), apiErr.ErrorMessage()
		if msg == "" {
			msg = http.StatusText(statusCode(err))
		}
		switch code {
		case "NoSuchBucket":
			return "the bucket does not exist (NoSuchBucket): create it, or fix the bucket name in --object-store"
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken":
			return fmt.Sprintf("%s (%s): check the credentials and their permissions on the bucket", msg, code)
		}
		return fmt.Sprintf("%s (%s, HTTP %d)", msg, code, statusCode(err))
	}
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) {
		return fmt.Sprintf("cannot reach the endpoint: %v", errors.Unwrap(sendErr))
	}
	if code := statusCode(err); code != 0 {
		return fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	}
	return err.Error()
}

func isNotFound(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return true
		case "NoSuchBucket", "NoSuchUpload":
			return false
		}
	}
	return statusCode(err) == http.StatusNotFound && !errors.As(err, &apiErr)
}

func statusCode(err error) int {
	var withStatus interface{ HTTPStatusCode() int }
	if errors.As(err, &withStatus) {
		return withStatus.HTTPStatusCode()
	}
	return 0
}

func isTransient(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "SlowDown", "RequestTimeout", "InternalError", "ServiceUnavailable", "Throttling",
			"ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
			"XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum":
			return true
		}
	}
	if code := statusCode(err); code >= 500 || code == http.StatusTooManyRequests {
		return true
	}
	var sendErr *smithyhttp.RequestSendError
	if errors.As(err, &sendErr) {
		return true // the request did not get a response: refused, reset, DNS, timeout
	}
	return objstore.IsTransient(err)
}

// ReadRange implements objstore.ObjectStore.
func (s *Store) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 {
		return nil, objstore.CheckRange(offset, length, 0)
	}
	if length == 0 { // S3 has no empty ranges: check existence and bounds with HEAD
		info, err := s.Stat(ctx, key)
		if err != nil {
			return nil, err
		}
		if err := objstore.CheckRange(offset, 0, info.Size); err != nil {
			return nil, err
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(s.fullKey(key)),
		Range:  aws.String(fmt.Sprintf("bytes=%d-%d", offset, offset+length-1)),
	})
	if err != nil {
		if code := statusCode(err); code == http.StatusRequestedRangeNotSatisfiable {
			return nil, fmt.Errorf("%w: %s [%d, +%d): %v", objstore.ErrInvalidRange, key, offset, length, err)
		}
		return nil, classify("get", key, err)
	}
	// S3 serves the overlapping part of a range that runs past the end.
	if out.ContentLength == nil || *out.ContentLength != length {
		out.Body.Close()
		return nil, fmt.Errorf("%w: %s [%d, +%d) runs past the object's end", objstore.ErrInvalidRange, key, offset, length)
	}
	return &body{ReadCloser: out.Body, key: key, left: length}, nil
}

// body classifies errors while reading a GET body and reports an early end
// as io.ErrUnexpectedEOF (transient: the retrying wrapper resumes).
type body struct {
	io.ReadCloser
	key  string
	left int64
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, io.EOF) && b.left > 0:
		return n, fmt.Errorf("s3: get %s: body ended %d bytes early: %w", b.key, b.left, io.ErrUnexpectedEOF)
	case errors.Is(err, io.EOF):
		return n, io.EOF
	}
	return n, classify("get body", b.key, err)
}

// List implements objstore.ObjectStore.
func (s *Store) List(ctx context.Context, prefix string) ([]objstore.ObjectInfo, error) {
	if err := objstore.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	fullPrefix := s.fullKey(prefix)
	if prefix == "" && s.cfg.Prefix != "" {
		fullPrefix = s.cfg.Prefix + "/"
	}
	input := &s3.ListObjectsV2Input{Bucket: aws.String(s.cfg.Bucket), Prefix: aws.String(fullPrefix)}
	if s.cfg.ListPageSize > 0 {
		input.MaxKeys = aws.Int32(s.cfg.ListPageSize)
	}
	pages := s3.NewListObjectsV2Paginator(s.client, input)
	var out []objstore.ObjectInfo
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, classify("list", prefix, err)
		}
		for _, obj := range page.Contents {
			out = append(out, s.info(obj))
		}
	}
	return out, nil
}

func (s *Store) info(obj types.Object) objstore.ObjectInfo {
	key := aws.ToString(obj.Key)
	if s.cfg.Prefix != "" {
		key = strings.TrimPrefix(key, s.cfg.Prefix+"/")
	}
	return objstore.ObjectInfo{Key: key, Size: aws.ToInt64(obj.Size), ModTime: aws.ToTime(obj.LastModified)}
}

// Delete implements objstore.ObjectStore.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if err != nil && isNotFound(err) {
		return nil
	}
	return classify("delete", key, err)
}

// Stat implements objstore.ObjectStore.
func (s *Store) Stat(ctx context.Context, key string) (objstore.ObjectInfo, error) {
	if err := objstore.ValidateKey(key); err != nil {
		return objstore.ObjectInfo{}, err
	}
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{
		Bucket: aws.String(s.cfg.Bucket),
		Key:    aws.String(s.fullKey(key)),
	})
	if err != nil {
		return objstore.ObjectInfo{}, classify("head", key, err)
	}
	return objstore.ObjectInfo{Key: key, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
}

// IsNotFound implements objstore.ObjectStore.
func (s *Store) IsNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }
