package txn

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Cluster is what the Router needs to know of the cluster. The broker
// implements it over its partition registry and live brokers.
type Cluster interface {
	// PartitionLeader is the node leading topic-partition: exists is false
	// when the topic or the partition does not exist, leader < 0 when it
	// has no live leader.
	PartitionLeader(topic string, partition int32) (leader int32, exists bool)
	// PartitionExists says whether topic-partition exists (cheaper than
	// PartitionLeader: it asks no broker liveness).
	PartitionExists(topic string, partition int32) bool
	// TopicKnown says whether this broker's metadata knows the topic.
	TopicKnown(topic string) bool
	// Coordinator is the node leading the __transaction_state partition of
	// a transactional id (creating the topic on first use), or a Kafka
	// code and message when there is none.
	Coordinator(ctx context.Context, id string) (node int32, code int16, msg string)
}

// Peer is a client of one broker (kmsg encodes requests and responses).
type Peer interface {
	Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error)
}

// Peers hands out the client of a broker, this one included. A Peer is
// shared; its owner closes it.
type Peers interface {
	Peer(node int32) (Peer, error)
}

// Router carries the coordinator's inter-broker messages: WriteTxnMarkers
// to the leader of each partition of a marker job (it is the
// Coordinator's MarkerSender), and the AddPartitionsToTxn questions a
// partition leader asks a transaction's coordinator (verification and
// implicit adds, verify.go). It answers those questions in process when
// the coordinator is on this broker.
//
// A Router holds no mutable state after Serve; its dependencies own
// theirs (Peers its clients).
type Router struct {
	node    int32
	cluster Cluster
	peers   Peers
	log     *slog.Logger
	// coord answers the questions for transactional ids whose
	// coordinator is this node. Set once by Serve, before any use.
	coord *Coordinator
}

// NewRouter returns the Router of broker node.
func NewRouter(node int32, cluster Cluster, peers Peers, log *slog.Logger) *Router {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Router{node: node, cluster: cluster, peers: peers, log: log}
}

// Serve names the coordinator of this broker, built with r as its
// MarkerSender. REQUIRES: called once, before any other method but
// SendMarkers.
func (r *Router) Serve(c *Coordinator) { r.coord = c }

var _ MarkerSender = (*Router)(nil)

// MarkerRequestTimeout bounds one WriteTxnMarkers round trip (the leader
// waits for its followers before answering).
const MarkerRequestTimeout = 30 * time.Second

// SendMarkers groups the job's partitions by leader and sends each leader
// one request. Partitions whose topic or partition no longer exists are
// done (Kafka drops them too); anything else not answered with success is
// returned for a retry.
func (r *Router) SendMarkers(ctx context.Context, job Markers, coordinatorEpoch int32) []TopicPartition {
	var retry []TopicPartition
	byLeader := map[int32][]TopicPartition{}
	for _, tp := range job.Partitions {
		leader, exists := r.cluster.PartitionLeader(tp.Topic, tp.Partition)
		switch {
		case !exists:
		case leader < 0:
			retry = append(retry, tp)
		default:
			byLeader[leader] = append(byLeader[leader], tp)
		}
	}
	for leader, tps := range byLeader {
		retry = append(retry, r.sendMarkers(ctx, leader, job, tps, coordinatorEpoch)...)
	}
	return retry
}

// sendMarkers writes the markers of tps to one leader; it returns those to
// retry.
func (r *Router) sendMarkers(ctx context.Context, leader int32, job Markers, tps []TopicPartition, coordinatorEpoch int32) []TopicPartition {
	cl, err := r.peers.Peer(leader)
	if err != nil {
		r.log.Debug("transaction markers: no client", "leader", leader, "err", err)
		return tps
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Markers = append(req.Markers, markerRequest(job, tps, coordinatorEpoch))
	rctx, cancel := context.WithTimeout(ctx, MarkerRequestTimeout)
	defer cancel()
	kresp, err := cl.Request(rctx, req)
	if err != nil {
		r.log.Debug("transaction markers: request failed", "leader", leader, "err", err)
		return tps
	}
	resp, ok := kresp.(*kmsg.WriteTxnMarkersResponse)
	if !ok {
		return tps
	}
	return markerFailures(resp, tps)
}

// markerRequest is the job's marker for tps, which are grouped by topic.
func markerRequest(job Markers, tps []TopicPartition, coordinatorEpoch int32) kmsg.WriteTxnMarkersRequestMarker {
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
	return m
}

// markerFailures returns the partitions of tps to retry: all but those
// answered with success, or with a producer epoch error (the partition
// knows a newer epoch of the producer: this marker can never be written
// and the newer epoch already ended the transaction there).
func markerFailures(resp *kmsg.WriteTxnMarkersResponse, tps []TopicPartition) []TopicPartition {
	done := map[TopicPartition]bool{}
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				switch p.ErrorCode {
				case 0, kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
					done[TopicPartition{Topic: t.Topic, Partition: p.Partition}] = true
				}
			}
		}
	}
	var retry []TopicPartition
	for _, tp := range tps {
		if !done[tp] {
			retry = append(retry, tp)
		}
	}
	return retry
}

// AddPartitions answers one transaction of an AddPartitionsToTxn request
// of the given version (the protocol edge of Coordinator.AddPartitions).
// Every partition gets its transaction's code; when some partition does
// not exist, it gets UNKNOWN_TOPIC_OR_PARTITION and the others
// OPERATION_NOT_ATTEMPTED, as in Kafka.
// REQUIRES: Serve was called.
func (r *Router) AddPartitions(version int16, rt kmsg.AddPartitionsToTxnRequestTransaction) kmsg.AddPartitionsToTxnResponseTransaction {
	var tps []TopicPartition
	for _, t := range rt.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	codes := make([]int16, len(tps))
	if unknown := r.unknownPartitions(tps); unknown != nil {
		for i := range tps {
			codes[i] = kerr.OperationNotAttempted.Code
			if unknown[i] {
				codes[i] = kerr.UnknownTopicOrPartition.Code
			}
		}
		return AddPartitionsAnswer(rt.TransactionalID, tps, codes)
	}
	top, per := r.coord.AddPartitions(AddInput{ID: rt.TransactionalID, ProducerID: rt.ProducerID,
		ProducerEpoch: rt.ProducerEpoch, Partitions: tps, VerifyOnly: rt.VerifyOnly})
	for i := range codes {
		codes[i] = FencedForVersion(top, version < 2)
		if top == 0 && i < len(per) {
			codes[i] = per[i]
		}
	}
	return AddPartitionsAnswer(rt.TransactionalID, tps, codes)
}

// unknownPartitions marks the partitions whose topic or index does not
// exist; nil when all exist.
func (r *Router) unknownPartitions(tps []TopicPartition) []bool {
	var out []bool
	for i, tp := range tps {
		if r.cluster.PartitionExists(tp.Topic, tp.Partition) {
			continue
		}
		if out == nil {
			out = make([]bool, len(tps))
		}
		out[i] = true
	}
	return out
}

// AddPartitionsAnswer is the answer of transaction id with codes[i] for
// tps[i]; tps are grouped by topic.
func AddPartitionsAnswer(id string, tps []TopicPartition, codes []int16) kmsg.AddPartitionsToTxnResponseTransaction {
	res := kmsg.NewAddPartitionsToTxnResponseTransaction()
	res.TransactionalID = id
	for i, tp := range tps {
		if n := len(res.Topics); n == 0 || res.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			t.Topic = tp.Topic
			res.Topics = append(res.Topics, t)
		}
		p := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, codes[i]
		last := &res.Topics[len(res.Topics)-1]
		last.Partitions = append(last.Partitions, p)
	}
	return res
}

// FencedForVersion: clients before KIP-588 know INVALID_PRODUCER_EPOCH,
// not PRODUCER_FENCED; old says the request's version predates it.
func FencedForVersion(code int16, old bool) int16 {
	if old && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// askPeer sends one AddPartitionsToTxn v4 question to the coordinator on
// node and returns the partition's code and a message.
func (r *Router) askPeer(ctx context.Context, node int32, rt kmsg.AddPartitionsToTxnRequestTransaction,
	topic string, partition int32,
) (int16, string) {
	cl, err := r.peers.Peer(node)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, err.Error()
	}
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	req.Transactions = append(req.Transactions, rt)
	kresp, err := cl.Request(ctx, req)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("verifying with broker %d: %v", node, err)
	}
	resp, ok := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if !ok {
		return kerr.CoordinatorNotAvailable.Code, "unexpected response type"
	}
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, "coordinator error"
	}
	for _, t := range resp.Transactions {
		if t.TransactionalID == rt.TransactionalID {
			return verifyAnswer(t, topic, partition)
		}
	}
	return kerr.CoordinatorNotAvailable.Code, "coordinator did not answer for the transaction"
}

// verifyAnswer extracts the partition's code from a transaction's answer.
func verifyAnswer(t kmsg.AddPartitionsToTxnResponseTransaction, topic string, partition int32) (int16, string) {
	for _, rt := range t.Topics {
		if rt.Topic != topic {
			continue
		}
		for _, p := range rt.Partitions {
			if p.Partition == partition {
				if p.ErrorCode == kerr.InvalidTxnState.Code {
					return p.ErrorCode, fmt.Sprintf("%s-%d is not in the ongoing transaction", topic, partition)
				}
				return p.ErrorCode, "verification answer"
			}
		}
	}
	return kerr.CoordinatorNotAvailable.Code, "coordinator did not answer for the partition"
}
