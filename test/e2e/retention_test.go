package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
)

// TestRetention: with small segments and a size or time bound, old segments
// are deleted, the log start offset moves, ListOffsets earliest and the
// fetch response's log start offset agree, a fetch below the start gets
// OFFSET_OUT_OF_RANGE, and the start offset is readable.
func TestRetention(t *testing.T) {
	b := StartBroker(t, withArgs("--log-retention-check-interval", "500ms"))
	const retentionBytes = 65536
	cases := []struct {
		topic   string
		configs map[string]string
		// bounded checks the retained size once the start has moved.
		bounded func(onDisk int64) bool
	}{
		{"retain-bytes", map[string]string{"internal.segment.bytes": "16384", "retention.bytes": fmt.Sprint(retentionBytes), "retention.ms": "-1"},
			func(onDisk int64) bool { return onDisk <= retentionBytes+16384 }},
		{"retain-ms", map[string]string{"internal.segment.bytes": "16384", "retention.ms": "3000"},
			func(int64) bool { return true }},
	}
	adm := b.Admin()
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for _, c := range cases {
		createTopic(t, adm, c.topic, 1, c.configs)
		for i := 0; i < 40; i++ { // ~400 KiB: about 25 segments of 16 KiB
			var rs []*kgo.Record
			for j := 0; j < 10; j++ {
				rs = append(rs, &kgo.Record{Topic: c.topic, Value: fmt.Appendf(nil, "%d-%d-%s", i, j, strings.Repeat("p", 1000))})
			}
			produceSync(t, cl, rs...)
		}
	}
	for _, c := range cases {
		// Wait until the start has moved, the bound holds and the start has
		// stayed put for 2s (4 retention checks), so the checks below do not
		// race a deletion in progress.
		var start, prev int64 = 0, -1
		var since time.Time
		testkit.WaitFor(t, 90*time.Second, c.topic+" log start offset to move, settle, and the size bound to hold", func() bool {
			time.Sleep(200 * time.Millisecond)
			start = startOffsets(t, adm, c.topic)[0]
			if start != prev {
				prev, since = start, time.Now()
			}
			return start > 0 && time.Since(since) >= 2*time.Second && c.bounded(logBytesOnDisk(t, b.PartitionDir(c.topic, 0)))
		})
		end := endOffsets(t, adm, c.topic)[0]
		if start > end {
			t.Fatalf("%s: earliest %d > latest %d", c.topic, start, end)
		}
		checkFetchBelowStart(t, b, c.topic, start)
		checkDeleteRecordsLowWatermark(t, adm, c.topic, start)
		if start < end {
			got := consumeRange(t, b, c.topic, 0, start, start+1)
			if got[0].Offset != start {
				t.Fatalf("%s: reading from the log start %d returned offset %d", c.topic, start, got[0].Offset)
			}
		}
		t.Logf("%s: log start %d, end %d, %d bytes on disk", c.topic, start, end, logBytesOnDisk(t, b.PartitionDir(c.topic, 0)))
	}
}

// logBytesOnDisk sums the partition's .log file sizes.
func logBytesOnDisk(t testing.TB, dir string) int64 {
	var total int64
	for _, p := range segmentFiles(t, dir) {
		if st, err := os.Stat(p); err == nil {
			total += st.Size()
		}
	}
	return total
}

// fetchPartition sends one raw Fetch for topic/0 at offset and returns the
// partition's answer.
func fetchPartition(t testing.TB, b *Broker, topic string, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	cl := b.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	var id [16]byte
	for _, mt := range md.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			id = mt.TopicID
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		t.Fatalf("fetch: top-level %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: want one topic with one partition, got %+v", resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

// checkFetchBelowStart asserts a fetch below the log start offset is
// OFFSET_OUT_OF_RANGE and one at it reports the same log start offset.
func checkFetchBelowStart(t *testing.T, b *Broker, topic string, start int64) {
	t.Helper()
	below := fetchPartition(t, b, topic, start-1)
	if err := kerr.ErrorForCode(below.ErrorCode); err != kerr.OffsetOutOfRange {
		t.Fatalf("%s: fetch at %d below log start %d: error %v, want OFFSET_OUT_OF_RANGE", topic, start-1, start, err)
	}
	at := fetchPartition(t, b, topic, start)
	if err := kerr.ErrorForCode(at.ErrorCode); err != nil {
		t.Fatalf("%s: fetch at log start %d: %v", topic, start, err)
	}
	if at.LogStartOffset != start {
		t.Fatalf("%s: fetch reports log start %d, ListOffsets earliest says %d", topic, at.LogStartOffset, start)
	}
}

// checkDeleteRecordsLowWatermark: DeleteRecords up to the current log start
// deletes nothing and reports that start as the low watermark.
func checkDeleteRecordsLowWatermark(t *testing.T, adm *kadm.Client, topic string, start int64) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: start})
	dr, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatalf("%s: delete records to %d: %v", topic, start, err)
	}
	r, ok := dr.Lookup(topic, 0)
	if !ok || r.Err != nil || r.LowWatermark != start {
		t.Fatalf("%s: DeleteRecords(%d) = %+v (found %v), want low watermark %d as ListOffsets earliest", topic, start, r, ok, start)
	}
}
