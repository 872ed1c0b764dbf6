package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/txn"
)

// markerSender implements txn.MarkerSender: WriteTxnMarkers (API 27) to
// the leader of each partition, through the peer clients.
type markerSender struct{ b *Broker }

// markerRequestTimeout bounds one WriteTxnMarkers round trip (the leader
// waits for its followers before answering).
const markerRequestTimeout = 30 * time.Second

// SendMarkers groups the job's partitions by leader and sends each leader
// one request. Partitions whose topic or partition no longer exists are
// done (Kafka drops them too); anything else not answered with success is
// returned for a retry.
func (s markerSender) SendMarkers(ctx context.Context, job txn.Markers, coordinatorEpoch int32) []txn.TopicPartition {
	var retry []txn.TopicPartition
	byLeader := map[int32][]txn.TopicPartition{}
	view := s.b.liveBrks.view()
	for _, tp := range job.Partitions {
		t, ok := s.b.parts.topic(tp.Topic)
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.states) {
			continue
		}
		leader := view.leaderOf(t.states[tp.Partition])
		if leader < 0 {
			retry = append(retry, tp)
			continue
		}
		byLeader[leader] = append(byLeader[leader], tp)
	}
	for leader, tps := range byLeader {
		retry = append(retry, s.send(ctx, leader, job, tps, coordinatorEpoch)...)
	}
	return retry
}

// send writes the markers of tps to one leader; it returns those to retry.
func (s markerSender) send(ctx context.Context, leader int32, job txn.Markers, tps []txn.TopicPartition, coordinatorEpoch int32) []txn.TopicPartition {
	cl, err := s.b.txnPeers.peer(s.b, leader)
	if err != nil {
		s.b.log.Debug("transaction markers: no client", "leader", leader, "err", err)
		return tps
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = job.ProducerID, job.ProducerEpoch, job.Commit, coordinatorEpoch
	for _, tp := range tps {
		if n := len(m.Topics); n == 0 || m.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			m.Topics = append(m.Topics, t)
		}
		last := &m.Topics[len(m.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	req.Markers = append(req.Markers, m)
	rctx, cancel := context.WithTimeout(ctx, markerRequestTimeout)
	defer cancel()
	kresp, err := cl.Request(rctx, req)
	if err != nil {
		s.b.log.Debug("transaction markers: request failed", "leader", leader, "err", err)
		return tps
	}
	return markerFailures(kresp.(*kmsg.WriteTxnMarkersResponse), tps)
}

// markerFailures returns the partitions of tps to retry: all but those
// answered with success, or with a producer epoch error (the partition
// knows a newer epoch of the producer: this marker can never be written
// and the newer epoch already ended the transaction there).
func markerFailures(resp *kmsg.WriteTxnMarkersResponse, tps []txn.TopicPartition) []txn.TopicPartition {
	done := map[txn.TopicPartition]bool{}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				switch p.ErrorCode {
				case 0, kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
					done[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = true
				}
			}
		}
	}
	var retry []txn.TopicPartition
	for _, tp := range tps {
		if !done[tp] {
			retry = append(retry, tp)
		}
	}
	return retry
}
