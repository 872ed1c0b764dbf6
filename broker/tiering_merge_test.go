package broker

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// mergeTestTopic makes a partition of many small objects: batches of at
// most 4 KiB in 4 KiB segments uploaded as they seal, local retention
// keeping about the last 8 KiB.
// It returns the partition once its local log start is past most of the
// records and the manifest is stable.
// Records have distinct keys, so extra configs may make it compacted.
func mergeTestTopic(t *testing.T, tb *testBroker, adm *kadm.Client, topic string, records int64, extra map[string]*string) *partition {
	t.Helper()
	configs := map[string]*string{"internal.segment.bytes": kadm.StringPtr("4096"), "local.retention.bytes": kadm.StringPtr("8192")}
	maps.Copy(configs, extra)
	createDataTopic(t, adm, topic, 1, configs)
	cl := newDataClient(t, tb.b, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(4<<10))
	var batch []*kgo.Record
	for seq := range records {
		batch = append(batch, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(fmt.Sprint("key-", seq)), Value: tierValue(0, seq)})
	}
	if err := cl.ProduceSync(testCtx(t), batch...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	waitAllUploaded(t, tb.b, topic, 1, 30*time.Second)
	p, _ := tb.b.parts.lookup(topic, 0)
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool { return p.localLogStartOffset() > records*3/4 })
	return p
}

// setSegmentBytes raises the topic's segment.bytes, which is the merge
// target: the segments it was written with are then small.
func setSegmentBytes(t *testing.T, adm *kadm.Client, p *partition, topic string, bytes int64) {
	t.Helper()
	if _, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Name: "internal.segment.bytes", Value: kmsg.StringPtr(fmt.Sprint(bytes))}}, topic); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.config().SegmentBytes == bytes })
}

// tieredBatches is the concatenated batch bytes of entries' objects.
func tieredBatches(t *testing.T, store objstore.ObjectStore, entries []metadata.TierEntry) []byte {
	t.Helper()
	var out []byte
	for _, e := range entries {
		r, err := tier.OpenObject(testCtx(t), store, e.Key, e.Size)
		if err != nil {
			t.Fatalf("open %s: %v", e.Key, err)
		}
		batches, err := r.ReadBatches(testCtx(t), e.BaseOffset, math.MaxInt32)
		if err != nil {
			t.Fatalf("read %s: %v", e.Key, err)
		}
		out = append(out, batches...)
	}
	return out
}

// consumedValues reads the partition from offset 0 (below the local log
// start through the cold path) and checks every record is the one
// produced at its offset.
func consumedValues(t *testing.T, b *Broker, topic string, n int64) []readRecord {
	t.Helper()
	var out []readRecord
	for i, r := range consumeFromStart(t, b, topic, int(n)) {
		if r.Offset != int64(i) || !bytes.Equal(r.Value, tierValue(0, r.Offset)) {
			t.Fatalf("record %d: offset %d, value %.12x (want what was produced there)", i, r.Offset, r.Value)
		}
		out = append(out, readRecord{offset: r.Offset, value: r.Value, timestamp: r.Timestamp.UnixMilli()})
	}
	return out
}

// readRecord is what a consumer saw at an offset.
type readRecord struct {
	offset    int64
	value     []byte
	timestamp int64
}

// TestTierMergeSmallObjects: a partition of many small objects is merged
// by one pass into fewer objects of up to segment.bytes, holding the same
// batch bytes; every record still reads the same from offset 0 through the
// cold path; objects still on the leader's disk are left alone; the old
// objects stay for the delete grace and then go; a second pass does
// nothing.
func TestTierMergeSmallObjects(t *testing.T) {
	mem := objstore.NewMemStore()
	const deleteGrace = 2 * time.Second
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Tier.MergeInterval = -1 // this test runs the passes
		c.Tier.MergeGrace = time.Millisecond
		c.Cleaner.ObjectDeleteGrace = deleteGrace
	})
	adm, _ := adminClient(t, tb.b)
	const records = 400
	start := time.Now()
	p := mergeTestTopic(t, tb, adm, "merge", records, nil)
	before := p.manifest.Segments(p.topicID, p.index)
	beforeBatches := tieredBatches(t, mem, before)
	beforeRecords := consumedValues(t, tb.b, "merge", records)

	const target = 96 << 10
	setSegmentBytes(t, adm, p, "merge", target)
	// A pass as of the start: no object is MergeGrace old yet.
	tb.b.tiering.MergeRound(testCtx(t), start)
	if c := tb.b.TierCounters(); c.MergePasses != 1 || c.MergeObjectsIn != 0 ||
		len(p.manifest.Segments(p.topicID, p.index)) != len(before) {
		t.Fatalf("objects younger than the grace period merged: counters %+v", c)
	}
	localStart := p.localLogStartOffset()
	tb.b.tiering.MergeRound(testCtx(t), time.Now())
	after := p.manifest.Segments(p.topicID, p.index)
	c := tb.b.TierCounters()
	if len(after) >= len(before)/3 || c.MergePasses != 2 || c.MergeObjectsIn-c.MergeObjectsOut != int64(len(before)-len(after)) {
		t.Fatalf("%d objects merged into %d; counters %+v", len(before), len(after), c)
	}
	if etcd, err := tb.store.TierEntries(testCtx(t), p.topicID, p.index); err != nil ||
		!slices.EqualFunc(etcd, after, func(a, b metadata.TierEntry) bool { return a.Key == b.Key }) {
		t.Fatalf("etcd manifest differs from the broker's after the merge: %v", err)
	}
	t.Logf("%d objects merged into %d below local start %d", len(before), len(after), localStart)
	kept := map[string]bool{}
	for _, e := range after {
		kept[e.Key] = true
		if e.Size > target {
			t.Fatalf("merged object %+v above segment.bytes %d", e, target)
		}
	}
	for _, e := range before {
		if e.LastOffset >= localStart && !kept[e.Key] {
			t.Fatalf("object %+v merged though the leader still holds it (local start %d)", e, localStart)
		}
	}
	if got := tieredBatches(t, mem, after); !bytes.Equal(got, beforeBatches) {
		t.Fatalf("merged objects hold %d batch bytes, different from the %d of the small ones", len(got), len(beforeBatches))
	}
	gets := tb.b.ColdStats().Gets
	afterRecords := consumedValues(t, tb.b, "merge", records)
	for i, r := range afterRecords {
		if b := beforeRecords[i]; r.offset != b.offset || !bytes.Equal(r.value, b.value) || r.timestamp != b.timestamp {
			t.Fatalf("offset %d reads differently after the merge", r.offset)
		}
	}
	if tb.b.ColdStats().Gets == gets {
		t.Fatal("the read after the merge did not go to the bucket")
	}

	// The replaced objects wait for the grace period, then go.
	pending := tb.b.compactor.PendingDeletes()
	for _, e := range before {
		if kept[e.Key] {
			continue
		}
		if _, ok := pending[e.Key]; !ok {
			t.Fatalf("replaced object %s not queued for deletion", e.Key)
		}
		if _, err := mem.Stat(testCtx(t), e.Key); err != nil {
			t.Fatalf("replaced object %s deleted before the grace period: %v", e.Key, err)
		}
	}
	testkit.WaitFor(t, 10*deleteGrace, "condition", func() bool { return len(tb.b.compactor.PendingDeletes()) == 0 })
	checkTiered(t, tb, mem, "merge", 0) // gap-free, every record right, no other object left

	// A second pass finds nothing to merge.
	tb.b.tiering.MergeRound(testCtx(t), time.Now())
	again := p.manifest.Segments(p.topicID, p.index)
	if c2 := tb.b.TierCounters(); c2.MergePasses != 3 || c2.MergeObjectsIn != c.MergeObjectsIn ||
		!slices.EqualFunc(again, after, func(a, b metadata.TierEntry) bool { return a.Key == b.Key }) {
		t.Fatalf("second pass changed the manifest: %d entries, counters %+v", len(again), c2)
	}
}

// TestTierMergeFromJanitor: with merging on, the janitor loop merges the
// small objects by itself, and deletes the replaced ones after the grace
// period (with the cleaner off: the janitor's delete tick runs the
// compactor's deletes).
func TestTierMergeFromJanitor(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Tier.MergeInterval = 50 * time.Millisecond
		c.Tier.MergeGrace = time.Millisecond
		c.Cleaner = compaction.CleanerConfig{Disable: true, ObjectDeleteGrace: 100 * time.Millisecond}
	})
	adm, _ := adminClient(t, tb.b)
	const records = 200
	p := mergeTestTopic(t, tb, adm, "jmerge", records, nil)
	before := len(p.manifest.Segments(p.topicID, p.index))
	setSegmentBytes(t, adm, p, "jmerge", 64<<10)
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool {
		return len(p.manifest.Segments(p.topicID, p.index)) < before/3 && len(tb.b.compactor.PendingDeletes()) == 0
	})
	if c := tb.b.TierCounters(); c.MergeObjectsOut == 0 || c.MergeObjectsIn <= c.MergeObjectsOut {
		t.Fatalf("counters %+v", c)
	}
	consumedValues(t, tb.b, "jmerge", records)
	checkTiered(t, tb, mem, "jmerge", 0)
}

// TestTierMergeCompactedTopic: on a compacted topic the merge leaves a
// partition alone while the tiered cleaner is due on it (its pass merges
// the same objects), and otherwise merges without crossing the cleaner's
// tier checkpoint.
func TestTierMergeCompactedTopic(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Tier.MergeInterval = -1 // this test runs the passes
		c.Tier.MergeGrace = time.Millisecond
		c.Cleaner = compaction.CleanerConfig{Backoff: time.Hour} // on, but it never gets to this topic
	})
	adm, _ := adminClient(t, tb.b)
	const records = 300
	p := mergeTestTopic(t, tb, adm, "cmerge", records, map[string]*string{
		"cleanup.policy": kadm.StringPtr("compact"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.5")})
	setSegmentBytes(t, adm, p, "cmerge", 64<<10)
	before := p.manifest.Segments(p.topicID, p.index)

	// Checkpoint 0 (a new leader): every byte is dirty, the cleaner is due.
	if runs := tb.b.tiering.PlanMerges(tierPartition{p, tb.b}, time.Now()); len(runs) != 0 {
		t.Fatalf("merges planned while the tiered cleaner is due: %v", runs)
	}
	// Two thirds cleaned: not due; runs stay on one side of the checkpoint.
	checkpoint := before[len(before)*2/3].BaseOffset
	p.cleaned.SetTierCheckpoint(checkpoint)
	runs := tb.b.tiering.PlanMerges(tierPartition{p, tb.b}, time.Now())
	if len(runs) == 0 {
		t.Fatal("nothing planned once the cleaner is not due")
	}
	for _, r := range runs {
		if first, last := r.Entries[0].BaseOffset, r.Entries[len(r.Entries)-1].LastOffset; first < checkpoint && last >= checkpoint {
			t.Fatalf("run %v crosses the tier checkpoint %d", r, checkpoint)
		}
	}
	tb.b.tiering.MergeRound(testCtx(t), time.Now())
	after := p.manifest.Segments(p.topicID, p.index)
	if len(after) >= len(before) || !slices.ContainsFunc(after, func(e metadata.TierEntry) bool { return e.BaseOffset == checkpoint }) {
		t.Fatalf("%d objects merged into %d; want fewer and one starting at the checkpoint %d", len(before), len(after), checkpoint)
	}
	consumedValues(t, tb.b, "cmerge", records)
}
