// Command tierbench holds the measurements behind test/bench/cold.sh (the
// performance suite's cold catch-up and hot-tail cases; tier.sh,
// the tiered-storage benchmark, wraps it). The script starts
// MinIO and `strata serve`; this tool measures against them:
//
//	tierbench freeport                      print a free loopback host:port
//	tierbench mkbucket --endpoint URL ...   create the bucket (minio-go)
//	tierbench wait-tiered ...               wait until most data is only in the bucket
//	tierbench rawget ...                    raw ranged GETs of the topic's objects
//	tierbench cold [--client kgo|raw] ...   cold catch-up, offsets [0, tiered end)
//	tierbench hot ...                       paced producer + tail consumer (e2e latency)
//	tierbench backfill [--client kgo|raw]   cold reads of [0, tiered end), repeated
//
// Every measuring subcommand prints human lines on stderr and one
// key=value summary line on stdout for the script. Benchmarks assert
// nothing about speed. TIERBENCH_CPUPROFILE=FILE writes a CPU profile of
// the tool itself (the client's share of a measurement).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopProfile, err := startProfile(os.Getenv("TIERBENCH_CPUPROFILE"))
	if err == nil {
		err = run(ctx, os.Args[1:])
		stopProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tierbench:", err)
		os.Exit(1)
	}
}

// startProfile writes a CPU profile of this process to path (when set:
// TIERBENCH_CPUPROFILE) until the returned function is called, to see what
// a client costs next to the broker it measures.
func startProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("want a subcommand: freeport, mkbucket, wait-tiered, rawget, cold, hot, backfill")
	}
	cmds := map[string]func(context.Context, []string) error{
		"freeport": runFreePort, "mkbucket": runMkBucket, "wait-tiered": runWaitTiered,
		"rawget": runRawGet, "cold": runCold, "hot": runHot, "backfill": runBackfill,
	}
	f, ok := cmds[args[0]]
	if !ok {
		return fmt.Errorf("unknown subcommand %q", args[0])
	}
	return f(ctx, args[1:])
}

func runFreePort(context.Context, []string) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println(l.Addr().String())
	return nil
}

// runMkBucket creates a bucket with minio-go (independent of our S3 client).
func runMkBucket(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkbucket", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "host:port of MinIO")
	bucket := fs.String("bucket", "strata-bench", "bucket name")
	access := fs.String("access-key", "", "access key")
	secret := fs.String("secret-key", "", "secret key")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := minio.New(strings.TrimPrefix(*endpoint, "http://"),
		&minio.Options{Creds: credentials.NewStaticV4(*access, *secret, ""), Region: "us-east-1"})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return cl.MakeBucket(ctx, *bucket, minio.MakeBucketOptions{Region: "us-east-1"})
}

func brokerList(s string) []string { return strings.Split(s, ",") }

func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
