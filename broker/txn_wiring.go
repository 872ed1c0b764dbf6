package broker

// Wiring of the transaction coordinator (broker/txn) into the broker: its
// APIs, the creation of __transaction_state on first use, leadership
// hand-off (the coordinator epoch is the partition's leader epoch), and
// the marker sender (WriteTxnMarkers to each partition's leader, this
// broker included, through peer clients).
//
// Lock order: Broker.parts.mu → txn.Coordinator's lock → partitionState.mu
// and the hotlog's lock, as for groups. The marker sender takes
// txnPeers.mu alone and never holds it across a request.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication/peer"
)

// txnStateSegmentBytes is Kafka's transaction.state.log.segment.bytes.
const txnStateSegmentBytes = 100 << 20

// producerIDTimeout bounds an allocation of producer ids by the
// coordinator (a metadata round trip when the block is used up).
const producerIDTimeout = 10 * time.Second

// newTxnCoordinator builds the transaction coordinator from the config.
func (b *Broker) newTxnCoordinator() (*txn.Coordinator, error) {
	cfg := b.cfg.Txn
	cfg.Logger = b.log.With("component", "txn")
	b.txnPeers.clients = map[int32]txnPeer{}
	alloc := func() (int64, error) {
		ctx, cancel := context.WithTimeout(b.lifetime, producerIDTimeout)
		defer cancel()
		return b.pids.allocate(ctx, b.store)
	}
	c, err := txn.New(cfg, alloc, markerSender{b})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return c, nil
}

// closeTxns stops the coordinator, then its peer clients.
func (b *Broker) closeTxns() {
	b.txns.Close()
	b.txnPeers.mu.Lock()
	defer b.txnPeers.mu.Unlock()
	for id, p := range b.txnPeers.clients {
		p.cl.Close()
		delete(b.txnPeers.clients, id)
	}
}

// txnLeadershipLocked tells the coordinator which partitions of
// __transaction_state this node leads, with their leader epochs.
// REQUIRES: b.parts.mu held.
func (b *Broker) txnLeadershipLocked(e *topicEntry) {
	if b.txns == nil || e.topic.Name != txn.TopicName {
		return
	}
	b.txns.UsePartitionCount(int32(len(e.topic.Replicas)))
	for i, p := range e.parts {
		idx := int32(i)
		switch {
		case p != nil && p.isLeader():
			b.txns.BecomeLeader(idx, offsetsLog{b: b, p: p}, p.leaderEpoch())
		case b.txns.Leads(idx):
			b.txns.Resign(idx)
		}
	}
}

// txnTopicRemovedLocked: the coordinator stops using deleted logs.
// REQUIRES: b.parts.mu held.
func (b *Broker) txnTopicRemovedLocked(e *topicEntry) {
	if b.txns == nil || e.topic.Name != txn.TopicName {
		return
	}
	for i := range e.parts {
		if b.txns.Leads(int32(i)) {
			b.txns.Resign(int32(i))
		}
	}
}

// ensureTxnTopic returns __transaction_state, creating it on first use
// (compacted, internal, transaction.state.log.num.partitions partitions,
// replication factor min(offsets.topic.replication.factor, live brokers)).
func (b *Broker) ensureTxnTopic(ctx context.Context) (topicView, error) {
	if t, ok := b.parts.topic(txn.TopicName); ok {
		return t, nil
	}
	rf := min(int(b.cfg.OffsetsTopicReplicationFactor), len(b.liveBrks.all()))
	replicas := roundRobin(b.liveBrks.all(), 0, int(b.txns.Partitions()), rf)
	_, err := b.createTopic(ctx, metadata.CreateTopicRequest{
		Name: txn.TopicName, Replicas: replicas, Internal: true,
		Configs: map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(txnStateSegmentBytes)},
	})
	if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
		return topicView{}, err
	}
	if t, ok := b.parts.topic(txn.TopicName); ok {
		return t, nil
	}
	return b.loadTopicLocally(ctx, txn.TopicName)
}

// txnCoordinatorOf finds the coordinator of a transactional id: the
// leader of its __transaction_state partition.
func (b *Broker) txnCoordinatorOf(ctx context.Context, id string) (metadata.BrokerInfo, int16, string) {
	t, err := b.ensureTxnTopic(ctx)
	if err != nil {
		return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code, "creating " + txn.TopicName + ": " + err.Error()
	}
	p := b.txns.PartitionFor(id)
	if int(p) >= len(t.states) {
		return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code,
			fmt.Sprintf("%s has %d partitions, expected %d", txn.TopicName, len(t.states), b.txns.Partitions())
	}
	view := b.liveBrks.view()
	if info, ok := view.find(view.leaderOf(t.states[p])); ok {
		return info, 0, ""
	}
	return metadata.BrokerInfo{}, kerr.CoordinatorNotAvailable.Code, fmt.Sprintf("partition %d of %s has no live leader", p, txn.TopicName)
}

// txnPeer is a peer client and the address it was made for.
type txnPeer struct {
	addr string
	cl   peer.Client
}

// txnPeerSet holds the marker sender's clients, one per broker (this one
// included). Owner: mu.
type txnPeerSet struct {
	mu      sync.Mutex
	clients map[int32]txnPeer
}

// peer returns the client for node, dialling anew when its address changed.
func (s *txnPeerSet) peer(b *Broker, node int32) (peer.Client, error) {
	addr := b.peerAddress(node)
	if node == b.cfg.NodeID && b.ln != nil && b.cfg.PeerAddresses[node] == "" {
		addr = b.interBrokerBoundAddr() // ourselves: the bound inter-broker listener
	}
	if addr == "" {
		return nil, fmt.Errorf("broker: no address known for broker %d", node)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.clients[node]; ok {
		if p.addr == addr {
			return p.cl, nil
		}
		p.cl.Close()
		delete(s.clients, node)
	}
	cl, err := b.dialPeerWithOverhead(node, addr, markerAckTimeout+peer.RequestOverhead)
	if err != nil {
		return nil, err
	}
	s.clients[node] = txnPeer{addr: addr, cl: cl}
	return cl, nil
}
