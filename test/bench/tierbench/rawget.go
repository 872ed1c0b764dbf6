package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// rangeJob is one ranged GET of the raw baseline.
type rangeJob struct {
	key          string
	offset, size int64
}

// runRawGet reads every segment object of a topic with ranged GETs through
// the broker's own object-store stack (tier.OpenURL: Retrying(Counting(s3))
// with the same URL), --concurrency GETs in flight, and reports MB/s of
// object bytes and the GETs it made.
func runRawGet(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("rawget", flag.ContinueOnError)
	storeURL := fs.String("object-store", "", "the broker's --object-store URL")
	cluster := fs.String("cluster", "strata", "the broker's --cluster")
	topic := fs.String("topic", "", "topic whose objects to read")
	rangeSize := fs.Int64("range", 8<<20, "bytes per ranged GET (the cold path's default fetch size)")
	concurrency := fs.Int("concurrency", tier.DefaultColdWorkers, "GETs in flight (default: the cold path's worker pool)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rangeSize <= 0 || *concurrency <= 0 {
		return errors.New("range and concurrency must be > 0")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bucket, err := tier.OpenURL(ctx, *storeURL, logger)
	if err != nil {
		return err
	}
	objs, err := bucket.List(ctx, *cluster+"/topics/"+*topic+"-")
	if err != nil {
		return err
	}
	jobs, total, nobj := rangeJobs(objs, *rangeSize)
	before := getCount(bucket.Counts)
	start := time.Now()
	if err := readAll(ctx, bucket, jobs, *concurrency, *rangeSize); err != nil {
		return err
	}
	elapsed := time.Since(start)
	gets := getCount(bucket.Counts) - before
	say("raw GET: %d objects, %d B in %.2fs: %.1f MB/s, %d GETs", nobj, total, elapsed.Seconds(), mbps(total, elapsed), gets)
	fmt.Printf("rawget objects=%d bytes=%d seconds=%.3f mb_per_sec=%.2f gets=%d\n",
		nobj, total, elapsed.Seconds(), mbps(total, elapsed), gets)
	return nil
}

// rangeJobs splits the segment objects (.seg) into aligned ranges.
func rangeJobs(objs []objstore.ObjectInfo, rangeSize int64) (jobs []rangeJob, total int64, n int) {
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".seg") {
			continue
		}
		total += o.Size
		n++
		for off := int64(0); off < o.Size; off += rangeSize {
			jobs = append(jobs, rangeJob{key: o.Key, offset: off, size: min(rangeSize, o.Size-off)})
		}
	}
	return jobs, total, n
}

func getCount(c *objstore.Counting) int64 {
	var n int64
	for k, v := range c.Snapshot() {
		if k.Op == objstore.OpGet {
			n += v.Requests
		}
	}
	return n
}

// readAll runs jobs on workers goroutines, each reading bodies into its own
// buffer (the data is read, not just requested).
func readAll(ctx context.Context, store objstore.ObjectStore, jobs []rangeJob, workers int, bufSize int64) error {
	ch := make(chan rangeJob)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, bufSize)
			for j := range ch {
				if err := readRange(ctx, store, j, buf); err != nil {
					mu.Lock()
					firstErr = errors.Join(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return firstErr
}

func readRange(ctx context.Context, store objstore.ObjectStore, j rangeJob, buf []byte) error {
	rc, err := store.ReadRange(ctx, j.key, j.offset, j.size)
	if err != nil {
		return fmt.Errorf("GET %s [%d,+%d): %w", j.key, j.offset, j.size, err)
	}
	defer rc.Close()
	if _, err := io.ReadFull(rc, buf[:j.size]); err != nil {
		return fmt.Errorf("reading %s [%d,+%d): %w", j.key, j.offset, j.size, err)
	}
	return nil
}
