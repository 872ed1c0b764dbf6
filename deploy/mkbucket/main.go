// Command mkbucket creates an S3 bucket if it does not exist yet, waiting
// for the object store to come up: the init step of deploy/ (local-cluster.sh
// and docker-compose.yml), where no `mc` client is available.
//
//	mkbucket ENDPOINT BUCKET [REGION]
//
// ENDPOINT is http(s)://host:port; credentials come from MINIO_ROOT_USER and
// MINIO_ROOT_PASSWORD (the names MinIO itself reads). It retries for up to
// 60 s and exits 0 once the bucket exists.
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

const waitFor = 60 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkbucket:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 || len(args) > 3 {
		return fmt.Errorf("usage: mkbucket ENDPOINT BUCKET [REGION]")
	}
	region := "us-east-1"
	if len(args) == 3 {
		region = args[2]
	}
	u, err := url.Parse(args[0])
	if err != nil || u.Host == "" {
		return fmt.Errorf("bad endpoint %q", args[0])
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(os.Getenv("MINIO_ROOT_USER"), os.Getenv("MINIO_ROOT_PASSWORD"), ""),
		Secure: u.Scheme == "https",
		Region: region,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	return ensure(ctx, client, args[1], region)
}

// ensure retries until the bucket exists: the store may still be starting.
func ensure(ctx context.Context, client *minio.Client, bucket, region string) error {
	for {
		exists, err := client.BucketExists(ctx, bucket)
		if err == nil && !exists {
			err = client.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: region})
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("bucket %q: %w", bucket, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
