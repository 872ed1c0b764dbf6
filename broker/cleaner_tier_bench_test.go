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
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// BenchmarkCleanerTiered reports tiered cleaning throughput in MB/s of
// input (the bytes of the partition's objects): full tiered passes of the
// broker's own code (offset map from the downloaded objects, runs spooled,
// rewritten, cut into objects, uploaded and swapped in the manifest by
// tier.Compactor) over the benchmark input of BenchmarkCleaner (200,000
// records over 10,000 keys in 1 MiB segments), every segment uploaded to
// an in-memory object store. In the same run, over the same data, it
// measures two baselines:
//   - objread-MB/s: reading the objects' batches once (tier.NewObjectBatches:
//     download and verification, no cleaning); x-objread is the cleaner's
//     speed as a fraction of it (a pass reads the objects twice: map, runs);
//   - local-MB/s: the local cleaner on the same partition's local
//     segments (BenchmarkCleaner's measurement); x-local is the tiered
//     cleaner's speed as a fraction of it.
//
// Producing and uploading the input is not timed.
func BenchmarkCleanerTiered(b *testing.B) {
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	} {
		b.Run("codec="+c.name, func(b *testing.B) { benchCleanerTiered(b, c.codec) })
	}
}

// tierBenchTotals accumulates one benchmark's measurements.
type tierBenchTotals struct {
	objectBytes, segmentBytes, outBytes int64
	objRead, tierClean, localClean      time.Duration
}

func benchCleanerTiered(b *testing.B, codec kgo.CompressionCodec) {
	br := startTierBenchBroker(b, objstore.NewMemStore())
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr().String()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.MaxBufferedRecords(50_000), kgo.ProducerBatchCompression(codec))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var tot tierBenchTotals
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		p := benchTieredPartition(b, br, cl, fmt.Sprintf("tbench-%d", i))
		entries := p.manifest.Segments(p.topicID, p.index)
		tot.objRead += readObjects(b, br, entries)
		for _, e := range entries {
			tot.objectBytes += e.Size
		}

		b.StartTimer()
		start := time.Now()
		tot.outBytes += cleanTieredFully(b, br, p)
		tot.tierClean += time.Since(start)
		b.StopTimer()

		segs := p.log.CleanableSegments(br.cleaner.FirstUncleanable(cleanerView{br, p}, time.Now()))
		for _, s := range segs {
			tot.segmentBytes += s.Size
		}
		start = time.Now()
		cleanLocalFully(b, br, p)
		tot.localClean += time.Since(start)
	}
	b.SetBytes(tot.objectBytes / int64(b.N))
	tierMBps := float64(tot.objectBytes) / 1e6 / tot.tierClean.Seconds()
	readMBps := float64(tot.objectBytes) / 1e6 / tot.objRead.Seconds()
	localMBps := float64(tot.segmentBytes) / 1e6 / tot.localClean.Seconds()
	b.ReportMetric(readMBps, "objread-MB/s")
	b.ReportMetric(tierMBps/readMBps, "x-objread")
	b.ReportMetric(localMBps, "local-MB/s")
	b.ReportMetric(tierMBps/localMBps, "x-local")
	b.ReportMetric(float64(tot.outBytes)/float64(tot.objectBytes), "out/in")
}

// startTierBenchBroker runs a broker tiered to store with its cleaner loop
// off (the benchmark drives passes itself).
func startTierBenchBroker(b *testing.B, store objstore.ObjectStore) *Broker {
	return startBenchBrokerWith(b, func(c *Config) {
		tierTestConfig(store)(c)
		c.Cleaner.ObjectDeleteGrace = time.Hour
	})
}

// benchTieredPartition creates a compacted, tiered topic (local retention
// unbounded, so the local cleaner has the same data), fills it like
// benchPartition, and waits until every sealed segment is in the manifest.
func benchTieredPartition(b *testing.B, br *Broker, cl *kgo.Client, topic string) *partition {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "internal.segment.bytes": kadm.StringPtr("1048576"),
		"local.retention.bytes": kadm.StringPtr("-1"), "retention.bytes": kadm.StringPtr("-1"),
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
	for {
		if end, ok := p.manifest.ContiguousEnd(p.topicID, p.index); ok && end >= sealedEnd(p) {
			return p
		}
		if ctx.Err() != nil {
			b.Fatalf("%s: sealed segments not uploaded within 2 minutes", topic)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readObjects reads every batch of entries once (the baseline).
func readObjects(b *testing.B, br *Broker, entries []metadata.TierEntry) time.Duration {
	start := time.Now()
	src := tier.NewObjectBatches(context.Background(), br.objects, entries)
	defer src.Close()
	for {
		_, err := src.Next()
		if errors.Is(err, io.EOF) {
			return time.Since(start)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

// cleanTieredFully runs tiered passes until the bucket's copy is clean to
// its end and returns the bytes written.
func cleanTieredFully(b *testing.B, br *Broker, p *partition) int64 {
	var out int64
	for pass := 0; ; pass++ {
		entries := p.manifest.Segments(p.topicID, p.index)
		if p.cleaned.TierCheckpoint() > entries[len(entries)-1].LastOffset {
			return out
		}
		if pass == 100 {
			b.Fatalf("tiered cleaning not done after 100 passes")
		}
		stats, err := br.cleaner.CleanTiered(context.Background(), cleanerView{br, p}, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		out += stats.BytesOut
	}
}

// cleanLocalFully runs local passes until none is left to run.
func cleanLocalFully(b *testing.B, br *Broker, p *partition) {
	for {
		_, err := br.cleaner.CleanPartition(context.Background(), cleanerView{br, p}, time.Now())
		if errors.Is(err, compaction.ErrNothingToClean) {
			return
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
