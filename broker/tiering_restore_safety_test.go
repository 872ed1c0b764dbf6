package broker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// TestLeaderRestartsAtTieredEnd: a broker with an empty data dir that
// leads a partition whose manifest ends at N restarts its log at N with
// the producer state of the object ending there: the first new record gets
// offset N, the history below N is read from the bucket, ListOffsets spans
// both tiers.
func TestLeaderRestartsAtTieredEnd(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, endpoints, t.TempDir(), coldBrokerConfig(mem))
	produceColdHistory(t, tb.b)
	p, _ := tb.b.parts.lookup(coldTopic, 0)
	entries, err := tb.store.TierEntries(testCtx(t), p.topicID, p.index)
	if err != nil || len(entries) == 0 {
		t.Fatalf("entries %v, %v", entries, err)
	}
	n := entries[len(entries)-1].LastOffset + 1
	if n >= coldRecords {
		t.Fatalf("tiered end %d: want a hot tail above it", n)
	}
	tb.stop(t)

	fresh := startTestBroker(t, endpoints, t.TempDir(), coldBrokerConfig(mem))
	np := waitLookup(t, fresh.b, coldTopic, 0)
	testkit.WaitFor(t, 20*time.Second, "condition", np.isLeader)
	if start, end := np.localLogStartOffset(), np.log.LogEndOffset(); start != n || end != n {
		t.Fatalf("local log [%d, %d) after leading, want [%d, %d)", start, end, n, n)
	}
	if len(np.log.Producers()) == 0 {
		t.Fatal("no producer state after the restart: the tiered snapshot was not installed")
	}
	_, cl := adminClient(t, fresh.b)
	for _, c := range []struct {
		name string
		ts   int64
		want int64
	}{{"earliest", -2, 0}, {"earliest local", -4, n}, {"latest", -1, n}} {
		if sp := listOneOffset(t, cl, coldTopic, c.ts, -1); sp.ErrorCode != 0 || sp.Offset != c.want {
			t.Fatalf("%s: error %d offset %d, want %d", c.name, sp.ErrorCode, sp.Offset, c.want)
		}
	}
	producer := newDataClient(t, fresh.b)
	rec := &kgo.Record{Topic: coldTopic, Value: []byte("after the restart")}
	if err := producer.ProduceSync(testCtx(t), rec).FirstErr(); err != nil || rec.Offset != n {
		t.Fatalf("produce: offset %d err %v, want offset %d", rec.Offset, err, n)
	}
	if sp := listOneOffset(t, cl, coldTopic, -1, -1); sp.ErrorCode != 0 || sp.Offset != n+1 {
		t.Fatalf("latest after produce: error %d offset %d, want %d", sp.ErrorCode, sp.Offset, n+1)
	}
	consumeAcrossRestart(t, fresh.b, n, rec.Value)
}

// consumeAcrossRestart reads from offset 0: the records below n are the
// tiered history, the one at n is last.
func consumeAcrossRestart(t *testing.T, b *Broker, n int64, last []byte) {
	t.Helper()
	cl := newDataClient(t, b, kgo.ConsumeTopics(coldTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := int64(0)
	for next <= n {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			want := last
			if next < n {
				want = coldValueOf(int(next))
			}
			if r.Offset != next || !bytes.Equal(r.Value, want) {
				t.Fatalf("record %d: offset %d value %.14q", next, r.Offset, r.Value)
			}
			next++
		})
	}
}

// TestSweeperKeepsUnknownTopicIDs: objects of a topic id etcd has neither
// live nor recorded as deleted survive sweeps long after OrphanGrace;
// those of a deleted topic are swept.
func TestSweeperKeepsUnknownTopicIDs(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), tierTestConfig(mem))
	adm, _ := adminClient(t, tb.b)
	cluster := tb.store.Cluster()
	unknownID := metadata.TopicID{7, 7, 7}
	unknownSeg, _ := tier.SegmentKey(tier.SegmentKeyParts{Cluster: cluster, Topic: "lost", TopicID: unknownID, Partition: 0})
	kept := []string{unknownSeg, tier.TopicConfigKey(cluster, "lost", unknownID)}
	createDataTopic(t, adm, "gone", 1, nil)
	goneID, _ := tb.b.parts.topicID("gone")
	if _, err := adm.DeleteTopics(testCtx(t), "gone"); err != nil {
		t.Fatal(err)
	}
	goneSeg, _ := tier.SegmentKey(tier.SegmentKeyParts{Cluster: cluster, Topic: "gone", TopicID: goneID, Partition: 0, BaseOffset: 5})
	swept := []string{goneSeg, tier.TopicConfigKey(cluster, "gone", goneID)}
	for _, key := range append(kept, swept...) { // the kept ones first: older
		if err := mem.Put(testCtx(t), key, strings.NewReader("x"), 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range swept {
		testkit.WaitFor(t, 20*time.Second, "condition", func() bool { // the deleted topic's objects go
			_, err := mem.Stat(testCtx(t), key)
			return mem.IsNotFound(err)
		})
	}
	time.Sleep(2 * tb.b.cfg.Tier.SweepInterval) // more sweeps
	for _, key := range kept {
		if _, err := mem.Stat(testCtx(t), key); err != nil {
			t.Fatalf("object %s of an unknown topic id: %v, want kept", key, err)
		}
	}
	if c := tb.b.TierCounters(); c.OrphansDeleted != 2 {
		t.Fatalf("orphans deleted %d, want 2", c.OrphansDeleted)
	}
}

// TestConsumerOffsetsTiered: with a bucket, __consumer_offsets uploads its
// sealed segments (committed offsets reach the bucket) although
// remote.storage.enable is off, but local.retention never deletes its
// local segments and the bucket cleaner leaves it alone.
func TestConsumerOffsetsTiered(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		fastGroups(c)
	})
	adm, _ := adminClient(t, tb.b)
	const groupID = "tiered-group"
	createDataTopic(t, adm, "events", 1, nil)
	commitOffsets(t, adm, groupID, 1, 1) // creates __consumer_offsets
	if _, err := adm.AlterTopicConfigs(testCtx(t), []kadm.AlterConfig{
		{Name: "internal.segment.bytes", Value: kadm.StringPtr("16384")},
		{Name: "local.retention.bytes", Value: kadm.StringPtr("1")},
		{Name: "min.cleanable.dirty.ratio", Value: kadm.StringPtr("0.01")},
	}, group.OffsetsTopic); err != nil {
		t.Fatal(err)
	}
	index := tb.b.groups.PartitionFor(groupID)
	p := waitLookup(t, tb.b, group.OffsetsTopic, index)
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { return p.config().SegmentBytes == 16384 })
	commitOffsets(t, adm, groupID, 2, 40)
	testkit.WaitFor(t, 30*time.Second, "condition", func() bool {
		sealed := p.log.SealedSegments()
		end, ok := p.manifest.ContiguousEnd(p.topicID, p.index)
		return len(sealed) >= 3 && ok && end >= sealed[len(sealed)-1].NextOffset
	})
	entries := p.manifest.Segments(p.topicID, p.index)
	if !objectHoldsGroup(t, mem, entries[0], groupID) {
		t.Fatalf("object %s holds no commit of %s", entries[0].Key, groupID)
	}
	time.Sleep(5 * tb.b.cfg.RetentionCheckInterval) // retention rounds
	if start := p.localLogStartOffset(); start != 0 {
		t.Fatalf("local log start %d: local retention deleted __consumer_offsets segments", start)
	}
	if tb.b.cleaner.CleanTierOnce(testCtx(t), time.Now()) {
		t.Fatal("the bucket cleaner ran on __consumer_offsets")
	}
	if c := tb.b.TierCounters(); c.LocalSegmentsFreed != 0 {
		t.Fatalf("counters %+v: local segments freed", c)
	}
	// The offsets still load from the local log: the group's last commit.
	offs, err := adm.FetchOffsets(testCtx(t), groupID)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup("events", 0); !ok || o.At != 40 {
		t.Fatalf("fetched offset %+v (found %v), want 40", o, ok)
	}
}

// commitOffsets commits offsets from..to (one commit each) for partition
// 0 of "events" with large metadata, so segments fill fast.
func commitOffsets(t *testing.T, adm *kadm.Client, groupID string, from, to int64) {
	t.Helper()
	meta := strings.Repeat("m", 2000)
	for at := from; at <= to; at++ {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "events", Partition: 0, At: at, LeaderEpoch: -1, Metadata: meta})
		resp, err := adm.CommitOffsets(testCtx(t), groupID, os)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", at, err)
		}
	}
}

// objectHoldsGroup reports whether the object has a record whose key
// names groupID.
func objectHoldsGroup(t *testing.T, store objstore.ObjectStore, e metadata.TierEntry, groupID string) bool {
	t.Helper()
	r, err := tier.OpenObject(testCtx(t), store, e.Key, e.Size)
	if err != nil {
		t.Fatalf("open %s: %v", e.Key, err)
	}
	batches, err := r.ReadBatches(testCtx(t), e.BaseOffset, int(e.Size))
	if err != nil {
		t.Fatalf("read %s: %v", e.Key, err)
	}
	for _, rec := range decodeRecords(t, batches) {
		if bytes.Contains(rec.Key, []byte(groupID)) {
			return true
		}
	}
	return false
}
