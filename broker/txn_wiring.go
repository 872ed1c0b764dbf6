package broker

// The transaction coordinator (broker/txn) in the broker: its APIs, its
// construction, and the cluster view and peer clients of its router
// (txn.Router: WriteTxnMarkers to each partition's leader, this broker
// included, and verification questions to other coordinators). What it
// shares with the group coordinator (its internal topic, leadership
// hand-off, the log adapter) is in coordinator_wiring.go.
//
// The router's peer set takes txnPeers.mu alone and never holds it across
// a request.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/replication/peer"
)

// producerIDTimeout bounds an allocation of producer ids by the
// coordinator (a metadata round trip when the block is used up).
const producerIDTimeout = 10 * time.Second

// newTxnCoordinator builds the transaction coordinator from the config,
// and the router of its inter-broker messages.
func (b *Broker) newTxnCoordinator() (*txn.Coordinator, *txn.Router, error) {
	cfg := b.cfg.Txn
	cfg.Logger = b.componentLog("txn")
	b.txnPeers.clients = map[int32]txnPeer{}
	alloc := func() (int64, error) {
		ctx, cancel := context.WithTimeout(b.lifetime, producerIDTimeout)
		defer cancel()
		return b.pids.Allocate(ctx)
	}
	router := txn.NewRouter(b.cfg.NodeID, coordinatorCluster{b}, txnPeerDialer{b}, cfg.Logger)
	c, err := txn.New(cfg, alloc, router)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	router.Serve(c)
	return c, router, nil
}

// closeTxns stops the coordinator, then its peer clients.
func (b *Broker) closeTxns() {
	b.txns.Close()
	b.txnPeers.closeAll()
}

// coordinatorCluster is the cluster as the coordinators see it (the
// transaction router's txn.Cluster; the group coordinator asks TopicKnown).
type coordinatorCluster struct{ b *Broker }

var _ txn.Cluster = coordinatorCluster{}

func (c coordinatorCluster) PartitionLeader(topic string, partition int32) (int32, bool) {
	t, ok := c.b.parts.topic(topic)
	if !ok || partition < 0 || int(partition) >= len(t.states) {
		return -1, false
	}
	return c.b.liveBrks.view().leaderOf(t.states[partition]), true
}

func (c coordinatorCluster) PartitionExists(topic string, partition int32) bool {
	t, ok := c.b.parts.topic(topic)
	return ok && partition >= 0 && int(partition) < len(t.states)
}

func (c coordinatorCluster) TopicKnown(topic string) bool {
	_, ok := c.b.parts.topic(topic)
	return ok
}

func (c coordinatorCluster) Coordinator(ctx context.Context, id string) (int32, int16, string) {
	info, code, msg := c.b.coordinatorOf(ctx, txnStateTopic(c.b.txns), id)
	return info.NodeID, code, msg
}

// txnPeerDialer hands the router the broker's marker clients.
type txnPeerDialer struct{ b *Broker }

func (d txnPeerDialer) Peer(node int32) (txn.Peer, error) { return d.b.txnPeers.peer(d.b, node) }

// txnPeer is a peer client and the address it was made for.
type txnPeer struct {
	addr string
	cl   peer.Client
}

// txnPeerSet holds the transaction router's clients, one per broker
// (this one included). Owner: mu.
type txnPeerSet struct {
	mu      sync.Mutex
	clients map[int32]txnPeer
}

// peer returns the client for node, dialling anew when its address changed.
func (s *txnPeerSet) peer(b *Broker, node int32) (peer.Client, error) {
	addr := b.peers.Address(node)
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
	cl, err := b.peers.Dial(node, addr, markerAckTimeout+peer.RequestOverhead)
	if err != nil {
		return nil, err
	}
	s.clients[node] = txnPeer{addr: addr, cl: cl}
	return cl, nil
}

// closeAll closes every client.
func (s *txnPeerSet) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, p := range s.clients {
		p.cl.Close()
		delete(s.clients, id)
	}
}
