package s3

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// Credentials come, in this order, from:
//   - Config.AccessKeyID/SecretAccessKey (programs and tests only: the
//     --object-store URL no longer takes keys, tier/url.go);
//   - Config.CredentialsFile, an AWS shared-credentials file
//     ("[profile]" sections with aws_access_key_id, aws_secret_access_key
//     and optionally aws_session_token), re-read every
//     fileCredentialsTTL so a rotated file is picked up;
//   - the standard AWS chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
//     AWS_PROFILE with ~/.aws/credentials (or AWS_SHARED_CREDENTIALS_FILE),
//     web identity, ECS and EC2 instance roles.
//
// Secrets are never logged: Config's String hides them, and errors name the
// file and profile only.

// fileCredentialsTTL is how long keys read from a credentials file are
// used before the file is read again.
const fileCredentialsTTL = 5 * time.Minute

// ErrNoCredentials: no source of the credential chain had keys.
var ErrNoCredentials = errors.New("no S3 credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY " +
	"(or AWS_PROFILE), or add credentials-file=PATH to the --object-store URL")

// credentialsTimeout bounds the first credential lookup. The AWS chain
// ends at the EC2 instance-metadata endpoint, which off EC2 may not answer
// at all; without a bound a misconfigured tool stalls instead of saying
// what is missing.
const credentialsTimeout = 5 * time.Second

// checkCredentials fetches credentials once, so that a store without any
// fails at open with ErrNoCredentials rather than at its first request,
// and not as a retryable error. The provider caches what it found.
func checkCredentials(ctx context.Context, provider aws.CredentialsProvider) error {
	if provider == nil {
		return ErrNoCredentials
	}
	ctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	if _, err := provider.Retrieve(ctx); err != nil {
		if errors.Is(err, errNoKeys) || strings.Contains(err.Error(), "credentials file") {
			return err // our own file's failure already says what is wrong
		}
		return ErrNoCredentials
	}
	return nil
}

// errNoKeys: the profile has no access key pair.
var errNoKeys = errors.New("s3: credentials file profile has no aws_access_key_id/aws_secret_access_key")

// fileCredentials is an aws.CredentialsProvider over one profile of one
// shared-credentials file; nothing else (no env, no ~/.aws/config) is read.
type fileCredentials struct {
	path, profile string
}

// Retrieve reads the file. Its credentials "expire" after
// fileCredentialsTTL so that aws.CredentialsCache reads it again.
func (f fileCredentials) Retrieve(ctx context.Context) (aws.Credentials, error) {
	sc, err := awsconfig.LoadSharedConfigProfile(ctx, f.profile, func(o *awsconfig.LoadSharedConfigOptions) {
		o.CredentialsFiles = []string{f.path}
		o.ConfigFiles = []string{}
	})
	if err != nil {
		return aws.Credentials{}, fmt.Errorf("s3: credentials file %s, profile %q: %w", f.path, f.profile, err)
	}
	c := sc.Credentials
	if !c.HasKeys() {
		return aws.Credentials{}, fmt.Errorf("%w: file %s, profile %q", errNoKeys, f.path, f.profile)
	}
	c.Source = "strata credentials file"
	c.CanExpire, c.Expires = true, time.Now().Add(fileCredentialsTTL)
	return c, nil
}

// credentialOptions picks the credential source of cfg for LoadDefaultConfig.
// A credentials file is read once here so that a missing or empty one fails
// at start, not at the first upload.
func credentialOptions(ctx context.Context, cfg Config) ([]func(*awsconfig.LoadOptions) error, error) {
	switch {
	case cfg.AccessKeyID != "":
		return []func(*awsconfig.LoadOptions) error{awsconfig.WithCredentialsProvider(
			aws.NewCredentialsCache(staticProvider(cfg)))}, nil
	case cfg.CredentialsFile != "":
		p := fileCredentials{path: cfg.CredentialsFile, profile: cfg.profile()}
		if _, err := p.Retrieve(ctx); err != nil {
			return nil, err
		}
		return []func(*awsconfig.LoadOptions) error{awsconfig.WithCredentialsProvider(aws.NewCredentialsCache(p))}, nil
	case cfg.Profile != "":
		return []func(*awsconfig.LoadOptions) error{awsconfig.WithSharedConfigProfile(cfg.Profile)}, nil
	}
	return nil, nil
}

func staticProvider(cfg Config) aws.CredentialsProviderFunc {
	return func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: cfg.AccessKeyID, SecretAccessKey: cfg.SecretAccessKey,
			SessionToken: cfg.SessionToken, Source: "strata static"}, nil
	}
}

func (c Config) profile() string {
	if c.Profile == "" {
		return "default"
	}
	return c.Profile
}

// String describes c without its secrets (so %v and %+v are safe to log).
func (c Config) String() string {
	keys := "aws chain"
	switch {
	case c.AccessKeyID != "":
		keys = "static keys (hidden)"
	case c.CredentialsFile != "":
		keys = fmt.Sprintf("file %s profile %q", c.CredentialsFile, c.profile())
	case c.Profile != "":
		keys = fmt.Sprintf("aws chain, profile %q", c.Profile)
	}
	return fmt.Sprintf("s3{bucket %q, prefix %q, endpoint %q, region %q, path-style %v, sse %q, sse-kms-key-id %q, credentials: %s}",
		c.Bucket, c.Prefix, c.Endpoint, c.Region, c.PathStyle, c.SSE, c.SSEKMSKeyID, keys)
}
