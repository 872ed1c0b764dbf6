package broker

// Wiring of the follower side (package replication/follower): the broker
// hands each Ready's EpochQuery and Fetch to the follower Manager
// (replicaOutputs, replica.go) and implements the Manager's interfaces with the
// thin adapters below.

import (
	"context"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/follower"
	"github.com/strata-log/strata/replication/peer"
)

// newFollowers makes the follower Manager of b.
func newFollowers(b *Broker) *follower.Manager {
	return follower.New(follower.Config{
		NodeID:            b.cfg.NodeID,
		MaxWait:           b.cfg.ReplicaFetchMaxWait,
		RegistrationEpoch: func() int64 { return b.registration().Epoch },
		Replicas:          followerReplicas{},
		Peers:             followerPeers{b},
		ProducerSnapshots: followerSnapshots{b},
		Logger:            b.componentLog("replica-fetcher"),
	})
}

// followedPartition is a partition as the follower Manager sees it. A
// value, not a pointer: two values of the same partition are equal, so
// the Manager's tasks stay keyed by the partition itself.
type followedPartition struct{ p *partition }

var _ follower.Partition = followedPartition{}

func (f followedPartition) Topic() string             { return f.p.topic }
func (f followedPartition) TopicID() metadata.TopicID { return f.p.topicID }
func (f followedPartition) Index() int32              { return f.p.index }
func (f followedPartition) Log() follower.Log         { return f.p.log }

// followerReplicas runs the Manager's inputs through the partition's
// replica.Core.
type followerReplicas struct{}

func (followerReplicas) WithReplica(fp follower.Partition, fn func(r *replication.Replica) error) error {
	return fp.(followedPartition).p.replica.WithReplica(fn)
}

// followerPeers resolves and dials leaders for the Manager.
type followerPeers struct{ b *Broker }

func (a followerPeers) Address(node int32) string { return a.b.peers.Address(node) }

func (a followerPeers) Dial(_ int32, addr string) (peer.Client, error) {
	return a.b.peers.Dial(a.b.cfg.NodeID, addr, peer.RequestOverhead)
}

// followerSnapshots reads tiered producer state for the Manager's log
// restarts.
type followerSnapshots struct{ b *Broker }

func (a followerSnapshots) ProducerSnapshot(ctx context.Context, fp follower.Partition, offset int64) ([]byte, error) {
	return a.b.coldSrc.ProducerSnapshot(ctx, tp(fp.(followedPartition).p), offset)
}
