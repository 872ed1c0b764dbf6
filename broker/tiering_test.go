package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
	"github.com/strata-log/strata/tier/s3"
	"github.com/strata-log/strata/tier/tiertest"
)

// tierTestConfig runs the tier loops fast against store.
func tierTestConfig(store objstore.ObjectStore) func(*Config) {
	return func(c *Config) {
		c.DefaultPartitions = 1
		c.Durability = hotlog.DurabilityFsync
		c.ObjectStore = store
		c.RetentionCheckInterval = 50 * time.Millisecond
		c.Tier.UploadInterval = 50 * time.Millisecond
		c.Tier.RetryBackoff = 20 * time.Millisecond
		c.Tier.MaxRetryBackoff = 200 * time.Millisecond
		c.Tier.SweepInterval = 200 * time.Millisecond
		c.Tier.OrphanGrace = 500 * time.Millisecond
		c.Tier.ObjectDeleteDelay = 10 * time.Millisecond
	}
}

// fastRetry is a retry policy for tests: quick, but several attempts.
func fastRetry() objstore.RetryPolicy {
	return objstore.RetryPolicy{MaxAttempts: 4, InitialBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
		AttemptTimeout: 2 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// tierValue is record seq's value in partition p: (p, seq) then bytes that
// do not compress.
func tierValue(p int32, seq int64) []byte {
	v := make([]byte, 1000)
	binary.BigEndian.PutUint32(v, uint32(p))
	binary.BigEndian.PutUint64(v[4:], uint64(seq))
	x := uint64(seq)*0x9E3779B97F4A7C15 + uint64(p) + 1
	for j := 12; j < len(v); j++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v[j] = byte(x)
	}
	return v
}

// produceTiered writes n numbered records to each of partitions.
func produceTiered(t *testing.T, b *Broker, topic string, partitions int32, first, n int64) {
	t.Helper()
	cl := newDataClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(32<<10))
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var failed atomic.Value
	for seq := first; seq < first+n; seq++ {
		for p := int32(0); p < partitions; p++ {
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: tierValue(p, seq)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
			})
		}
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// waitAllUploaded waits until every sealed segment of the topic's
// partitions is in the manifest.
func waitAllUploaded(t *testing.T, b *Broker, topic string, partitions int32, within time.Duration) {
	t.Helper()
	testkit.WaitFor(t, within, "condition", func() bool {
		for i := int32(0); i < partitions; i++ {
			p, _ := b.parts.lookup(topic, i)
			sealed := p.log.SealedSegments()
			end, ok := p.manifest.ContiguousEnd(p.topicID, p.index)
			// Everything sealed is tiered; once local retention freed every
			// sealed segment (only the active one is left), everything
			// below the local log start is.
			want := p.localLogStartOffset()
			if len(sealed) > 0 {
				want = sealed[len(sealed)-1].NextOffset
			}
			if want == 0 || !ok || end < want {
				return false
			}
		}
		return true
	})
}

// checkTiered verifies one partition: the etcd manifest is gap-free from
// the log start, without duplicates, and equals the in-memory one; every
// object it names decodes and holds exactly the produced records; the
// store holds no other segment object of the partition once swept.
func checkTiered(t *testing.T, tb *testBroker, store objstore.ObjectStore, topic string, index int32) {
	t.Helper()
	p, _ := tb.b.parts.lookup(topic, index)
	ctx := testCtx(t)
	entries, err := tb.store.TierEntries(ctx, p.topicID, p.index)
	if err != nil || len(entries) == 0 {
		t.Fatalf("partition %d: entries %v, %v", index, entries, err)
	}
	if mem := p.manifest.Segments(p.topicID, p.index); !slices.EqualFunc(mem, entries, func(a, b metadata.TierEntry) bool { return a.Key == b.Key }) {
		t.Fatalf("partition %d: in-memory manifest differs from etcd", index)
	}
	live := map[string]bool{}
	next := entries[0].BaseOffset
	for _, e := range entries {
		if e.BaseOffset != next || live[e.Key] {
			t.Fatalf("partition %d: entry %+v, want base %d (gap or duplicate)", index, e, next)
		}
		live[e.Key] = true
		checkObject(t, store, e)
		next = e.LastOffset + 1
	}
	prefix := tier.PartitionPrefix(tb.store.Cluster(), topic, p.topicID, p.index)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { // orphans (lost acks, failed commits) are swept
		objs, err := store.List(ctx, prefix)
		return err == nil && len(objs) == len(entries)
	})
	objs, _ := store.List(ctx, prefix)
	for _, o := range objs {
		if !live[o.Key] {
			t.Fatalf("partition %d: object %s is not in the manifest", index, o.Key)
		}
	}
}

// checkObject reads a whole object through its verified reader and checks
// every record against what was produced.
func checkObject(t *testing.T, store objstore.ObjectStore, e metadata.TierEntry) {
	t.Helper()
	r, err := tier.OpenObject(testCtx(t), store, e.Key, e.Size)
	if err != nil {
		t.Fatalf("open %s: %v", e.Key, err)
	}
	if f := r.Index.Footer; f.BaseOffset != e.BaseOffset || f.LastOffset != e.LastOffset || f.Partition != e.Partition {
		t.Fatalf("%s: footer %+v, entry %+v", e.Key, f, e)
	}
	batches, err := r.ReadBatches(testCtx(t), e.BaseOffset, int(e.Size))
	if err != nil {
		t.Fatalf("read %s: %v", e.Key, err)
	}
	next := e.BaseOffset
	for _, rec := range decodeRecords(t, batches) {
		if rec.Offset != next || string(rec.Value) != string(tierValue(e.Partition, rec.Offset)) {
			t.Fatalf("%s: record at %d (want %d) does not match what was produced", e.Key, rec.Offset, next)
		}
		next++
	}
	if next != e.LastOffset+1 {
		t.Fatalf("%s: records end at %d, entry at %d", e.Key, next, e.LastOffset+1)
	}
}

// TestTierUploadAndLocalRetention: sealed segments reach the bucket, the
// manifest is gap-free, and local retention deletes only uploaded segments.
func TestTierUploadAndLocalRetention(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(mem))
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "up", 2, map[string]*string{
		"internal.segment.bytes": kadm.StringPtr("65536"), "local.retention.bytes": kadm.StringPtr("131072")})
	// Objects no manifest entry names: a crashed upload's, and a deleted
	// topic's topic.json. The sweeper removes them once OrphanGrace passed.
	id, _ := tb.b.parts.topicID("up")
	cluster := tb.store.Cluster()
	orphan, _ := tier.SegmentKey(tier.SegmentKeyParts{Cluster: cluster, Topic: "up", TopicID: id, Partition: 0})
	// (a topic.json of an id etcd does not know would be kept: restorable)
	createDataTopic(t, adm, "gone", 1, nil)
	goneID, _ := tb.b.parts.topicID("gone")
	if _, err := adm.DeleteTopics(testCtx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	strayTopic := tier.TopicConfigKey(cluster, "gone", goneID)
	for _, key := range []string{orphan, strayTopic} {
		if err := mem.Put(testCtx(t), key, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	produceTiered(t, tb.b, "up", 2, 0, 1500)
	waitAllUploaded(t, tb.b, "up", 2, 30*time.Second)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return tb.b.TierCounters().OrphansDeleted == 2 })
	for _, key := range []string{orphan, strayTopic} {
		if _, err := mem.Stat(testCtx(t), key); !mem.IsNotFound(err) {
			t.Fatalf("orphan %s not swept: %v", key, err)
		}
	}
	for i := int32(0); i < 2; i++ {
		checkTiered(t, tb, mem, "up", i)
		p, _ := tb.b.parts.lookup("up", i)
		testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.log.Size() <= 131072+65536 })
		if p.logStartOffset() != 0 || p.localLogStartOffset() == 0 {
			t.Fatalf("partition %d: log start %d, local start %d", i, p.logStartOffset(), p.localLogStartOffset())
		}
	}
	if c := tb.b.TierCounters(); c.SegmentsUploaded == 0 || c.LocalSegmentsFreed == 0 || c.UploadFailures != 0 {
		t.Fatalf("counters %+v", c)
	}
	// topic.json describes the topic.
	body, err := objstore.ReadAll(testCtx(t), mem, tier.TopicConfigKey(tb.store.Cluster(), "up", id), 0, statSize(t, mem, tier.TopicConfigKey(tb.store.Cluster(), "up", id)))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := tier.DecodeTopicFile(body); err != nil || f.Partitions != 2 || f.Configs["internal.segment.bytes"] != "65536" {
		t.Fatalf("topic.json %+v, %v", f, err)
	}
}

func statSize(t *testing.T, store objstore.ObjectStore, key string) int64 {
	t.Helper()
	info, err := store.Stat(testCtx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return info.Size
}

// TestTierLocalRetentionWaitsForUpload: while the bucket refuses every
// write, no local segment is deleted whatever local.retention says, and
// producers are throttled once the upload lag passes the limit.
func TestTierLocalRetentionWaitsForUpload(t *testing.T) {
	faulty := objstore.NewFaulty(objstore.NewMemStore())
	faulty.Inject(objstore.Fault{Op: objstore.OpPut, Kind: objstore.FaultPermanent})
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(faulty)(c)
		c.Tier.MaxUploadLagBytes = 512 << 10
		c.Tier.ThrottleWait = 100 * time.Millisecond
	})
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "stuck", 1, map[string]*string{
		"internal.segment.bytes": kadm.StringPtr("65536"), "local.retention.bytes": kadm.StringPtr("65536")})
	produceTiered(t, tb.b, "stuck", 1, 0, 300) // ~300 KiB: below the lag limit
	p, _ := tb.b.parts.lookup("stuck", 0)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.uploadLag.Load() > 128<<10 })
	time.Sleep(300 * time.Millisecond) // several retention rounds
	if p.localLogStartOffset() != 0 || tb.b.TierCounters().LocalSegmentsFreed != 0 {
		t.Fatalf("local segments deleted before upload: local start %d", p.localLogStartOffset())
	}
	// Keep producing: once the lag passes the limit, produce is throttled.
	throttled := false
	for i := 0; i < 100 && !throttled; i++ {
		resp := produceRaw(t, tb.b, "stuck", 1, buildBatch(batchSpec{records: 1, valueSize: 60_000}))
		switch resp.ErrorCode {
		case 0:
			time.Sleep(60 * time.Millisecond) // let the uploader see the new segments
		case kerr.ThrottlingQuotaExceeded.Code:
			throttled = true
		default:
			t.Fatalf("produce: error %d", resp.ErrorCode)
		}
	}
	if !throttled || p.uploadLag.Load() <= 512<<10 || tb.b.TierCounters().ThrottledProduces == 0 {
		t.Fatalf("never throttled: lag %d, counters %+v", p.uploadLag.Load(), tb.b.TierCounters())
	}
	faulty.Clear() // the bucket recovers: uploads, then local deletion
	waitAllUploaded(t, tb.b, "stuck", 1, 30*time.Second)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.localLogStartOffset() > 0 && p.uploadLag.Load() == 0 })
	if resp := produceRaw(t, tb.b, "stuck", 1, buildBatch(batchSpec{records: 1, valueSize: 100})); resp.ErrorCode != 0 {
		t.Fatalf("produce after catching up: error %d", resp.ErrorCode)
	}
}

// TestTierFaultInjection (acceptance 3, wrappers): 503 SlowDown, timeouts,
// lost acknowledgements, truncated GETs and permanent failures on the
// upload path; every segment still lands once, gap-free, with its data.
func TestTierFaultInjection(t *testing.T) {
	mem := objstore.NewMemStore()
	faulty := objstore.NewFaulty(mem)
	for _, f := range []objstore.Fault{
		{Op: objstore.OpPut, Kind: objstore.FaultSlowDown, Nth: 2, Times: 6},
		{Op: objstore.OpPut, Kind: objstore.FaultTimeout, Nth: 10, Times: 3, Delay: 5 * time.Second},
		{Op: objstore.OpPut, Kind: objstore.FaultLostAck, Nth: 15, Times: 3},
		{Op: objstore.OpPut, Kind: objstore.FaultSlowDown, Nth: 25, Times: 8}, // exhausts a call's retries
		{Op: objstore.OpPut, Kind: objstore.FaultPermanent, Nth: 40, Times: 2},
		{Op: objstore.OpStat, Kind: objstore.FaultSlowDown, Nth: 3, Times: 3},
		{Op: objstore.OpGet, Kind: objstore.FaultTruncate, Nth: 5, Times: 2},
		{Op: objstore.OpGet, Kind: objstore.FaultTimeout, Nth: 9, Times: 1, Delay: 5 * time.Second},
	} {
		faulty.Inject(f)
	}
	policy := fastRetry()
	policy.AttemptTimeout = 300 * time.Millisecond
	store, err := objstore.NewRetrying(faulty, policy)
	if err != nil {
		t.Fatal(err)
	}
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(store))
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "faults", 3, map[string]*string{
		"internal.segment.bytes": kadm.StringPtr("65536"), "local.retention.bytes": kadm.StringPtr("65536")})
	produceTiered(t, tb.b, "faults", 3, 0, 1200)
	waitAllUploaded(t, tb.b, "faults", 3, 60*time.Second)
	if faulty.Fired() < 20 {
		t.Fatalf("only %d faults fired", faulty.Fired())
	}
	for i := int32(0); i < 3; i++ {
		checkTiered(t, tb, mem, "faults", i)
	}
	if c := tb.b.TierCounters(); c.UploadFailures == 0 {
		t.Fatalf("no upload failed and was retried: %+v", c)
	}
}

// failingPartTransport answers the first failures UploadPart requests of
// part 2 with 503 SlowDown, as S3 does under load.
type failingPartTransport struct {
	inner    http.RoundTripper
	failures atomic.Int64
	left     atomic.Int64
}

func (f *failingPartTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPut && req.URL.Query().Get("partNumber") == "2" && f.left.Add(-1) >= 0 {
		f.failures.Add(1)
		if req.Body != nil {
			_, _ = io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Slow Down", Proto: "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/xml"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req}, nil
	}
	return f.inner.RoundTrip(req)
}

// TestTierMultipartPartFailure (acceptance 3, multipart): against MinIO,
// parts of multipart uploads fail with 503 SlowDown; segments are still
// uploaded once each, gap-free, and read back whole.
func TestTierMultipartPartFailure(t *testing.T) {
	m := tiertest.StartMinIO(t)
	transport := &failingPartTransport{inner: http.DefaultTransport.(*http.Transport).Clone()}
	transport.left.Store(6)
	ctx := testCtx(t)
	backend, err := s3.New(ctx, s3.Config{Bucket: m.Bucket, Endpoint: m.Endpoint, Region: tiertest.Region, PathStyle: true,
		AccessKeyID: tiertest.AccessKey, SecretAccessKey: tiertest.SecretKey,
		MultipartThreshold: 5 << 20, PartSize: 5 << 20, Concurrency: 2,
		PartRetry:  objstore.RetryPolicy{MaxAttempts: 2, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
		HTTPClient: &http.Client{Transport: transport}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	counts := objstore.NewCounting(backend)
	store, err := objstore.NewRetrying(counts, fastRetry())
	if err != nil {
		t.Fatal(err)
	}
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(store))
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "parts", 2, map[string]*string{
		"internal.segment.bytes": kadm.StringPtr(fmt.Sprint(12 << 20)), "local.retention.bytes": kadm.StringPtr(fmt.Sprint(12 << 20))})
	produceTiered(t, tb.b, "parts", 2, 0, 40_000) // ~40 MiB per partition: 3 segments of 3 parts each
	waitAllUploaded(t, tb.b, "parts", 2, 90*time.Second)
	if transport.failures.Load() != 6 {
		t.Fatalf("%d part failures injected, want 6", transport.failures.Load())
	}
	for i := int32(0); i < 2; i++ {
		checkTiered(t, tb, backend, "parts", i)
	}
	// PartRetry has 2 attempts per part: some multipart uploads failed
	// whole (and were aborted) and were retried from the start.
	if put := counts.Total(objstore.OpPut); put.Errors == 0 {
		t.Fatalf("no multipart upload failed: %+v", put)
	}
}

// deleteOrderStore checks, at every Delete of a segment object, that no
// manifest entry names it any more (manifest entry first, then object).
type deleteOrderStore struct {
	objstore.ObjectStore
	store      *metadata.Store
	mu         sync.Mutex
	violations []string
	deleted    []string
}

func (d *deleteOrderStore) Delete(ctx context.Context, key string) error {
	if parts, err := tier.ParseSegmentKey(key); err == nil {
		entries, err := d.store.TierEntries(ctx, parts.TopicID, parts.Partition)
		d.mu.Lock()
		for _, e := range entries {
			if e.Key == key || err != nil {
				d.violations = append(d.violations, key)
			}
		}
		d.deleted = append(d.deleted, key)
		d.mu.Unlock()
	}
	return d.ObjectStore.Delete(ctx, key)
}

// TestTierRemoteRetentionAndDeleteRecords (acceptance 4): retention.bytes
// removes the oldest tiered segments, manifest entry first, then object;
// DeleteRecords moves the log start inside the tiered range, removes the
// entries wholly below it, and the start survives a restart.
func TestTierRemoteRetentionAndDeleteRecords(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	dir := t.TempDir()
	mem := objstore.NewMemStore()
	order := &deleteOrderStore{ObjectStore: mem}
	tb := startTestBroker(t, endpoints, dir, tierTestConfig(order))
	order.store = tb.store
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "ret", 1, map[string]*string{"internal.segment.bytes": kadm.StringPtr("65536"),
		"local.retention.bytes": kadm.StringPtr("65536"), "retention.bytes": kadm.StringPtr(fmt.Sprint(1 << 20))})
	produceTiered(t, tb.b, "ret", 1, 0, 3000) // ~3 MiB: two thirds over retention.bytes
	waitAllUploaded(t, tb.b, "ret", 1, 30*time.Second)
	p, _ := tb.b.parts.lookup("ret", 0)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool {
		order.mu.Lock()
		defer order.mu.Unlock()
		return p.logStartOffset() > 1000 && len(order.deleted) > 0
	})
	// Remote retention deletes a segment per check until the log fits
	// retention.bytes: let it finish, or it races the DeleteRecords below.
	for prev := int64(-1); prev != p.logStartOffset(); time.Sleep(time.Second) {
		prev = p.logStartOffset()
	}
	entries, _ := tb.store.TierEntries(testCtx(t), p.topicID, 0)
	if p.logStartOffset() != entries[0].BaseOffset {
		t.Fatalf("log start %d, first entry %d", p.logStartOffset(), entries[0].BaseOffset)
	}
	checkTiered(t, tb, mem, "ret", 0)

	// DeleteRecords to the middle of the third tiered segment.
	target := entries[2].BaseOffset + 5
	offsets := kadm.Offsets{}
	offsets.AddOffset("ret", 0, target, -1)
	resps, err := adm.DeleteRecords(testCtx(t), offsets)
	if r, _ := resps.Lookup("ret", 0); err != nil || r.Err != nil || r.LowWatermark != target {
		t.Fatalf("delete records: %v %+v", err, r)
	}
	left, _ := tb.store.TierEntries(testCtx(t), p.topicID, 0)
	if left[0].BaseOffset != entries[2].BaseOffset {
		t.Fatalf("after delete records the first entry is %d, want %d", left[0].BaseOffset, entries[2].BaseOffset)
	}
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool {
		_, err := mem.Stat(testCtx(t), entries[1].Key)
		return mem.IsNotFound(err)
	})
	order.mu.Lock()
	if len(order.violations) > 0 {
		t.Fatalf("objects deleted while their manifest entry existed: %v", order.violations)
	}
	order.mu.Unlock()
	tb.stop(t)

	again := startTestBroker(t, endpoints, dir, tierTestConfig(mem))
	p2 := waitLookup(t, again.b, "ret", 0)
	if p2.logStartOffset() != target {
		t.Fatalf("log start after restart %d, want %d", p2.logStartOffset(), target)
	}
}

// decodedRecord is one record of uncompressed batches.
type decodedRecord struct {
	Offset     int64
	Key, Value []byte
}

// decodeRecords walks uncompressed batches record by record.
func decodeRecords(t *testing.T, batches []byte) []decodedRecord {
	t.Helper()
	var out []decodedRecord
	for len(batches) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(batches); err != nil {
			t.Fatalf("batch: %v", err)
		}
		recs := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			length, n := binary.Varint(recs)
			if n <= 0 || int(length)+n > len(recs) {
				t.Fatal("record framing")
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(length)]); err != nil {
				t.Fatalf("record: %v", err)
			}
			out = append(out, decodedRecord{Offset: rb.FirstOffset + int64(r.OffsetDelta), Key: r.Key, Value: r.Value})
			recs = recs[n+int(length):]
		}
		batches = batches[12+int(rb.Length):]
	}
	return out
}
