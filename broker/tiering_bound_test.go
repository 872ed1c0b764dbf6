package broker

import (
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/objstore"
)

// TestTierUploadBound: with segments far too large to roll by size or age,
// a few committed records still reach the bucket within the bound; a topic
// that turns the bound off keeps them local; a quiet partition makes no
// more uploads; DescribeConfigs reports the broker's default.
func TestTierUploadBound(t *testing.T) {
	const bound = 4 * time.Second
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Tier.UploadMaxLag = bound
	})
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "bounded", 1, nil)
	createDataTopic(t, adm, "unbounded", 1, map[string]*string{"tier.upload.max.lag.ms": kadm.StringPtr("-1")})
	start := time.Now()
	produceTiered(t, tb.b, "bounded", 1, 0, 10)
	produceTiered(t, tb.b, "unbounded", 1, 0, 10)

	p, _ := tb.b.parts.lookup("bounded", 0)
	if st := tb.b.partitionTierStatus(p); !st.Leader || st.BucketLagBytes == 0 || st.UploadMaxLagMs != bound.Milliseconds() {
		t.Fatalf("before the roll the bucket lags: %+v", st)
	}
	testkit.WaitFor(t, 2*bound, "condition", func() bool {
		end, ok := p.manifest.ContiguousEnd(p.topicID, p.index)
		return ok && end == 10
	})
	if took := time.Since(start); took < bound/2 {
		t.Fatalf("uploaded after %v, before the roll was due (%v)", took, bound/2)
	}
	checkTiered(t, tb, mem, "bounded", 0)
	if st := tb.b.partitionTierStatus(p); st.BucketLagMs != 0 || st.BucketLagBytes != 0 || st.BucketEnd != 10 {
		t.Fatalf("after the upload the bucket is current: %+v", st)
	}
	if c := tb.b.TierCounters(); c.BoundRolls != 1 || c.SegmentsUploaded != 1 {
		t.Fatalf("counters %+v, want one roll and one upload", c)
	}

	// Quiet: nothing new, nothing rolled or uploaded.
	time.Sleep(bound)
	if c := tb.b.TierCounters(); c.BoundRolls != 1 || c.SegmentsUploaded != 1 {
		t.Fatalf("a quiet partition cost requests: %+v", c)
	}
	u, _ := tb.b.parts.lookup("unbounded", 0)
	if _, ok := u.manifest.ContiguousEnd(u.topicID, u.index); ok {
		t.Fatal("tier.upload.max.lag.ms=-1 uploaded the active segment")
	}
	if st := tb.b.partitionTierStatus(u); st.UploadMaxLagMs != -1 || st.BucketLagMs < bound.Milliseconds() {
		t.Fatalf("unbounded topic's status: %+v", st)
	}

	configs, err := adm.DescribeTopicConfigs(testCtx(t), "bounded")
	if err != nil {
		t.Fatal(err)
	}
	c, err := configs.On("bounded", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range c.Configs {
		if e.Key == "tier.upload.max.lag.ms" {
			if e.MaybeValue() != "4000" {
				t.Fatalf("tier.upload.max.lag.ms described as %q, want the broker's 4000", e.MaybeValue())
			}
			return
		}
	}
	t.Fatal("tier.upload.max.lag.ms not described")
}

// TestTierUploadsOnlyTheUncoveredPart: a sealed segment that straddles the
// end of what the bucket holds (a new leader's segment after the old
// leader uploaded a segment of its own rolling) is uploaded from that end
// on: the manifest stays gap-free without two entries for one offset.
func TestTierUploadsOnlyTheUncoveredPart(t *testing.T) {
	mem := objstore.NewMemStore()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		tierTestConfig(mem)(c)
		c.Tier.UploadInterval = time.Hour // this test drives the uploader
		c.Tier.UploadMaxLag = -1
	})
	adm, _ := adminClient(t, tb.b)
	createDataTopic(t, adm, "straddle", 1, nil)
	cl := newDataClient(t, tb.b, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for seq := int64(0); seq < 20; seq++ { // one batch per record
		rec := &kgo.Record{Topic: "straddle", Value: tierValue(0, seq)}
		if err := cl.ProduceSync(testCtx(t), rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := tb.b.parts.lookup("straddle", 0)
	if rolled, err := p.log.RollIfOlder(time.Now().Add(time.Hour), 0, p.highWatermark()); !rolled || err != nil {
		t.Fatalf("roll: %v %v", rolled, err)
	}
	seg := p.log.SealedSegments()[0]
	uploadPrefix(t, tb.b, p, seg, 8) // the old leader's object: offsets 0-7
	if err := tb.b.tiering.UploadPartition(testCtx(t), tierPartition{p, tb.b}); err != nil {
		t.Fatal(err)
	}
	entries := p.manifest.Segments(p.topicID, p.index)
	if len(entries) != 2 || entries[1].BaseOffset != 8 || entries[1].LastOffset != 19 {
		t.Fatalf("entries %+v, want [0,7] and [8,19]", entries)
	}
	checkTiered(t, tb, mem, "straddle", 0)
}

// uploadPrefix uploads and commits seg's offsets below end as one object.
func uploadPrefix(t *testing.T, b *Broker, p *partition, seg hotlog.SegmentInfo, end int64) {
	t.Helper()
	f, _, err := p.log.OpenSealedSegment(seg.BaseOffset)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pos, err := p.log.SealedPosition(seg.BaseOffset, end)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := tier.EncodeSegmentObject(io.NewSectionReader(f, 0, pos), pos, tier.SegmentMeta{
		Topic: p.topic, TopicID: p.topicID, Partition: p.index})
	if err != nil {
		t.Fatal(err)
	}
	key, err := tier.SegmentKey(tier.SegmentKeyParts{Cluster: b.store.Cluster(), Topic: p.topic, TopicID: p.topicID,
		Partition: p.index, BaseOffset: seg.BaseOffset})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.objects.Put(testCtx(t), key, obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	if err := b.tiering.CommitSegment(testCtx(t), tierPartition{p, b}, tier.EntryFor(tp(p), obj, key)); err != nil {
		t.Fatal(err)
	}
}
