package broker

// Wiring of the consumer-group coordinator (broker/group) into the broker:
// the coordinator.Log adapter over local partitions of __consumer_offsets
// (and __transaction_state), the creation of that topic on first use, and
// leadership hand-off.
//
// Lock order: Broker.parts.mu → group.Coordinator's lock → partitionState.mu
// and the hotlog's lock. The coordinator never calls back into the broker
// while holding its lock (topic existence is asked outside it).

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// offsetsTopicSegmentBytes is Kafka's offsets.topic.segment.bytes.
const offsetsTopicSegmentBytes = 100 << 20

// newCoordinator builds the coordinator from the broker's config.
func (b *Broker) newCoordinator() (*group.Coordinator, error) {
	cfg := b.cfg.Group
	cfg.Logger = b.log.With("component", "group")
	c, err := group.New(cfg, b.topicExists)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	c.SetTopicMetadata(b.consumerTopicMetadata)
	return c, nil
}

func (b *Broker) topicExists(name string) bool {
	_, ok := b.parts.topic(name)
	return ok
}

// offsetsLog is a local partition of __consumer_offsets as the coordinator
// sees it. Writes go through the replica's leader path, so they are
// replicated and counted toward the HW like any produce; the coordinator
// answers a commit once the HW passes it (WaitDurable).
type offsetsLog struct {
	b *Broker
	p *partition
}

var (
	_ coordinator.Log    = offsetsLog{} // of __transaction_state too
	_ group.TxnSequencer = offsetsLog{}
)

func (l offsetsLog) Append(batch []byte) (int64, error) {
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
func (l offsetsLog) NextSequence(producerID int64, epoch int16) int32 {
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

func (l offsetsLog) WaitDurable(ctx context.Context, offset int64) error {
	return l.p.waitHighWatermark(ctx, offset)
}

// Read and HighWatermark bound the coordinator's load of a partition it
// starts leading. They use the log end, not the HW, as Kafka's coordinator
// does: a new leader's HW trails the records it already holds by one fetch
// round of its followers, so loading to the HW would forget offsets
// committed just before the leader moved. Everything in the new leader's
// log stays (a leader never truncates its own log) and becomes committed
// as its followers catch up.
func (l offsetsLog) Read(offset int64, maxBytes int) ([]byte, error) {
	return l.p.log.Read(offset, maxBytes, l.p.log.LogEndOffset())
}

func (l offsetsLog) LogStartOffset() int64 { return l.p.log.LogStartOffset() }
func (l offsetsLog) HighWatermark() int64  { return l.p.log.LogEndOffset() }

// offsetsLeadershipLocked tells the coordinator which partitions of
// __consumer_offsets this node leads. Idempotent.
// REQUIRES: b.parts.mu held.
func (b *Broker) offsetsLeadershipLocked(e *topicEntry) {
	b.txnLeadershipLocked(e)
	if b.groups == nil || e.topic.Name != group.OffsetsTopic {
		return
	}
	b.groups.UsePartitionCount(int32(len(e.topic.Replicas)))
	for i, p := range e.parts {
		idx := int32(i)
		switch {
		case p != nil && p.isLeader():
			b.groups.BecomeLeader(idx, offsetsLog{b: b, p: p})
		case b.groups.Leads(idx):
			b.groups.Resign(idx)
		}
	}
}

// offsetsTopicRemovedLocked: the coordinator stops using deleted logs.
// REQUIRES: b.parts.mu held.
func (b *Broker) offsetsTopicRemovedLocked(e *topicEntry) {
	b.txnTopicRemovedLocked(e)
	if b.groups == nil {
		return
	}
	if e.topic.Name != group.OffsetsTopic {
		b.groups.TopicDeleted(e.topic.Name)
		return
	}
	for i := range e.parts {
		if b.groups.Leads(int32(i)) {
			b.groups.Resign(int32(i))
		}
	}
}

// ensureOffsetsTopic returns __consumer_offsets, creating it on first use
// (compacted, internal, offsets.topic.num.partitions partitions).
func (b *Broker) ensureOffsetsTopic(ctx context.Context) (topicView, error) {
	if t, ok := b.parts.topic(group.OffsetsTopic); ok {
		return t, nil
	}
	rf := min(int(b.cfg.OffsetsTopicReplicationFactor), len(b.liveBrks.all()))
	replicas := roundRobin(b.liveBrks.all(), 0, int(b.groups.Partitions()), rf)
	_, err := b.createTopic(ctx, metadata.CreateTopicRequest{
		Name: group.OffsetsTopic, Replicas: replicas, Internal: true,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(offsetsTopicSegmentBytes)},
	})
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return topicView{}, err
	}
	if t, ok := b.parts.topic(group.OffsetsTopic); ok {
		return t, nil
	}
	return b.loadTopicLocally(ctx, group.OffsetsTopic)
}

// coordinatorOf finds the coordinator of a group key: the leader of its
// offsets partition.
func (b *Broker) coordinatorOf(ctx context.Context, key string) (metadata.BrokerInfo, int16, string) {
	t, err := b.ensureOffsetsTopic(ctx)
	if err != nil {
		return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code, "creating " + group.OffsetsTopic + ": " + err.Error()
	}
	p := b.groups.PartitionFor(key)
	if int(p) >= len(t.states) {
		return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code,
			fmt.Sprintf("%s has %d partitions, offsets.topic.num.partitions is %d", group.OffsetsTopic, len(t.states), b.groups.Partitions())
	}
	view := b.liveBrks.view()
	if info, ok := view.find(view.leaderOf(t.states[p])); ok {
		return info, 0, ""
	}
	return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("partition %d of %s has no live leader", p, group.OffsetsTopic)
}

// clientHost is the client's address as Kafka reports it ("/ip").
func clientHost(rc *requestContext) string {
	if rc == nil || rc.conn == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(rc.conn.RemoteAddr().String())
	if err != nil {
		return ""
	}
	return "/" + host
}
