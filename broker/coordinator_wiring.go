package broker

// What the broker does alike for both coordinator shells (broker/group on
// __consumer_offsets, broker/txn on __transaction_state): create the
// internal topic on first use, find the node coordinating a key (the
// leader of the key's partition), hand the coordinator the partitions this
// node leads, and give it their logs (coordinatorLog).
//
// Lock order: Broker.parts.mu → the coordinator's lock → partitionState.mu
// and the hotlog's lock. The coordinators never call back into the broker
// while holding their lock (topic existence is asked outside it).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/controller"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// keyedCoordinator maps keys to the partitions of its internal topic
// (group.Coordinator, txn.Coordinator).
type keyedCoordinator interface {
	PartitionFor(key string) int32
	Partitions() int32
}

// ledCoordinator is a coordinator's side of leadership hand-off.
type ledCoordinator interface {
	UsePartitionCount(n int32)
	Leads(partition int32) bool
	Resign(partition int32)
}

// internalTopic is a coordinator's compacted internal topic.
type internalTopic struct {
	name         string
	segmentBytes int
	keys         keyedCoordinator
	// countNote introduces the expected partition count in the error of a
	// topic with another count.
	countNote string
}

// Kafka's offsets.topic.segment.bytes and
// transaction.state.log.segment.bytes.
const (
	offsetsTopicSegmentBytes = 100 << 20
	txnStateSegmentBytes     = 100 << 20
)

// offsetsTopic is __consumer_offsets, its keys mapped by groups.
func offsetsTopic(groups *group.Coordinator) internalTopic {
	return internalTopic{name: group.OffsetsTopic, segmentBytes: offsetsTopicSegmentBytes, keys: groups,
		countNote: "offsets.topic.num.partitions is"}
}

// txnStateTopic is __transaction_state, its keys mapped by txns.
func txnStateTopic(txns *txn.Coordinator) internalTopic {
	return internalTopic{name: txn.TopicName, segmentBytes: txnStateSegmentBytes, keys: txns, countNote: "expected"}
}

// ensureInternalTopic returns the topic, creating it on first use
// (compacted, internal, the coordinator's partition count, replication
// factor min(offsets.topic.replication.factor, live brokers)).
func (b *Broker) ensureInternalTopic(ctx context.Context, it internalTopic) (topicView, error) {
	if t, ok := b.parts.topic(it.name); ok {
		return t, nil
	}
	rf := min(int(b.cfg.OffsetsTopicReplicationFactor), len(b.liveBrks.all()))
	replicas := controller.Assign(b.liveBrks.all(), 0, int(it.keys.Partitions()), rf)
	_, _, err := b.createTopic(ctx, metadata.CreateTopicRequest{
		Name: it.name, Replicas: replicas, Internal: true,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(it.segmentBytes)},
	}, leaderElectionWait)
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return topicView{}, err
	}
	if t, ok := b.parts.topic(it.name); ok {
		return t, nil
	}
	return b.loadTopicLocally(ctx, it.name)
}

// coordinatorOf finds the coordinator of a key: the leader of its
// partition of the internal topic, which is created on first use.
func (b *Broker) coordinatorOf(ctx context.Context, it internalTopic, key string) (metadata.BrokerInfo, int16, string) {
	t, err := b.ensureInternalTopic(ctx, it)
	if err != nil {
		return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code, "creating " + it.name + ": " + err.Error()
	}
	p := it.keys.PartitionFor(key)
	if int(p) >= len(t.states) {
		return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code,
			fmt.Sprintf("%s has %d partitions, %s %d", it.name, len(t.states), it.countNote, it.keys.Partitions())
	}
	view := b.liveBrks.view()
	if info, ok := view.find(view.leaderOf(t.states[p])); ok {
		return info, 0, ""
	}
	return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("partition %d of %s has no live leader", p, it.name)
}

// offsetsLeadershipLocked tells the coordinator of e (when e is
// __consumer_offsets or __transaction_state) which of its partitions this
// node leads; the transaction coordinator's epoch of a partition is its
// leader epoch. Idempotent.
// REQUIRES: b.parts.mu held.
func (b *Broker) offsetsLeadershipLocked(e *topicEntry) {
	switch {
	case b.txns != nil && e.topic.Name == txn.TopicName:
		handOffLocked(b.txns, e, func(index int32, p *partition) {
			b.txns.BecomeLeader(index, coordinatorLog{b: b, p: p}, p.leaderEpoch())
		})
	case b.groups != nil && e.topic.Name == group.OffsetsTopic:
		handOffLocked(b.groups, e, func(index int32, p *partition) {
			b.groups.BecomeLeader(index, coordinatorLog{b: b, p: p})
		})
	}
}

// offsetsTopicRemovedLocked: the coordinators stop using deleted logs, and
// the group coordinator forgets the offsets of any other deleted topic.
// REQUIRES: b.parts.mu held.
func (b *Broker) offsetsTopicRemovedLocked(e *topicEntry) {
	if b.txns != nil && e.topic.Name == txn.TopicName {
		resignAllLocked(b.txns, e)
	}
	switch {
	case b.groups == nil:
	case e.topic.Name == group.OffsetsTopic:
		resignAllLocked(b.groups, e)
	default:
		b.groups.TopicDeleted(e.topic.Name)
	}
}

// handOffLocked gives c the partitions of e this node leads (lead) and
// takes back those it no longer leads.
// REQUIRES: b.parts.mu held.
func handOffLocked(c ledCoordinator, e *topicEntry, lead func(index int32, p *partition)) {
	c.UsePartitionCount(int32(len(e.topic.Replicas)))
	for i, p := range e.parts {
		index := int32(i)
		switch {
		case p != nil && p.isLeader():
			lead(index, p)
		case c.Leads(index):
			c.Resign(index)
		}
	}
}

// resignAllLocked takes back every partition of a deleted topic.
// REQUIRES: b.parts.mu held.
func resignAllLocked(c ledCoordinator, e *topicEntry) {
	for i := range e.parts {
		if c.Leads(int32(i)) {
			c.Resign(int32(i))
		}
	}
}

// coordinatorLog is a local partition of __consumer_offsets or
// __transaction_state as its coordinator sees it. Writes go through the
// replica's leader path, so they are replicated and counted toward the HW
// like any produce; the coordinator answers once the HW passes them
// (WaitDurable).
type coordinatorLog struct {
	b *Broker
	p *partition
}

var (
	_ coordinator.Log    = coordinatorLog{}
	_ group.TxnSequencer = coordinatorLog{}
)

func (l coordinatorLog) Append(batch []byte) (int64, error) {
	if !l.p.isLeader() {
		return 0, coordinator.ErrNotLed
	}
	res, err := l.p.appendLeader(batch)
	if err != nil {
		if _, ok := replicationErrorCode(err); ok {
			return 0, fmt.Errorf("%w: %v", coordinator.ErrNotLed, err)
		}
		if errors.Is(err, hotlog.ErrInvalidProducerEpoch) {
			return 0, fmt.Errorf("%w: %v", group.ErrFenced, err)
		}
		return 0, err
	}
	return res.BaseOffset, nil
}

// NextSequence is the first sequence of the producer's next transactional
// batch (TxnOffsetCommit): the partition checks sequences of every
// producer batch, and only the group coordinator writes transactional
// batches to __consumer_offsets, under its lock, so the last one the log
// remembers is the one to follow. A new epoch starts at 0.
func (l coordinatorLog) NextSequence(producerID int64, epoch int16) int32 {
	for _, ps := range l.p.log.Producers() {
		if ps.ProducerID == producerID && ps.ProducerEpoch == epoch && ps.LastSequence >= 0 {
			if ps.LastSequence == math.MaxInt32 {
				return 0
			}
			return ps.LastSequence + 1
		}
	}
	return 0
}

func (l coordinatorLog) WaitDurable(ctx context.Context, offset int64) error {
	return l.p.waitHighWatermark(ctx, offset)
}

// Read and HighWatermark bound the coordinator's load of a partition it
// starts leading. They use the log end, not the HW, as Kafka's coordinator
// does: a new leader's HW trails the records it already holds by one fetch
// round of its followers, so loading to the HW would forget offsets
// committed just before the leader moved. Everything in the new leader's
// log stays (a leader never truncates its own log) and becomes committed
// as its followers catch up.
func (l coordinatorLog) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.p.log.Read(offset, maxBytes, l.p.log.LogEndOffset())
}

func (l coordinatorLog) LogStartOffset() int64 { return l.p.log.LogStartOffset() }
func (l coordinatorLog) HighWatermark() int64  { return l.p.log.LogEndOffset() }
