package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/diskless"
	"github.com/strata-log/strata/metadata"
)

// TestDisklessReadsWaitForTheIndex: until the broker's index of diskless
// coordinates holds its first snapshot (a broker just restarted), Fetch,
// ListOffsets and OffsetForLeaderEpoch of a diskless partition answer
// OFFSET_NOT_AVAILABLE, which clients retry, instead of an empty log: an
// offset out of range would send a consumer back to its reset offset, and
// a log end of 0 would look like a truncation.
func TestDisklessReadsWaitForTheIndex(t *testing.T) {
	tb, _, _ := startDisklessBroker(t)
	b := tb.b
	swapDisklessIndex(t, b, diskless.NewIndex(b.store, nil)) // never run
	ctx := testCtx(t)

	if sp := disklessFetch(t, b, "dl", 0, 5); sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("fetch before the index is loaded: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	listReq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "dl"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, listOffsetsLatest
	lt.Partitions = append(lt.Partitions, lp)
	listReq.Topics = append(listReq.Topics, lt)
	listed, err := b.handleListOffsets(ctx, &requestContext{}, listReq)
	if err != nil {
		t.Fatal(err)
	}
	if sp := listed.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("list offsets before the index is loaded: offset %d, %v", sp.Offset, kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := disklessEpochEnd(t, b, "dl", 0); sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("offset for leader epoch before the index is loaded: end %d, %v", sp.EndOffset, kerr.ErrorForCode(sp.ErrorCode))
	}
}

// TestDisklessReadsAheadOfALaggingIndex: the broker's index lags the
// commits (loaded before them and told of none, as while its etcd watch
// resumes), and a consumer fetches an offset it read up to through another
// broker. The fetch is OFFSET_NOT_AVAILABLE (retried), not
// OFFSET_OUT_OF_RANGE (the consumer would reset); an offset past the
// partition's end is still out of range; OffsetForLeaderEpoch ends epoch 0
// at the partition's end in etcd, not at the index's (a truncation to the
// consumer).
func TestDisklessReadsAheadOfALaggingIndex(t *testing.T) {
	tb, _, _ := startDisklessBroker(t)
	b := tb.b
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lagging := diskless.NewIndex(frozenWatcher{}, nil)
	go lagging.Run(ctx)
	<-lagging.Ready()
	swapDisklessIndex(t, b, lagging)

	topic, _, _ := b.parts.disklessTopic("dl")
	other := diskless.NewAppender(diskless.Config{Cluster: b.store.Cluster(), Linger: time.Millisecond}, b.store, b.objects, &diskless.Stats{})
	defer other.Close()
	if _, err := other.Append(ctx, metadata.TierPartition{TopicID: topic.ID, Partition: 0}, buildBatch(batchSpec{records: 5, valueSize: 8, timestamp: time.Now().UnixMilli()})); err != nil {
		t.Fatal(err)
	}

	if sp := disklessFetch(t, b, "dl", 0, 3); sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("fetch of a committed offset past the lagging index: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := disklessFetch(t, b, "dl", 0, 6); sp.ErrorCode != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch past the partition's end: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	if sp := disklessEpochEnd(t, b, "dl", 0); sp.ErrorCode != 0 || sp.LeaderEpoch != 0 || sp.EndOffset != 5 {
		t.Fatalf("offset for leader epoch with a lagging index: epoch %d end %d, %v; want epoch 0 ending at 5",
			sp.LeaderEpoch, sp.EndOffset, kerr.ErrorForCode(sp.ErrorCode))
	}
}

// swapDisklessIndex makes b read diskless partitions through ix, calling
// the handlers on the test's goroutine only (no client has used the
// diskless path, and runDiskless has read b.diskless once its index is
// ready).
func swapDisklessIndex(t *testing.T, b *Broker, ix *diskless.Index) {
	t.Helper()
	<-b.diskless.index.Ready()
	svc := *b.diskless
	svc.index = ix
	svc.reader = diskless.NewReader(ix, b.objects, b.store.Cluster(), 0, svc.stats)
	b.diskless = &svc
}

// frozenWatcher is etcd as an index cut off from it sees it: an empty
// snapshot, then no event.
type frozenWatcher struct{}

func (frozenWatcher) LoadDiskless(context.Context) (metadata.DisklessSnapshot, error) {
	return metadata.DisklessSnapshot{Revision: 1}, nil
}

func (frozenWatcher) WatchDiskless(ctx context.Context, _ int64) <-chan metadata.DisklessEvent {
	events := make(chan metadata.DisklessEvent)
	go func() {
		<-ctx.Done()
		close(events)
	}()
	return events
}

// disklessFetch fetches one partition from offset, without waiting.
func disklessFetch(t *testing.T, b *Broker, topic string, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MaxBytes = 12, 0, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.handleFetch(testCtx(t), &requestContext{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
}

// disklessEpochEnd asks OffsetForLeaderEpoch for epoch 0 of one partition.
func disklessEpochEnd(t *testing.T, b *Broker, topic string, partition int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.LeaderEpoch, rp.CurrentLeaderEpoch = partition, 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := b.handleOffsetForLeaderEpoch(testCtx(t), &requestContext{}, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]
}
