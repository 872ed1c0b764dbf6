package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsetAt sends a raw ListOffsets for topic/0 at timestamp ts (or the
// special -1 latest, -2 earliest, -3 max timestamp) and returns offset and
// timestamp as the broker answered.
func listOffsetAt(t testing.TB, cl *kgo.Client, topic string, ts int64) (offset, timestamp int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets: want one partition, got %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		t.Fatalf("list offsets %s at %d: %v", topic, ts, err)
	}
	return p.Offset, p.Timestamp
}

// TestListOffsetsByTimestamp: records with increasing timestamps span
// several segments (batches of one to five records); ListOffsets returns the
// first offset whose timestamp is >= the target, with that record's
// timestamp, and -1 when every record is older.
func TestListOffsetsByTimestamp(t *testing.T) {
	b := StartBroker(t)
	const topic = "by-time"
	createTopic(t, b.Admin(), topic, 1, map[string]string{"internal.segment.bytes": "16384", "retention.ms": "-1"})
	base := time.Now().Add(-time.Hour).UnixMilli()
	const n = 400
	tsOf := func(i int64) int64 { return base + i*10 }
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := int64(0); i < n; {
		var rs []*kgo.Record
		for j := 0; j < int(i%5)+1 && i < n; j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Timestamp: time.UnixMilli(tsOf(i)), Value: fmt.Appendf(nil, "%d-%s", i, strings.Repeat("t", 150))})
			i++
		}
		produceSync(t, cl, rs...)
	}
	if segs := segmentFiles(t, b.PartitionDir(topic, 0)); len(segs) < 3 {
		t.Fatalf("want records across >= 3 segments, have %v (%d bytes)", segs, logBytesOnDisk(t, b.PartitionDir(topic, 0)))
	}
	type query struct {
		name     string
		target   int64
		want     int64
		wantTime int64
	}
	queries := []query{{"before all", base - 1000, 0, tsOf(0)}}
	for _, i := range []int64{0, 1, 57, 58, 123, 250, 398, 399} {
		queries = append(queries,
			query{fmt.Sprintf("exact %d", i), tsOf(i), i, tsOf(i)},
			query{fmt.Sprintf("between %d and %d", i-1, i), tsOf(i) - 5, i, tsOf(i)})
	}
	check := func(when string, cl *kgo.Client) {
		for _, q := range queries {
			off, ts := listOffsetAt(t, cl, topic, q.target)
			if off != q.want || ts != q.wantTime {
				t.Errorf("%s, %s: ListOffsets(%d) = offset %d ts %d, want offset %d ts %d", when, q.name, q.target, off, ts, q.want, q.wantTime)
			}
		}
	}
	check("before restart", cl)
	b.Restart() // time indexes reloaded or rebuilt
	cl = b.Client()
	check("after restart", cl)
	if off, ts := listOffsetAt(t, cl, topic, tsOf(n-1)+1); off != -1 || ts != -1 {
		t.Errorf("after all: ListOffsets = offset %d ts %d, want -1 -1 (Kafka's answer when no record is new enough)", off, ts)
	}
	if off, ts := listOffsetAt(t, cl, topic, -3); off != n-1 || ts != tsOf(n-1) {
		t.Errorf("max timestamp: ListOffsets(-3) = offset %d ts %d, want %d %d", off, ts, n-1, tsOf(n-1))
	}
	if off, _ := listOffsetAt(t, cl, topic, -1); off != n {
		t.Errorf("latest: %d, want %d", off, n)
	}
	if off, _ := listOffsetAt(t, cl, topic, -2); off != 0 {
		t.Errorf("earliest: %d, want 0", off)
	}
}
