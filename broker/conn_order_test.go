package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata/metadatatest"
)

// The requests of one connection take effect in the order they were sent
// (Kafka's promise: one request of a connection in processing at a time),
// not only their responses. Each test pipelines its requests on one raw
// connection without waiting for any answer, then reads them all.

const pipelinedCommits = 100

// TestPipelinedOffsetCommitsApplyInOrder: 100 OffsetCommits of offsets
// 1..100 sent back to back, then an OffsetFetch: it must read 100.
func TestPipelinedOffsetCommitsApplyInOrder(t *testing.T) {
	b, adm, _ := dataPathBroker(t)
	createDataTopic(t, adm, "ordered", 1, nil)
	waitGroupCoordinator(t, adm, "warm-up")
	for run := range 20 {
		group := fmt.Sprintf("ordered-%d", run)
		c := dialWire(t, b)
		for offset := int64(1); offset <= pipelinedCommits; offset++ {
			c.send(offsetCommitRequest(group, "ordered", offset), int32(offset))
		}
		c.send(offsetFetchRequest(group, "ordered", false), pipelinedCommits+1)
		for corr := int32(1); corr <= pipelinedCommits; corr++ {
			resp := recvAs(t, c, corr, 8, kmsg.NewPtrOffsetCommitResponse())
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("run %d: commit %d: %v", run, corr, kerr.ErrorForCode(code))
			}
		}
		if got := fetchedOffset(t, c, pipelinedCommits+1); got != pipelinedCommits {
			t.Fatalf("run %d: committed offset read back %d, want %d (commits applied out of order)", run, got, pipelinedCommits)
		}
	}
}

// TestPipelinedTxnOffsetCommitsApplyInOrder: the same with TxnOffsetCommit
// inside one transaction: AddOffsetsToTxn, 100 TxnOffsetCommits and EndTxn
// pipelined; once the commit is stable the group reads 100.
func TestPipelinedTxnOffsetCommitsApplyInOrder(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastTxns)
	adm, cl := adminClient(t, tb.b)
	createDataTopic(t, adm, "ordered", 1, nil)
	waitGroupCoordinator(t, adm, "warm-up")
	initTxnProducerOnce(t, cl, "takes-producer-id-0")
	for run := range 20 {
		group, txnID := fmt.Sprintf("txn-ordered-%d", run), fmt.Sprintf("txn-ordered-%d", run)
		pid, epoch := initTxnProducer(t, cl, txnID)
		c := dialWire(t, tb.b)
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = 3, txnID, pid, epoch, group
		c.send(add, 1)
		for offset := int64(1); offset <= pipelinedCommits; offset++ {
			c.send(txnOffsetCommitRequest(txnID, pid, epoch, group, "ordered", offset), int32(1+offset))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, txnID, pid, epoch, true
		c.send(end, pipelinedCommits+2)
		if code := recvAs(t, c, 1, 3, kmsg.NewPtrAddOffsetsToTxnResponse()).ErrorCode; code != 0 {
			t.Fatalf("run %d: AddOffsetsToTxn: %v", run, kerr.ErrorForCode(code))
		}
		for corr := int32(2); corr <= pipelinedCommits+1; corr++ {
			resp := recvAs(t, c, corr, 3, kmsg.NewPtrTxnOffsetCommitResponse())
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("run %d: TxnOffsetCommit %d: %v", run, corr-1, kerr.ErrorForCode(code))
			}
		}
		if code := recvAs(t, c, pipelinedCommits+2, 3, kmsg.NewPtrEndTxnResponse()).ErrorCode; code != 0 {
			t.Fatalf("run %d: EndTxn: %v", run, kerr.ErrorForCode(code))
		}
		if got := stableOffset(t, c, group, "ordered"); got != pipelinedCommits {
			t.Fatalf("run %d: committed offset read back %d, want %d (commits applied out of order)", run, got, pipelinedCommits)
		}
	}
}

// TestPipelinedProduceThenFetchSeesTheRecords: Produce and Fetch
// interleaved on one connection. Each Fetch asks for the last offset of the
// Produce sent just before it: had it run before that append, the offset
// would lie past the log end (OFFSET_OUT_OF_RANGE).
func TestPipelinedProduceThenFetchSeesTheRecords(t *testing.T) {
	b, adm, _ := dataPathBroker(t)
	id := createDataTopic(t, adm, "ordered", 1, nil)
	const rounds, perBatch = 20, 10
	for run := range 5 {
		c := dialWire(t, b)
		base := int64(run * rounds * perBatch)
		for i := range int64(rounds) {
			c.send(produceRequest("ordered", buildBatch(batchSpec{records: perBatch, valueSize: 8})), int32(2*i+1))
			c.send(fetchRequest(id, base+(i+1)*perBatch-1), int32(2*i+2))
		}
		for i := range int64(rounds) {
			presp := recvAs(t, c, int32(2*i+1), 9, kmsg.NewPtrProduceResponse())
			pp := presp.Topics[0].Partitions[0]
			if pp.ErrorCode != 0 || pp.BaseOffset != base+i*perBatch {
				t.Fatalf("run %d produce %d: %v at %d, want offset %d", run, i, kerr.ErrorForCode(pp.ErrorCode), pp.BaseOffset, base+i*perBatch)
			}
			fresp := recvAs(t, c, int32(2*i+2), 13, kmsg.NewPtrFetchResponse())
			fp := fresp.Topics[0].Partitions[0]
			want := base + (i+1)*perBatch - 1
			if fp.ErrorCode != 0 {
				t.Fatalf("run %d fetch %d at %d (sent after its produce): %v", run, i, want, kerr.ErrorForCode(fp.ErrorCode))
			}
			if offsets := batchOffsets(fp.RecordBatches); !slices.Contains(offsets, pp.BaseOffset) {
				t.Fatalf("run %d fetch %d at %d: batches at %v, not the produced one at %d", run, i, want, offsets, pp.BaseOffset)
			}
		}
	}
}

// recvAs reads the next response, checks its correlation id and decodes
// it at version.
func recvAs[R kmsg.Response](t *testing.T, c *wireClient, corr int32, version int16, resp R) R {
	t.Helper()
	resp.SetVersion(version)
	got, body, err := c.recv(resp.IsFlexible())
	if err != nil || got != corr {
		t.Fatalf("response %d (err %v), want correlation id %d", got, err, corr)
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("decoding response %d: %v", corr, err)
	}
	return resp
}

func offsetCommitRequest(group, topic string, offset int64) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, group, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func txnOffsetCommitRequest(txnID string, pid int64, epoch int16, group, topic string, offset int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = 3, txnID, group, pid, epoch
	req.Generation = -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func offsetFetchRequest(group, topic string, requireStable bool) *kmsg.OffsetFetchRequest {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.RequireStable = 8, requireStable
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	return req
}

// fetchedOffset reads an OffsetFetch v8 answer for one partition.
func fetchedOffset(t *testing.T, c *wireClient, corr int32) int64 {
	t.Helper()
	resp := recvAs(t, c, corr, 8, kmsg.NewPtrOffsetFetchResponse())
	g := resp.Groups[0]
	if g.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(g.ErrorCode))
	}
	p := g.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		t.Fatalf("offset fetch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// stableOffset asks (require_stable) until the group's transactional
// commit is complete, then returns its offset.
func stableOffset(t *testing.T, c *wireClient, group, topic string) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	_ = c.nc.SetDeadline(deadline.Add(5 * time.Second))
	for corr := int32(10_000); ; corr++ {
		c.send(offsetFetchRequest(group, topic, true), corr)
		resp := recvAs(t, c, corr, 8, kmsg.NewPtrOffsetFetchResponse())
		code := resp.Groups[0].ErrorCode
		if code == 0 && len(resp.Groups[0].Topics) > 0 {
			code = resp.Groups[0].Topics[0].Partitions[0].ErrorCode
		}
		switch {
		case code == 0:
			return resp.Groups[0].Topics[0].Partitions[0].Offset
		case code != kerr.UnstableOffsetCommit.Code || time.Now().After(deadline):
			t.Fatalf("offset fetch: %v", kerr.ErrorForCode(code))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func produceRequest(topic string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, 1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchRequest(id [16]byte, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 13, -1, 5000, 1, 1<<20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = 0, offset, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// waitGroupCoordinator commits once through kadm (which retries while the
// coordinator loads), so raw requests later find it ready.
func waitGroupCoordinator(t *testing.T, adm *kadm.Client, group string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "ordered", Partition: 0, At: 0})
	for {
		resp, err := adm.CommitOffsets(ctx, group, offsets)
		if err == nil && resp.Ok() {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("group coordinator not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStableOffsetFetchRightAfterEndTxn: an OffsetFetch with
// require_stable sent right after a transactional commit's EndTxn answer
// gets the committed offset or UNSTABLE_OFFSET_COMMIT, never the offset
// from before the transaction: the marker that applies the pending commit
// may land at any moment of the fetch. Many short rounds, since that
// moment is narrow.
func TestStableOffsetFetchRightAfterEndTxn(t *testing.T) {
	if testing.Short() {
		t.Skip("stress test")
	}
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastTxns)
	adm, cl := adminClient(t, tb.b)
	createDataTopic(t, adm, "ordered", 1, nil)
	waitGroupCoordinator(t, adm, "warm-up")
	initTxnProducerOnce(t, cl, "takes-producer-id-0")
	for run := range 2000 {
		id := fmt.Sprintf("stable-%d", run)
		pid, epoch := initTxnProducer(t, cl, id)
		c := dialWire(t, tb.b)
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = 3, id, pid, epoch, id
		c.send(add, 1)
		c.send(txnOffsetCommitRequest(id, pid, epoch, id, "ordered", 7), 2)
		end := kmsg.NewPtrEndTxnRequest()
		end.Version, end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = 3, id, pid, epoch, true
		c.send(end, 3)
		recvAs(t, c, 1, 3, kmsg.NewPtrAddOffsetsToTxnResponse())
		recvAs(t, c, 2, 3, kmsg.NewPtrTxnOffsetCommitResponse())
		if code := recvAs(t, c, 3, 3, kmsg.NewPtrEndTxnResponse()).ErrorCode; code != 0 {
			t.Fatalf("run %d: EndTxn: %v", run, kerr.ErrorForCode(code))
		}
		if got := stableOffset(t, c, id, "ordered"); got != 7 {
			t.Fatalf("run %d: require_stable read back %d right after EndTxn, want 7", run, got)
		}
		c.nc.Close()
	}
}
