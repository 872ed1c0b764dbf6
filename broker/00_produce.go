package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/replica"
)

// Produce: v3-12 (RecordBatch v2 only; versions in apis.go).
//
// Behaviour:
//   - acks=0 gets no response; if any partition failed, the connection is
//     closed instead, as Kafka does, so the client refreshes its metadata.
//   - acks=1 answers after the leader's append and, under fsync durability,
//     after the leader's flush (group-committed with the other appends), so
//     that an acknowledged record is durable and, with the leader alone in
//     the ISR, visible to consumers and ListOffsets at once, as in Kafka.
//   - Only the partition's leader appends (NOT_LEADER_OR_FOLLOWER, with
//     CurrentLeader and the leader's endpoint in v10+ answers).
//   - acks=-1 checks min.insync.replicas against the ISR before appending
//     (NOT_ENOUGH_REPLICAS), then waits in the replica's purgatory until
//     the HW (minimum LEO over the ISR) passes the appended batches:
//     NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
//     min.insync.replicas meanwhile, REQUEST_TIMED_OUT at the request
//     timeout. The leader's own LEO counts only once flushed under
//     --durability=fsync (replica.go).
//   - Batches are validated header-only and stored as sent (recordbatch.SplitProduce).
//   - Idempotent batches (producerId >= 0) are checked against the
//     partition's producer state, which the log keeps and every replica
//     rebuilds from its own log (hotlog/doc.go, "Producer state"): a retry
//     of one of the producer's last five batches is a success with the
//     ORIGINAL base offset, nothing appended (acks=-1 still waits until
//     the HW passes the original batch); a sequence gap or a new epoch not
//     starting at 0 is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch is
//     INVALID_PRODUCER_EPOCH; an unknown producer is accepted at any
//     sequence (KIP-360, as Kafka 2.5+), so UNKNOWN_PRODUCER_ID is mapped
//     but not produced.
//   - Transactional batches are accepted from producers with an
//     id and open the producer's transaction in the partition (the LSO
//     stops at its first offset until the marker; hotlog/doc.go,
//     "Transactions"). As Kafka 3.6+ (KIP-890 part 1), a transactional
//     batch that would open the producer's transaction in the partition
//     is first verified with the coordinator (txn_verify.go): a partition
//     not in the ongoing transaction is INVALID_TXN_STATE. The round trip
//     happens before the replica lock is taken; partitions of one request
//     are verified one after the other. v12 (KIP-890 part 2) is not
//     advertised. Control batches are INVALID_RECORD: markers come only
//     via WriteTxnMarkers.
//   - v13 addresses topics by id; the lookup is here, but the version is not
//     advertised until v12 is.
//   - Authorization (authz.go): Write on each topic, else
//     TOPIC_AUTHORIZATION_FAILED; a transactional producer also needs Write
//     on its transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     for every partition. Checked before the topic is looked up.
//   - Produce requests of one connection are appended in order (wire.Turns);
//     the handler releases the next one as soon as its appends are done, so
//     acks=-1 waits of pipelined requests overlap.

// pendingAck is an appended partition that waits for the HW (acks=-1)
// or, under fsync durability, for the leader's flush (acks=1).
type pendingAck struct {
	topic, partition int // indexes into the response
	wait             *replica.AckWait
	flush            *replica.FlushWait
}

func (b *Broker) handleProduce(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	b.cold.NoteHot() // the cold-read governor protects produce latency
	now := time.Now().UnixMilli()
	var pending []pendingAck
	var disklessAcks []disklessAck
	var leaders leaderEndpoints
	failed := false
	for ti := range req.Topics {
		rt := &req.Topics[ti]
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		denied := b.produceAuthCode(rc, req, rt)
		for pi := range rt.Partitions {
			if ack, sp, ok := b.produceDisklessPartition(req, rt, &rt.Partitions[pi], now, denied); ok {
				failed = failed || sp.ErrorCode != 0
				if ack.pending != nil {
					ack.topic, ack.partition = ti, pi
					disklessAcks = append(disklessAcks, ack)
				}
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			sp, wait, flush := b.producePartition(ctx, req, rt, &rt.Partitions[pi], now, denied)
			failed = failed || sp.ErrorCode != 0
			if wait != nil || flush != nil {
				pending = append(pending, pendingAck{topic: ti, partition: pi, wait: wait, flush: flush})
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	b.metrics.recordProduceBytes(req, resp, b.parts.topicName)
	rc.releaseOrder()
	switch req.Acks {
	case 0:
		if failed {
			// As Kafka: the client gets no response, so the closed
			// connection is its only sign (it refreshes metadata).
			b.log.Info("closing the connection after a failed acks=0 produce", "first_error", firstProduceError(resp))
			return nil, errAcksZeroFailure
		}
		return nil, nil
	case 1:
		waitFlushes(ctx, b.log, req.TimeoutMillis, resp, pending)
	case -1:
		waitAcks(ctx, b.log, req.TimeoutMillis, resp, pending)
	}
	b.waitDiskless(ctx, req.TimeoutMillis, resp, disklessAcks)
	b.addProduceLeaders(req, resp, &leaders)
	return resp, nil
}

// firstProduceError names the first partition error of resp.
func firstProduceError(resp *kmsg.ProduceResponse) string {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return fmt.Sprintf("%s-%d: %v", t.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
		}
	}
	return ""
}

// produceAuthCode is a topic's authorization answer (0: allowed): a
// transactional producer needs Write on its transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), every producer Write on the
// topic (TOPIC_AUTHORIZATION_FAILED, also for topics that do not exist, so
// that existence does not leak). An unknown topic id is left to the lookup
// (UNKNOWN_TOPIC_ID).
func (b *Broker) produceAuthCode(rc *requestContext, req *kmsg.ProduceRequest, rt *kmsg.ProduceRequestTopic) int16 {
	if !b.cfg.Authorizer {
		return 0
	}
	if id := derefStr(req.TransactionID); id != "" && !b.authz.allowedTxnID(rc, auth.OpWrite, id) {
		return kerr.TransactionalIDAuthorizationFailed.Code
	}
	return b.topicAuthCode(rc, auth.OpWrite, req.Version >= 13, rt.Topic, rt.TopicID)
}

// producePartition validates and appends one partition's batches. It returns
// the partition's answer and what to wait for: the HW for acks=-1, the
// leader's flush for acks=1 under fsync durability. denied is the topic's
// authorization answer: nonzero fails the partition untouched.
func (b *Broker) producePartition(ctx context.Context, req *kmsg.ProduceRequest, rt *kmsg.ProduceRequestTopic,
	rp *kmsg.ProduceRequestTopicPartition, now int64, denied int16,
) (kmsg.ProduceResponseTopicPartition, *replica.AckWait, *replica.FlushWait) {
	sp := kmsg.NewProduceResponseTopicPartition()
	sp.Partition = rp.Partition
	if denied != 0 {
		sp.ErrorCode = denied
		return sp, nil, nil
	}
	var p *partition
	var code int16
	if req.Version >= 13 {
		p, code = b.parts.lookupByID(rt.TopicID, rp.Partition)
	} else {
		p, code = b.parts.lookup(rt.Topic, rp.Partition)
	}
	if code != 0 {
		sp.ErrorCode = code
		return sp, nil, nil
	}
	if err := b.tiering.ThrottleUploadLag(b.lifetime, tierPartition{p, b}); err != nil {
		setProduceError(b.log, &sp, err)
		return sp, nil, nil
	}
	res, logAppendTime, wait, err := b.appendProduced(ctx, p, req, rp.Records, now)
	if err != nil {
		setProduceError(b.log, &sp, err)
		return sp, nil, nil
	}
	sp.BaseOffset = res.BaseOffset
	sp.LogAppendTime = logAppendTime
	sp.LogStartOffset = p.logStartOffset()
	var flush *replica.FlushWait
	if req.Acks == 1 {
		flush = p.replica.FlushWait(res.LastOffset + 1)
	}
	return sp, wait, flush
}

// appendProduced checks the request-level and topic rules and appends as
// leader; for acks=-1 min.insync.replicas is checked against the ISR first
// (NOT_ENOUGH_REPLICAS) and the returned waiter completes when the HW
// passes the batches. Transactional batches are verified first
// (txn_verify.go), without holding any lock.
func (b *Broker) appendProduced(ctx context.Context, p *partition, req *kmsg.ProduceRequest, records []byte, now int64) (hotlog.AppendResult, int64, *replica.AckWait, error) {
	if req.Acks != 0 && req.Acks != 1 && req.Acks != -1 {
		return hotlog.AppendResult{}, -1, nil, fmt.Errorf("%w: acks %d", errInvalidAcks, req.Acks)
	}
	cfg := p.config()
	batches, err := recordbatch.SplitProduce(records, rulesFor(cfg, req.Version), now)
	if err != nil {
		return hotlog.AppendResult{}, -1, nil, err
	}
	if err := b.verifyProduceTxn(ctx, p, req.TransactionID, batches, req.Version >= 12); err != nil {
		return hotlog.AppendResult{}, -1, nil, err
	}
	res, wait, err := p.appendAsLeader(batches.Records, req.Acks == -1, int64(req.TimeoutMillis))
	if err != nil {
		return res, -1, nil, err
	}
	return res, batches.LogAppendTime, wait, nil
}

// waitAcks waits, under one deadline for the whole request, for the
// acks=all result of every pending partition: the replica answers when the
// HW passes the batches (success, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if
// the ISR shrank below min.insync.replicas), at the request timeout
// (REQUEST_TIMED_OUT; the data stays appended, as in Kafka), or when
// leadership ends (NOT_LEADER_OR_FOLLOWER).
func waitAcks(ctx context.Context, log *slog.Logger, timeoutMillis int32, resp *kmsg.ProduceResponse, pending []pendingAck) {
	if len(pending) == 0 {
		return
	}
	backstop := time.NewTimer(time.Duration(max(timeoutMillis, 0))*time.Millisecond + ackBackstop)
	defer backstop.Stop()
	for _, w := range pending {
		if err := w.wait.Await(ctx, backstop.C); err != nil {
			setProduceError(log, &resp.Topics[w.topic].Partitions[w.partition], err)
		}
	}
}

// waitFlushes waits, under one deadline for the whole request (the produce
// timeout), for the leader's flush of every acks=1 partition under fsync
// durability: REQUEST_TIMED_OUT when the deadline passes (the data stays
// appended), KAFKA_STORAGE_ERROR when the log fails.
func waitFlushes(ctx context.Context, log *slog.Logger, timeoutMillis int32, resp *kmsg.ProduceResponse, pending []pendingAck) {
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(max(timeoutMillis, 0))*time.Millisecond)
	defer cancel()
	for _, w := range pending {
		err := w.flush.Await(ctx)
		if errors.Is(err, context.DeadlineExceeded) {
			err = replication.ErrTimedOut
		}
		if err != nil {
			setProduceError(log, &resp.Topics[w.topic].Partitions[w.partition], err)
		}
	}
}

// addProduceLeaders fills, for v10+, each NOT_LEADER_OR_FOLLOWER
// partition's CurrentLeader and the leaders' endpoints (KIP-951), so the
// client retries at the right broker without a metadata round trip.
func (b *Broker) addProduceLeaders(req *kmsg.ProduceRequest, resp *kmsg.ProduceResponse, leaders *leaderEndpoints) {
	if resp.Version < 10 {
		return
	}
	for ti := range resp.Topics {
		rt := &resp.Topics[ti]
		for pi := range rt.Partitions {
			sp := &rt.Partitions[pi]
			if sp.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			var leader, epoch int32
			if req.Version >= 13 {
				leader, epoch = b.leaderHintByID(rt.TopicID, sp.Partition)
			} else {
				leader, epoch = b.leaderHintByName(rt.Topic, sp.Partition)
			}
			sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
			leaders.add(leader)
		}
	}
	resp.Brokers = leaders.produceBrokers(b)
}

// setProduceError puts err into a partition answer (code and, v8+, the
// message). Unexpected errors are logged: the client only sees a code.
func setProduceError(log *slog.Logger, sp *kmsg.ProduceResponseTopicPartition, err error) {
	if code, ok := replicationErrorCode(err); ok {
		sp.ErrorCode = code
	} else if code, ok := producerStateErrorCode(err); ok {
		sp.ErrorCode = code
	} else {
		sp.ErrorCode = produceErrorCode(err)
	}
	msg := err.Error()
	sp.ErrorMessage = &msg
	if sp.ErrorCode == kerr.UnknownServerError.Code || sp.ErrorCode == kerr.KafkaStorageError.Code {
		log.Warn("produce failed", "partition", sp.Partition, "err", err)
	}
}

// producerStateErrorCode maps the log's idempotent-producer errors.
func producerStateErrorCode(err error) (code int16, ok bool) {
	switch {
	case errors.Is(err, hotlog.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code, true
	case errors.Is(err, hotlog.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code, true
	case errors.Is(err, hotlog.ErrUnknownProducerID):
		return kerr.UnknownProducerID.Code, true
	case errors.Is(err, hotlog.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code, true
	}
	return 0, false
}
