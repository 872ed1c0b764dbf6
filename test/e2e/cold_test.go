package e2e

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/tiertest"
)

// Cold reads against a real MinIO and the real binary.

// TestColdReadsFromMinIOAcrossRestart: with most of two partitions only in
// the bucket, a consumer from offset 0 reads every record exactly as
// produced; after a restart (empty cold cache, manifest reloaded from
// etcd) earliest offsets, timestamp look-ups and a read from offset 0
// still work.
func TestColdReadsFromMinIOAcrossRestart(t *testing.T) {
	m := tiertest.StartMinIO(t)
	b := startTieredBroker(t, m)
	const (
		topic      = "coldread"
		partitions = 2
	)
	createTopic(t, b.Admin(), topic, partitions, map[string]string{
		"internal.segment.bytes": "1048576", "local.retention.bytes": "2097152", "retention.ms": "-1"})
	tp := newTierProducer(b, topic, partitions)
	tp.produce(t, testCtx(t, 2*time.Minute), 12<<20)
	testkit.WaitFor(t, 60*time.Second, "most records only in the bucket", func() bool {
		s := fetchTierStatus(t, b, topic)
		return s[0].LocalStart > tp.next[0]/2 && s[1].LocalStart > tp.next[1]/2
	})
	stamps := consumeColdFromZero(t, b, topic, tp)
	checkColdListOffsets(t, b, topic, tp, stamps)

	b.Restart()
	checkColdListOffsets(t, b, topic, tp, stamps)
	consumeColdFromZero(t, b, topic, tp)
}

// consumeColdFromZero reads every partition from offset 0 to its end,
// checking each record, and returns partition 0's timestamps by offset.
func consumeColdFromZero(t *testing.T, b *Broker, topic string, tp *tierProducer) []int64 {
	t.Helper()
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx := testCtx(t, 2*time.Minute)
	next := make([]int64, tp.partitions)
	var stamps []int64
	remaining := func() bool {
		for p, n := range next {
			if n < tp.next[p] {
				return true
			}
		}
		return false
	}
	for remaining() {
		fetches := cl.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("consume (at %v): %v", next, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			checkTierValue(t, r.Partition, r.Offset, r.Value)
			if r.Partition == 0 {
				stamps = append(stamps, r.Timestamp.UnixMilli())
			}
			next[r.Partition]++
		})
	}
	cl.Close()
	return stamps
}

// checkColdListOffsets checks partition 0's earliest, earliest-local,
// latest-tiered and timestamp answers against the tier status and the
// consumed timestamps.
func checkColdListOffsets(t *testing.T, b *Broker, topic string, tp *tierProducer, stamps []int64) {
	t.Helper()
	var status tierStatus
	testkit.WaitFor(t, 30*time.Second, "the manifest loaded", func() bool {
		status = fetchTierStatus(t, b, topic)[0]
		return status.Tiered && status.LocalStart > 0
	})
	cl := b.Client()
	if off, _ := listOffsetAt(t, cl, topic, -2); off != 0 {
		t.Errorf("earliest: %d, want 0", off)
	}
	if off, _ := listOffsetAt(t, cl, topic, -4); off != status.LocalStart {
		t.Errorf("earliest local: %d, want %d", off, status.LocalStart)
	}
	if off, _ := listOffsetAt(t, cl, topic, -5); off < status.TieredEnd-1 || off >= tp.next[0] {
		t.Errorf("latest tiered: %d, tiered end %d", off, status.TieredEnd)
	}
	for _, k := range []int64{0, 7, status.LocalStart / 2, status.LocalStart - 1, status.LocalStart + 1} {
		want := int64(0)
		for want < int64(len(stamps)) && stamps[want] < stamps[k] {
			want++
		}
		if off, ts := listOffsetAt(t, cl, topic, stamps[k]); off != want || ts != stamps[want] {
			t.Errorf("timestamp of offset %d (%d): offset %d ts %d, want %d", k, stamps[k], off, ts, want)
		}
	}
}
