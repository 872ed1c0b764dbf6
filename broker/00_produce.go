package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
)

// Produce: v3-11 (RecordBatch v2 only).
//
// Behaviour:
//   - acks=0 gets no response; if any partition failed, the connection is
//     closed instead, as Kafka does, so the client refreshes its metadata.
//   - acks=1 answers after the leader's append (no fsync wait).
//   - acks=-1 checks min.insync.replicas against the ISR before appending
//     (NOT_ENOUGH_REPLICAS), then waits until the HW passes the appended
//     batches, bounded by the request timeout (REQUEST_TIMED_OUT). The HW
//     includes the fsync under --durability=fsync (partitions.go).
//   - Batches are validated header-only and stored as sent (batches.go).
//   - Idempotent batches (producerId >= 0) are accepted without sequence
//     checks; duplicate detection and OUT_OF_ORDER_SEQUENCE_NUMBER come with
//     issue 6, which also brings transactional batches (rejected now with
//     INVALID_TXN_STATE) and v12 (KIP-890 implicit AddPartitionsToTxn).
//   - v13 addresses topics by id; the lookup is here, but the version is not
//     advertised until v12 is.
//   - Produce requests of one connection are appended in order (conn.go);
//     the handler releases the next one as soon as its appends are done, so
//     acks=-1 waits of pipelined requests overlap.

// pendingAck is an appended partition that waits for the HW (acks=-1).
type pendingAck struct {
	topic, partition int // indexes into the response
	p                *partition
	lastOffset       int64
}

func (b *Broker) handleProduce(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	now := time.Now().UnixMilli()
	var pending []pendingAck
	failed := false
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for pi := range rt.Partitions {
			sp, wait := b.producePartition(req, rt, &rt.Partitions[pi], now)
			failed = failed || sp.ErrorCode != 0
			if wait != nil {
				wait.topic, wait.partition = ti, pi
				pending = append(pending, *wait)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	rc.releaseOrder()
	switch req.Acks {
	case 0:
		if failed {
			return nil, errAcksZeroFailure
		}
		return nil, nil
	case -1:
		b.waitAcks(ctx, req.TimeoutMillis, resp, pending)
	}
	return resp, nil
}

// producePartition validates and appends one partition's batches. It returns
// the partition's answer and, for acks=-1, what to wait for.
func (b *Broker) producePartition(req *kmsg.ProduceRequest, rt *kmsg.ProduceRequestTopic,
	rp *kmsg.ProduceRequestTopicPartition, now int64,
) (kmsg.ProduceResponseTopicPartition, *pendingAck) {
	sp := kmsg.NewProduceResponseTopicPartition()
	sp.Partition = rp.Partition
	var p *partition
	var code int16
	if req.Version >= 13 {
		p, code = b.lookupPartitionByID(rt.TopicID, rp.Partition)
	} else {
		p, code = b.lookupPartition(rt.Topic, rp.Partition)
	}
	if code != 0 {
		sp.ErrorCode = code
		return sp, nil
	}
	if err := b.throttleUploadLag(p); err != nil {
		b.setProduceError(&sp, err)
		return sp, nil
	}
	res, logAppendTime, err := b.appendProduced(p, req, rp.Records, now)
	if err != nil {
		b.setProduceError(&sp, err)
		return sp, nil
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = logAppendTime
	sp.LogStartOffset = p.logStartOffset()
	if req.Acks != -1 {
		return sp, nil
	}
	return sp, &pendingAck{p: p, lastOffset: res.LastOffset}
}

// appendProduced checks the request-level and topic rules and appends.
func (b *Broker) appendProduced(p *partition, req *kmsg.ProduceRequest, records []byte, now int64) (hotlog.AppendResult, int64, error) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return hotlog.AppendResult{}, -1, fmt.Errorf("%w: acks %d", errInvalidAcks, req.Acks)
	}
	cfg := p.config()
	batches, err := splitProduceRecords(records, rulesFor(cfg, req.Version), now)
	if err != nil {
		return hotlog.AppendResult{}, -1, err
	}
	if isr := produceISRSize(p); req.Acks == -1 && int(cfg.MinInsyncReplicas) > isr {
		return hotlog.AppendResult{}, -1, fmt.Errorf("%w: isr %d, min.insync.replicas %d", errNotEnoughISR, isr, cfg.MinInsyncReplicas)
	}
	res, err := p.log.Append(batches.records, p.leaderEpoch())
	if err != nil {
		return res, -1, err
	}
	return res, batches.logAppendTime, nil
}

// produceISRSize is the ISR size min.insync.replicas is checked against.
// A single node is its own ISR; issue 5 (replication) replaces this with
// the partition's replicated state.
func produceISRSize(*partition) int { return 1 }

// waitAcks waits, under one deadline for the whole request, until the HW of
// every pending partition passes its appended batches. Partitions that do
// not get there in time answer REQUEST_TIMED_OUT (their data stays
// appended, as in Kafka).
func (b *Broker) waitAcks(ctx context.Context, timeoutMillis int32, resp *kmsg.ProduceResponse, pending []pendingAck) {
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, w := range pending {
		if err := w.p.waitHighWatermark(ctx, w.lastOffset); err != nil {
			b.setProduceError(&resp.Topics[w.topic].Partitions[w.partition], err)
		}
	}
}

// setProduceError puts err into a partition answer (code and, v8+, the
// message). Unexpected errors are logged: the client only sees a code.
func (b *Broker) setProduceError(sp *kmsg.ProduceResponseTopicPartition, err error) {
	sp.ErrorCode = produceErrorCode(err)
	msg := err.Error()
	sp.ErrorMessage = &msg
	if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
		b.log.Warn("produce failed", "partition", sp.Partition, "err", err)
	}
}

// dataPathVersions are the supported version ranges of the data-path APIs
// (the ApiVersions answer and the dispatcher use them; server.go clamps them
// to what kmsg knows).
var dataPathVersions = map[int16][2]int16{
	0:  {3, 11}, // Produce: v3+ carries RecordBatch v2 only; v12 waits for issue 6
	1:  {4, 16}, // Fetch: v13+ by topic id
	2:  {1, 10}, // ListOffsets: -3 v7, -4 v8, -5 v9; v11 (-6) waits for tiering
	21: {0, 2},  // DeleteRecords
	23: {0, 4},  // OffsetForLeaderEpoch
}
