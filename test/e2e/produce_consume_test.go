package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// codecs are every compression codec Kafka knows, one producer each.
var codecs = []struct {
	name  string
	codec kgo.CompressionCodec
}{
	{"none", kgo.NoCompression()},
	{"gzip", kgo.GzipCompression()},
	{"snappy", kgo.SnappyCompression()},
	{"lz4", kgo.Lz4Compression()},
	{"zstd", kgo.ZstdCompression()},
}

const pcPartitions = 8

// genRecord is record i of producer c: deterministic, so the consumer side
// can recompute what it should read. Null keys, null values and headers
// (none, one, two with an empty value) are mixed in.
func genRecord(c, i int) *kgo.Record {
	r := &kgo.Record{Partition: int32(i % pcPartitions)}
	if i%7 != 0 {
		r.Key = fmt.Appendf(nil, "k-%d-%d", c, i)
	}
	if i%11 != 0 {
		r.Value = fmt.Appendf(nil, "v-%d-%d-%s", c, i, strings.Repeat("x", i%50))
	}
	switch i % 5 {
	case 1:
		r.Headers = []kgo.RecordHeader{{Key: "id", Value: fmt.Appendf(nil, "%d/%d", c, i)}}
	case 2, 3:
		r.Headers = []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "empty", Value: []byte{}}}
	}
	return r
}

// sameRecord reports how got differs from want (key, value, headers), "" if not.
func sameRecord(got, want *kgo.Record) string {
	if (got.Key == nil) != (want.Key == nil) || !bytes.Equal(got.Key, want.Key) {
		return fmt.Sprintf("key %q, want %q", got.Key, want.Key)
	}
	if (got.Value == nil) != (want.Value == nil) || !bytes.Equal(got.Value, want.Value) {
		return fmt.Sprintf("value %q, want %q", got.Value, want.Value)
	}
	if len(got.Headers) != len(want.Headers) {
		return fmt.Sprintf("headers %v, want %v", got.Headers, want.Headers)
	}
	for i := range got.Headers {
		g, w := got.Headers[i], want.Headers[i]
		if g.Key != w.Key || !bytes.Equal(g.Value, w.Value) {
			return fmt.Sprintf("header %d = %s:%q, want %s:%q", i, g.Key, g.Value, w.Key, w.Value)
		}
	}
	return ""
}

// TestProduceConsumeAllCodecs: 1,000,000 records over 8 partitions from
// five default (idempotent, acks=all) producers, one per codec, are read back
// exactly once, in order, at the offsets the producers were told.
func TestProduceConsumeAllCodecs(t *testing.T) {
	perCodec := 200_000
	if testing.Short() {
		perCodec = 20_000
	}
	b := StartBroker(t)
	const topic = "all-codecs"
	createTopic(t, b.Admin(), topic, pcPartitions, nil)

	acked := produceAllCodecs(t, b, topic, perCodec)
	expect := expectedByOffset(t, acked, perCodec)

	ends := endOffsets(t, b.Admin(), topic)
	for p := int32(0); p < pcPartitions; p++ {
		if ends[p] != int64(len(expect[p])) {
			t.Fatalf("partition %d: end offset %d, want %d acknowledged records", p, ends[p], len(expect[p]))
		}
	}
	consumeAndCompare(t, b, topic, expect, perCodec)
	t.Logf("%d records produced with %d codecs and read back; end offsets %v", perCodec*len(codecs), len(codecs), ends)
	checkStoredAsSent(t, b, topic)
}

// checkStoredAsSent: batches are stored compressed as the producers sent
// them (DESIGN §3), so every codec appears in the segment files.
func checkStoredAsSent(t *testing.T, b *Broker, topic string) {
	seen := map[int16]int{}
	for p := int32(0); p < pcPartitions; p++ {
		for _, seg := range segmentFiles(t, b.PartitionDir(topic, p)) {
			for _, batch := range readBatches(t, seg) {
				seen[batch.attributes&7]++
			}
		}
	}
	for codec := range codecs {
		if seen[int16(codec)] == 0 {
			t.Errorf("no batch compressed with %s on disk (batches by codec: %v)", codecs[codec].name, seen)
		}
	}
}

// produceAllCodecs runs one producer per codec concurrently and returns, per
// codec, the offset each record was acknowledged at.
func produceAllCodecs(t *testing.T, b *Broker, topic string, perCodec int) [][]int64 {
	ctx := testCtx(t, 4*time.Minute)
	acked := make([][]int64, len(codecs))
	errs := make([]error, len(codecs))
	var wg sync.WaitGroup
	for c := range codecs {
		acked[c] = make([]int64, perCodec)
		cl := b.Client(
			kgo.DefaultProduceTopic(topic),
			kgo.ProducerBatchCompression(codecs[c].codec),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
		)
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			errs[c] = produceCodec(ctx, cl, c, perCodec, acked[c])
		}(c)
	}
	wg.Wait()
	for c, err := range errs {
		if err != nil {
			t.Fatalf("producer %s: %v", codecs[c].name, err)
		}
	}
	return acked
}

// produceCodec produces perCodec records asynchronously; offsets[i] gets the
// offset the broker acknowledged for record i.
func produceCodec(ctx context.Context, cl *kgo.Client, c, perCodec int, offsets []int64) error {
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < perCodec; i++ {
		cl.Produce(ctx, genRecord(c, i), func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("record %d: %w", i, err)
				}
				mu.Unlock()
				return
			}
			offsets[i] = r.Offset
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	return firstErr
}

// expectedByOffset turns the acknowledgements into partition → offset →
// record id (c*perCodec+i), checking that no two records were told the same
// offset and that each producer's records keep their order per partition.
func expectedByOffset(t *testing.T, acked [][]int64, perCodec int) [pcPartitions][]int {
	var expect [pcPartitions]map[int64]int
	for p := range expect {
		expect[p] = map[int64]int{}
	}
	for c := range acked {
		last := [pcPartitions]int64{-1, -1, -1, -1, -1, -1, -1, -1}
		for i, off := range acked[c] {
			p := i % pcPartitions
			if off <= last[p] {
				t.Fatalf("producer %s: record %d acked at %d[%d], not after its predecessor at %d", codecs[c].name, i, p, off, last[p])
			}
			last[p] = off
			if prev, dup := expect[p][off]; dup {
				t.Fatalf("offset %d[%d] acknowledged twice: ids %d and %d", p, off, prev, c*perCodec+i)
			}
			expect[p][off] = c*perCodec + i
		}
	}
	var out [pcPartitions][]int
	for p := range expect {
		out[p] = make([]int, len(expect[p]))
		for off, id := range expect[p] {
			if off < 0 || off >= int64(len(out[p])) {
				t.Fatalf("partition %d: acked offset %d outside [0,%d): offsets are not dense", p, off, len(out[p]))
			}
			out[p][off] = id
		}
	}
	return out
}

// consumeAndCompare reads every partition from offset 0 and checks each
// record against the acknowledged one at the same offset.
func consumeAndCompare(t *testing.T, b *Broker, topic string, expect [pcPartitions][]int, perCodec int) {
	starts := map[int32]kgo.Offset{}
	for p := int32(0); p < pcPartitions; p++ {
		starts[p] = kgo.NewOffset().At(0)
	}
	cl := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: starts}))
	ctx := testCtx(t, 3*time.Minute)
	var next [pcPartitions]int64
	remaining := 0
	for p := range expect {
		remaining += len(expect[p])
	}
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume: %d records never arrived; next offsets %v", remaining, next)
		}
		fetches.EachError(func(tp string, p int32, err error) { t.Fatalf("consume %s[%d]: %v", tp, p, err) })
		for _, r := range fetches.Records() {
			p := r.Partition
			if r.Offset != next[p] {
				t.Fatalf("partition %d: got offset %d, want %d (gap, duplicate or reorder)", p, r.Offset, next[p])
			}
			if r.Offset >= int64(len(expect[p])) {
				t.Fatalf("partition %d: extra record at offset %d past the %d acknowledged", p, r.Offset, len(expect[p]))
			}
			id := expect[p][r.Offset]
			if diff := sameRecord(r, genRecord(id/perCodec, id%perCodec)); diff != "" {
				t.Fatalf("partition %d offset %d (producer %s record %d): %s", p, r.Offset, codecs[id/perCodec].name, id%perCodec, diff)
			}
			next[p]++
			remaining--
		}
	}
}
