package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// idemBatch encodes an uncompressed RecordBatch v2 of one producer:
// values get sequence numbers seq, seq+1, ...
func idemBatch(pid int64, epoch int16, seq int32, values ...string) []byte {
	now := time.Now().UnixMilli()
	var records []byte
	for i, v := range values {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: []byte(v)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the body without its 1-byte Length 0
		records = rec.AppendTo(records)
	}
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  now, MaxTimestamp: now,
		ProducerID: pid, ProducerEpoch: epoch, FirstSequence: seq,
		NumRecords: int32(len(values)), Records: records,
	}
	batch.Length = int32(49 + len(records))
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[17:], recordbatch.Checksum(raw[21:]))
	return raw
}

// idemProduce sends one acks=all Produce of batch and returns the base
// offset and the partition's error. Like a Kafka client, it resends on
// NOT_LEADER_OR_FOLLOWER and LEADER_NOT_AVAILABLE (a restarted broker may
// answer before the controller re-elected it), for at most 30s.
func idemProduce(t testing.TB, cl *kgo.Client, topic string, batch []byte) (int64, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		off, err := idemProduceOnce(t, cl, topic, batch)
		if !errors.Is(err, kerr.NotLeaderForPartition) && !errors.Is(err, kerr.LeaderNotAvailable) || time.Now().After(deadline) {
			return off, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func idemProduceOnce(t testing.TB, cl *kgo.Client, topic string, batch []byte) (int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 0, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("produce request: %v", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce: want one partition in the response, got %+v", resp.Topics)
	}
	p := resp.Topics[0].Partitions[0]
	return p.BaseOffset, kerr.ErrorForCode(p.ErrorCode)
}

// initProducerID asks for an idempotent (non-transactional) producer id.
func initProducerID(t testing.TB, cl *kgo.Client) (int64, int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("InitProducerId: %v", err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// pstateValue is the value of sequence number seq (1 KiB).
func pstateValue(seq int) string { return fmt.Sprintf("seq-%04d-%s", seq, strings.Repeat("s", 1015)) }

// TestTxnProducerStateSurvivesKill: an idempotent producer writes
// 40 one-record batches over many small segments (producer-state snapshots
// at each roll); the broker is SIGKILLed and restarted. Rebuilt from the
// snapshot plus the log tail, the producer state still answers a resent
// recent batch as a duplicate with its original offset (writing nothing),
// rejects a sequence gap with OUT_OF_ORDER_SEQUENCE_NUMBER, and accepts the
// next sequence at the next offset.
func TestTxnProducerStateSurvivesKill(t *testing.T) {
	b := StartBroker(t)
	const topic, n = "txn-pstate", 40
	createTopic(t, b.Admin(), topic, 1, map[string]string{"internal.segment.bytes": "8192", "retention.ms": "-1"})
	cl := b.Client()
	pid, epoch := initProducerID(t, cl)
	for seq := range n {
		off, err := idemProduce(t, cl, topic, idemBatch(pid, epoch, int32(seq), pstateValue(seq)))
		if err != nil || off != int64(seq) {
			t.Fatalf("seq %d: offset %d, %v; want offset %d", seq, off, err, seq)
		}
	}
	if logs := segmentFiles(t, b.PartitionDir(topic, 0)); len(logs) < 4 {
		t.Fatalf("%d segments: want several rolls (snapshots) for the test to mean anything", len(logs))
	}
	b.Kill()
	b.Start()
	cl = b.Client()

	for _, seq := range []int{n - 1, n - 3} {
		off, err := idemProduce(t, cl, topic, idemBatch(pid, epoch, int32(seq), pstateValue(seq)))
		if err != nil || off != int64(seq) {
			t.Errorf("resent seq %d after the restart: offset %d, %v; want success at its original offset %d", seq, off, err, seq)
		}
	}
	if _, err := idemProduce(t, cl, topic, idemBatch(pid, epoch, n+1, pstateValue(n+1))); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Errorf("seq %d after %d: %v, want OUT_OF_ORDER_SEQUENCE_NUMBER", n+1, n-1, err)
	}
	if off, err := idemProduce(t, cl, topic, idemBatch(pid, epoch, n, pstateValue(n))); err != nil || off != n {
		t.Errorf("seq %d: offset %d, %v; want offset %d", n, off, err, n)
	}
	recs := consumeRange(t, b, topic, 0, 0, n+1)
	for i, r := range recs {
		if r.Offset != int64(i) || string(r.Value) != pstateValue(i) {
			t.Fatalf("offset %d holds %.10q, want seq %d", r.Offset, r.Value, i)
		}
	}
	if end := endOffsets(t, b.Admin(), topic)[0]; end != n+1 {
		t.Fatalf("end offset %d, want %d: a resent batch was written again", end, n+1)
	}
}
