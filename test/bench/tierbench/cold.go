package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// coldRead is what one pass over [0, tiered end) measured.
type coldRead struct {
	records, valueBytes int64 // valueBytes: record values (kgo) or whole batches (raw)
	elapsed             time.Duration
	complete            bool // every partition reached its end
}

// tieredEnds maps each tiered partition to the end of its bucket range,
// and sums the object bytes that cover it.
func tieredEnds(ctx context.Context, httpAddr, topic string) (map[int32]int64, int64, error) {
	st, err := tierStatus(ctx, httpAddr, topic)
	if err != nil {
		return nil, 0, err
	}
	ends := make(map[int32]int64)
	var objBytes int64
	for _, p := range st {
		if p.Tiered && p.TieredEnd > 0 {
			ends[p.Partition] = p.TieredEnd
			objBytes += p.TieredBytes
		}
	}
	if len(ends) == 0 {
		return nil, 0, errors.New("no partition has data in the bucket")
	}
	return ends, objBytes, nil
}

// coldOpts tune a cold reader.
type coldOpts struct {
	maxPartBytes int32   // kgo FetchMaxPartitionBytes; 0: kgo's default (1 MiB)
	bytesPerSec  float64 // client-side pacing of value bytes; 0: flat out
}

// readCold consumes every partition in ends from offset 0 until its end
// offset, or until ctx ends (complete is then false).
func readCold(ctx context.Context, brokers []string, topic string, ends map[int32]int64, o coldOpts) (coldRead, error) {
	offsets := make(map[int32]kgo.Offset, len(ends))
	for p := range ends {
		offsets[p] = kgo.NewOffset().At(0)
	}
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})}
	if o.maxPartBytes > 0 {
		opts = append(opts, kgo.FetchMaxPartitionBytes(o.maxPartBytes))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return coldRead{}, err
	}
	defer cl.Close()
	var res coldRead
	start := time.Now()
	left := len(ends)
	for left > 0 && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				say("cold fetch error %s/%d: %v", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			end, ok := ends[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			res.records++
			res.valueBytes += int64(len(r.Value))
			if r.Offset == end-1 {
				left--
			}
		})
		pace(ctx, start, res.valueBytes, o.bytesPerSec)
	}
	res.elapsed = time.Since(start)
	res.complete = left == 0
	return res, nil
}

// coldReader is readCold (kgo consumer) or readColdRaw (raw Fetch).
type coldReader func(ctx context.Context, brokers []string, topic string, ends map[int32]int64, o coldOpts) (coldRead, error)

// coldClient picks the client by its --client name; bytesName is what the
// byte count means in the summary line.
func coldClient(name string) (read coldReader, bytesName string, err error) {
	switch name {
	case "kgo":
		return readCold, "value_bytes", nil
	case "raw":
		return readColdRaw, "batch_bytes", nil
	}
	return nil, "", fmt.Errorf("--client %q: want kgo or raw", name)
}

// pace sleeps until bytes read since start are within bytesPerSec.
func pace(ctx context.Context, start time.Time, bytes int64, bytesPerSec float64) {
	if bytesPerSec <= 0 {
		return
	}
	due := start.Add(time.Duration(float64(bytes) / bytesPerSec * float64(time.Second)))
	select {
	case <-ctx.Done():
	case <-time.After(time.Until(due)):
	}
}

// runCold is the cold catch-up measurement: one consumer reads every
// record the bucket holds, from offset 0, while the broker counts GETs.
func runCold(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("cold", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "comma-separated brokers")
	httpAddr := fs.String("http", "", "broker --http host:port")
	topic := fs.String("topic", "", "topic")
	maxPart := fs.Int("fetch-max-partition-bytes", 0, "kgo FetchMaxPartitionBytes (0: kgo's default, 1 MiB)")
	timeout := fs.Duration("timeout", 120*time.Second, "give up after")
	client := fs.String("client", "kgo", "kgo: a kgo consumer decoding every record; raw: raw Fetch requests (batches CRC-checked, records not decoded)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	read, bytesName, err := coldClient(*client)
	if err != nil {
		return err
	}
	ends, objBytes, err := tieredEnds(ctx, *httpAddr, *topic)
	if err != nil {
		return err
	}
	gets0, getBytes0, err := getCounters(ctx, *httpAddr)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	res, err := read(rctx, brokerList(*brokers), *topic, ends, coldOpts{maxPartBytes: int32(*maxPart)})
	if err != nil {
		return err
	}
	if !res.complete {
		return fmt.Errorf("cold read incomplete after %v: %d records", *timeout, res.records)
	}
	gets1, getBytes1, err := getCounters(ctx, *httpAddr)
	if err != nil {
		return err
	}
	gets, getBytes := gets1-gets0, getBytes1-getBytes0
	say("cold catch-up (%s client): %d records, %d %s (%d object B) in %.2fs: %.1f MB/s of objects, %.1f MB/s of %s; broker GETs %d for %d B",
		*client, res.records, res.valueBytes, bytesName, objBytes, res.elapsed.Seconds(), mbps(objBytes, res.elapsed),
		mbps(res.valueBytes, res.elapsed), bytesName, gets, getBytes)
	fmt.Printf("cold client=%s records=%d %s=%d object_bytes=%d seconds=%.3f mb_per_sec=%.2f %s_mb_per_sec=%.2f gets=%d get_bytes=%d\n",
		*client, res.records, bytesName, res.valueBytes, objBytes, res.elapsed.Seconds(), mbps(objBytes, res.elapsed),
		strings.TrimSuffix(bytesName, "_bytes"), mbps(res.valueBytes, res.elapsed), gets, getBytes)
	return nil
}
