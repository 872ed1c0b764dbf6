package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/diskless"
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
	<-b.diskless.index.Ready()                  // runDiskless has read b.diskless: the swap below races with nothing
	unloaded := diskless.NewIndex(b.store, nil) // never run
	svc := *b.diskless
	svc.index = unloaded
	svc.reader = diskless.NewReader(unloaded, b.objects, b.store.Cluster(), 0, svc.stats)
	b.diskless = &svc // no client has used the diskless path yet
	ctx := testCtx(t)
	rc := &requestContext{}

	fetchReq := kmsg.NewPtrFetchRequest()
	fetchReq.Version, fetchReq.MaxWaitMillis, fetchReq.MaxBytes = 12, 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "dl"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = 0, 5, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetchReq.Topics = append(fetchReq.Topics, ft)
	fetched, err := b.handleFetch(ctx, rc, fetchReq)
	if err != nil {
		t.Fatal(err)
	}
	if sp := fetched.(*kmsg.FetchResponse).Topics[0].Partitions[0]; sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("fetch before the index is loaded: %s", kerr.ErrorForCode(sp.ErrorCode))
	}

	listReq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "dl"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, listOffsetsLatest
	lt.Partitions = append(lt.Partitions, lp)
	listReq.Topics = append(listReq.Topics, lt)
	listed, err := b.handleListOffsets(ctx, rc, listReq)
	if err != nil {
		t.Fatal(err)
	}
	if sp := listed.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]; sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("list offsets before the index is loaded: offset %d, %v", sp.Offset, kerr.ErrorForCode(sp.ErrorCode))
	}

	epochReq := kmsg.NewPtrOffsetForLeaderEpochRequest()
	et := kmsg.NewOffsetForLeaderEpochRequestTopic()
	et.Topic = "dl"
	ep := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	ep.Partition, ep.LeaderEpoch, ep.CurrentLeaderEpoch = 0, 0, -1
	et.Partitions = append(et.Partitions, ep)
	epochReq.Topics = append(epochReq.Topics, et)
	ended, err := b.handleOffsetForLeaderEpoch(ctx, rc, epochReq)
	if err != nil {
		t.Fatal(err)
	}
	if sp := ended.(*kmsg.OffsetForLeaderEpochResponse).Topics[0].Partitions[0]; sp.ErrorCode != kerr.OffsetNotAvailable.Code {
		t.Fatalf("offset for leader epoch before the index is loaded: end %d, %v", sp.EndOffset, kerr.ErrorForCode(sp.ErrorCode))
	}
}
