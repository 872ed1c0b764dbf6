package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
)

func requestMetricsFor(b *Broker, key int16) (APIMetrics, bool) {
	for _, m := range b.RequestMetrics() {
		if m.APIKey == key {
			return m, true
		}
	}
	return APIMetrics{}, false
}

func topicBytesFor(b *Broker, topic string) TopicBytes {
	for _, tb := range b.TopicBytes() {
		if tb.Topic == topic {
			return tb
		}
	}
	return TopicBytes{}
}

func partitionMetricsFor(t *testing.T, b *Broker, topic string, index int32) PartitionMetrics {
	t.Helper()
	for _, m := range b.PartitionMetrics() {
		if m.Topic == topic && m.Partition == index {
			return m
		}
	}
	t.Fatalf("no partition metrics for %s-%d", topic, index)
	return PartitionMetrics{}
}

// checkHistogram checks that m's buckets are cumulative and within Count.
func checkHistogram(t *testing.T, m APIMetrics) {
	t.Helper()
	if len(m.Buckets) != len(RequestLatencyBuckets()) {
		t.Fatalf("%s: %d buckets, want %d", m.Name, len(m.Buckets), len(RequestLatencyBuckets()))
	}
	if !slices.IsSorted(m.Buckets) || m.Buckets[len(m.Buckets)-1] > m.Count {
		t.Fatalf("%s: buckets %v not cumulative within count %d", m.Name, m.Buckets, m.Count)
	}
	if m.SumSeconds <= 0 {
		t.Fatalf("%s: sum %v after %d requests", m.Name, m.SumSeconds, m.Count)
	}
}

// TestMetricsMoveWithTraffic: produce and fetch requests are counted per
// API, their bytes per topic, and the partition's log size and offsets
// follow the appends.
func TestMetricsMoveWithTraffic(t *testing.T) {
	b, adm, _ := dataPathBroker(t)
	id := createDataTopic(t, adm, "m", 1, nil)
	if _, ok := requestMetricsFor(b, 0); ok {
		t.Fatal("produce counted before any produce")
	}
	cl := newDataClient(t, b, kgo.DefaultProduceTopic("m"))
	var records []*kgo.Record
	for i := range 50 {
		records = append(records, &kgo.Record{Value: []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}})
	}
	produceSyncAll(t, cl, records)
	produce, ok := requestMetricsFor(b, 0)
	if !ok || produce.Name != "Produce" || produce.Count == 0 || produce.Errors != 0 {
		t.Fatalf("produce metrics %+v (%v)", produce, ok)
	}
	checkHistogram(t, produce)
	in := topicBytesFor(b, "m").BytesIn
	pm := partitionMetricsFor(t, b, "m", 0)
	if in == 0 || pm.LogSizeBytes < int64(in) || pm.LogEndOffset != 50 || pm.HighWatermark != 50 {
		t.Fatalf("after 50 records: bytes in %d, partition %+v", in, pm)
	}
	if !pm.Leader || pm.UnderReplicated || pm.Replicas != 1 || pm.ISRSize != 1 {
		t.Fatalf("single-replica leader: %+v", pm)
	}

	sp := fetchOnePartition(t, cl, newFetchReq("m", id, 0, 0, 0))
	if countRecords(t, sp.RecordBatches) != 50 {
		t.Fatalf("fetch: %+v", sp)
	}
	fetch, ok := requestMetricsFor(b, 1)
	if !ok || fetch.Count == 0 {
		t.Fatalf("fetch metrics %+v (%v)", fetch, ok)
	}
	checkHistogram(t, fetch)
	if tb := topicBytesFor(b, "m"); tb.BytesOut < uint64(len(sp.RecordBatches)) || tb.ReplicationBytesOut != 0 {
		t.Fatalf("after a %d-byte consumer fetch: %+v", len(sp.RecordBatches), tb)
	}
	if tb := topicBytesFor(b, "m"); tb.BytesIn != in {
		t.Fatalf("a fetch moved bytes in: %d -> %d", in, tb.BytesIn)
	}
}

// TestMetricsHandlerErrors: a failed acks=0 produce closes the connection
// and counts as an error of the Produce API.
func TestMetricsHandlerErrors(t *testing.T) {
	b, adm, _ := dataPathBroker(t)
	createDataTopic(t, adm, "e", 1, nil)
	wc := dialWire(t, b)
	wc.send(newProduceReq("e", 0, 1000, []byte("not a record batch at all, so it is corrupt")), 1)
	wc.expectClosed()
	testkit.WaitFor(t, 5*time.Second, "condition", func() bool { m, _ := requestMetricsFor(b, 0); return m.Errors == 1 })
	if m, _ := requestMetricsFor(b, 0); m.Count != 1 {
		t.Fatalf("produce metrics %+v, want 1 request, 1 error", m)
	}
	if tb := topicBytesFor(b, "e"); tb.BytesIn != 0 {
		t.Fatalf("a rejected batch counted as bytes in: %+v", tb)
	}
}

// TestMetricsUnderReplicatedAndISRShrink: a follower that stops fetching
// leaves the ISR; the partition is then under-replicated and the shrink
// is counted. Its fetches count as replication bytes out.
func TestMetricsUnderReplicatedAndISRShrink(t *testing.T) {
	rig := newReplicaRig(t, hotlog.DurabilityReplication, []int32{1, fakeFollower}, nil)
	epoch := rig.epoch(t)
	if sp := produceRaw(t, rig.b, rig.topic, 1, buildBatch(batchSpec{records: 3, timestamp: 1})); sp.ErrorCode != 0 {
		t.Fatalf("produce: %+v", sp)
	}
	sp := rig.followerFetch(t, fakeFollower, 0, epoch)
	if tb := topicBytesFor(rig.b, rig.topic); len(sp.RecordBatches) == 0 || tb.ReplicationBytesOut != uint64(len(sp.RecordBatches)) || tb.BytesOut != 0 {
		t.Fatalf("after a %d-byte follower fetch: %+v", len(sp.RecordBatches), tb)
	}
	// The follower stops fetching: after ReplicaLagTimeMax it leaves.
	testkit.WaitFor(t, 15*time.Second, "condition", func() bool { return partitionMetricsFor(t, rig.b, rig.topic, 0).UnderReplicated })
	pm := partitionMetricsFor(t, rig.b, rig.topic, 0)
	if pm.ISRSize != 1 || pm.Replicas != 2 || pm.ISRShrinks != 1 || pm.ISRExpands != 0 || !pm.Leader {
		t.Fatalf("after the shrink: %+v", pm)
	}
}
