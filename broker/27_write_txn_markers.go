package broker

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/auth"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/replication/replica"
)

// WriteTxnMarkers: v0-1. The transaction coordinator (broker/txn, on any
// broker, this one included) sends it to each partition leader to end a
// transaction there.
//
// Behaviour:
//   - For each marker and each named partition this broker leads, one
//     control batch is appended as leader (hotlog.MarkerBatch: attributes
//     control + transactional, the producer's id and epoch, base sequence
//     -1, one record: ControlRecordKey abort/commit, EndTxnMarker with the
//     coordinator epoch), with acks=all semantics: min.insync.replicas is
//     checked first (NOT_ENOUGH_REPLICAS) and the answer waits until the HW
//     passes the marker, at most markerAckTimeout (REQUEST_TIMED_OUT; the
//     marker stays appended and the coordinator retries: a repeated marker
//     is harmless).
//   - Per-partition codes as Produce: UNKNOWN_TOPIC_OR_PARTITION,
//     NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH (marker epoch older
//     than the partition's), TRANSACTION_COORDINATOR_FENCED (coordinator
//     epoch older than the producer's last marker's), KAFKA_STORAGE_ERROR.
//   - Once a marker on a __consumer_offsets partition is replicated, the
//     group coordinator applies (commit) or drops (abort) the producer's
//     pending transactional offset commits (group.Coordinator.CompleteTxn).
//   - The request is inter-broker: with the authorizer on it needs
//     ClusterAction on the Cluster (every partition
//     CLUSTER_AUTHORIZATION_FAILED otherwise), which only brokers hold;
//     without it, as Kafka without ACLs, any client may send it.

// markerAckTimeout bounds the wait for a marker's replication (Kafka uses
// request.timeout.ms, 30 s, for the same append).
const markerAckTimeout = 30 * time.Second

// markerSlot is one appended partition of the response waiting for its HW.
type markerSlot struct {
	sp        *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
	wait      *replica.AckWait
	p         *partition
	offsets   bool // a __consumer_offsets partition: tell the group coordinator
	producer  int64
	committed bool
}

func (b *Broker) handleWriteTxnMarkers(ctx context.Context, rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	allowed := b.authz.allowedCluster(rc, auth.OpClusterAction)
	now := time.Now().UnixMilli()
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	var slots []markerSlot
	for mi := range req.Markers {
		m := &req.Markers[mi]
		rm := &resp.Markers[mi]
		*rm = kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		rm.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(m.Topics))
		for ti := range m.Topics {
			rt := &rm.Topics[ti]
			*rt = kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = m.Topics[ti].Topic
			rt.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(m.Topics[ti].Partitions))
			for pi, index := range m.Topics[ti].Partitions {
				sp := &rt.Partitions[pi]
				*sp = kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition = index
				if !allowed {
					sp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				} else if slot, ok := b.writeMarker(m, rt.Topic, sp, now); ok {
					slots = append(slots, slot)
				}
			}
		}
	}
	// Every marker is appended: the connection's next request may start
	// while these wait for their HW.
	rc.releaseOrder()
	b.awaitMarkers(ctx, slots)
	return resp, nil
}

// writeMarker appends one marker to one partition; ok says it was appended
// and slot waits for its replication. Failures are written into sp.
func (b *Broker) writeMarker(m *kmsg.WriteTxnMarkersRequestMarker, topic string,
	sp *kmsg.WriteTxnMarkersResponseMarkerTopicPartition, now int64,
) (markerSlot, bool) {
	p, code := b.parts.lookup(topic, sp.Partition)
	if code != 0 {
		sp.ErrorCode = code
		return markerSlot{}, false
	}
	batch := hotlog.MarkerBatch(m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, now)
	_, wait, err := p.appendAsLeader(batch, true, markerAckTimeout.Milliseconds())
	if err != nil {
		sp.ErrorCode = markerErrorCode(b.log, topic, sp.Partition, err)
		return markerSlot{}, false
	}
	return markerSlot{sp: sp, wait: wait, p: p, offsets: topic == group.OffsetsTopic,
		producer: m.ProducerID, committed: m.Committed}, true
}

// awaitMarkers waits, under one deadline, for every appended marker to be
// replicated, then notifies the group coordinator of completed offsets
// transactions.
func (b *Broker) awaitMarkers(ctx context.Context, slots []markerSlot) {
	if len(slots) == 0 {
		return
	}
	backstop := time.NewTimer(markerAckTimeout + ackBackstop)
	defer backstop.Stop()
	for _, s := range slots {
		if err := s.wait.Await(ctx, backstop.C); err != nil {
			s.sp.ErrorCode = markerErrorCode(b.log, "", s.sp.Partition, err)
			continue
		}
		if s.offsets && b.groups != nil {
			b.groups.CompleteTxn(s.p.index, s.producer, s.committed)
		}
	}
}

// markerErrorCode maps an append or wait failure as Produce does, and logs
// the failures no retry is expected to cure.
func markerErrorCode(log *slog.Logger, topic string, partition int32, err error) int16 {
	code, ok := replicationErrorCode(err)
	if !ok {
		code, ok = producerStateErrorCode(err)
	}
	if !ok {
		code = produceErrorCode(err)
	}
	if code == kerr.UnknownServerError.Code || code == kerr.KafkaStorageError.Code {
		log.Warn("transaction marker not written", "topic", topic, "partition", partition, "err", err)
	}
	return code
}
