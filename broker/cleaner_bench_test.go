package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// Cleaner benchmark input: 200,000 keyed records over 10,000 keys with
// 40-60 byte values (about 16 MB of records), in 1 MiB segments.
const (
	benchCleanRecords = 200_000
	benchCleanKeys    = 10_000
)

// BenchmarkCleaner reports the log cleaner's throughput in MB/s of input
// (the sealed segments' bytes): one full pass of the broker's own cleaning
// code (offset map, two-pass rewrite, cleaned segments, ReplaceSegments,
// checkpoint) over a freshly produced partition. In the same run it
// measures a plain sequential read of the same segment files (read-MB/s)
// and reports the cleaner's speed as a fraction of it (x-read). Producing
// the input is not timed; the segments are in the page cache for both.
func BenchmarkCleaner(b *testing.B) {
	for _, c := range []struct {
		name   string
		codec  kgo.CompressionCodec
		dedupe int64 // 0: the default 128 MiB
	}{
		{"none", kgo.NoCompression(), 0},
		{"none", kgo.NoCompression(), 1 << 20}, // 43k keys: enough for the 10k
		{"lz4", kgo.Lz4Compression(), 0},
		{"zstd", kgo.ZstdCompression(), 0},
	} {
		mib := c.dedupe >> 20
		if c.dedupe == 0 {
			mib = 128
		}
		b.Run(fmt.Sprintf("codec=%s/dedupe=%dMiB", c.name, mib), func(b *testing.B) { benchCleaner(b, c.codec, c.dedupe) })
	}
}

func benchCleaner(b *testing.B, codec kgo.CompressionCodec, dedupe int64) {
	br := startBenchBroker(b, dedupe)
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr().String()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.MaxBufferedRecords(50_000), kgo.ProducerBatchCompression(codec))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var readTime, cleanTime time.Duration
	var inputBytes, outputBytes int64
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		p := benchPartition(b, br, cl, fmt.Sprintf("bench-%d", i))
		segs := p.log.CleanableSegments(br.cleaner.FirstUncleanable(cleanerView{br, p}, time.Now()))
		in, read := readSegments(b, p, segs)
		inputBytes, readTime = inputBytes+in, readTime+read

		b.StartTimer()
		start := time.Now()
		for {
			stats, err := br.cleaner.CleanPartition(context.Background(), cleanerView{br, p}, time.Now())
			if errors.Is(err, compaction.ErrNothingToClean) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			outputBytes += stats.BytesOut
		}
		cleanTime += time.Since(start)
		b.StopTimer()
	}
	b.SetBytes(inputBytes / int64(b.N))
	readMBps := float64(inputBytes) / 1e6 / readTime.Seconds()
	cleanMBps := float64(inputBytes) / 1e6 / cleanTime.Seconds()
	b.ReportMetric(readMBps, "read-MB/s")
	b.ReportMetric(cleanMBps/readMBps, "x-read")
	b.ReportMetric(float64(outputBytes)/float64(inputBytes), "out/in")
}

// startBenchBroker runs a broker with its cleaner loop off (the benchmark
// drives passes itself) over an embedded etcd; dedupe is the offset map's
// memory (0: the default).
func startBenchBroker(b *testing.B, dedupe int64) *Broker {
	return startBenchBrokerWith(b, func(c *Config) { c.Cleaner.DedupeBufferBytes = dedupe })
}

// startBenchBrokerWith runs a broker with its cleaner loop off and
// replication durability (no fsync per produce), edited by edit.
func startBenchBrokerWith(b *testing.B, edit func(*Config)) *Broker {
	endpoints := metadatatest.StartEmbedded(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := testBrokerLogger()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "bench", Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	cfg := Config{NodeID: 1, Listen: "127.0.0.1:0", DataDir: b.TempDir(), DefaultPartitions: 1, Logger: logger}
	edit(&cfg)
	cfg.Durability, cfg.Cleaner.Disable = hotlog.DurabilityReplication, true
	br, err := New(cfg, store)
	if err != nil {
		b.Fatal(err)
	}
	if err := br.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = br.Shutdown(ctx)
		store.Close()
	})
	return br
}

// benchPartition creates a compacted topic, fills it with the benchmark's
// records (then unique-key filler until they are all in sealed segments)
// and returns its partition once every record is below the high watermark.
func benchPartition(b *testing.B, br *Broker, cl *kgo.Client, topic string) *partition {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "remote.storage.enable": kadm.StringPtr("false"),
		"internal.segment.bytes": kadm.StringPtr("1048576"),
	}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatalf("create %s: %v", topic, err)
	}
	var p *partition
	for code := int16(-1); code != 0; p, code = br.parts.lookup(topic, 0) {
		if ctx.Err() != nil {
			b.Fatalf("%s never led here", topic)
		}
		time.Sleep(10 * time.Millisecond)
	}
	produceBench(ctx, b, cl, topic, 0, benchCleanRecords, func(i int) string { return fmt.Sprintf("key-%05d", i*7919%benchCleanKeys) })
	keyedEnd := p.highWatermark()
	for i := 0; sealedEnd(p) < keyedEnd; i++ {
		produceBench(ctx, b, cl, topic, i*5000, 5000, func(i int) string { return fmt.Sprintf("fill-%07d", i) })
	}
	return p
}

// sealedEnd is one past the last offset of p's sealed segments (0: none).
func sealedEnd(p *partition) int64 {
	segs := p.log.CleanableSegments(p.highWatermark())
	if len(segs) == 0 {
		return 0
	}
	return segs[len(segs)-1].NextOffset
}

// produceBench produces n records [from, from+n) keyed by key(i), with
// 40-60 byte values, and waits for all of them.
func produceBench(ctx context.Context, b *testing.B, cl *kgo.Client, topic string, from, n int, key func(int) string) {
	for i := from; i < from+n; i++ {
		value := fmt.Appendf(nil, "value-%08d-%x", i, uint64(i)*0x9E3779B97F4A7C15)
		for len(value) < 40+i%21 {
			value = append(value, byte('a'+i%26))
		}
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(key(i)), Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Errorf("produce: %v", err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

// readSegments reads segs sequentially, as the baseline, and returns their
// bytes and the time taken.
func readSegments(b *testing.B, p *partition, segs []hotlog.SegmentInfo) (int64, time.Duration) {
	start := time.Now()
	var total int64
	buf := make([]byte, 1<<20)
	for _, s := range segs {
		f, size, err := p.log.OpenSealedSegment(s.BaseOffset)
		if err != nil {
			b.Fatal(err)
		}
		for off := int64(0); off < size; {
			n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
			if err != nil && !errors.Is(err, io.EOF) || n == 0 {
				b.Fatalf("reading segment %d at %d: %v", s.BaseOffset, off, err)
			}
			off += int64(n)
		}
		f.Close()
		total += size
	}
	return total, time.Since(start)
}
