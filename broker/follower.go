package broker

// Wiring of the follower side (package replication/follower): the broker
// hands each Ready's EpochQuery and Fetch to the follower Manager
// (replicaOutputs, replica.go) and implements the Manager's interfaces with the
// thin adapters below.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
		Logger:            b.log,
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
	return a.b.tieredProducerSnapshot(ctx, fp.(followedPartition).p, offset)
}

// snapshotReadTimeout bounds the bucket read of a producer snapshot; on
// timeout a log restart goes ahead with empty state rather than stall the
// follower or the leader election.
const snapshotReadTimeout = 10 * time.Second

// errNoTieredSnapshot: no tiered producer state at the reset offset.
var errNoTieredSnapshot = errors.New("broker: no tiered producer snapshot at the reset offset")

// tieredProducerSnapshot returns the producer state as of offset from the
// producer-snapshot section of p's tiered object whose end (LastOffset+1)
// is exactly offset, read through the cold reader (its index read includes
// the section, checked by tier.DecodeIndexSections). Errors wrap
// errNoTieredSnapshot or say why the read failed. Why only an exact end
// will do: replication/follower/restart.go.
func (b *Broker) tieredProducerSnapshot(ctx context.Context, p *partition, offset int64) ([]byte, error) {
	if b.cold == nil {
		return nil, fmt.Errorf("%w: tiering is off", errNoTieredSnapshot)
	}
	e, ok := p.manifest.Find(p.topicID, p.index, offset-1)
	if !ok || e.LastOffset+1 != offset {
		return nil, fmt.Errorf("%w: no manifest entry ends at %d", errNoTieredSnapshot, offset)
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotReadTimeout)
	defer cancel()
	x, err := b.cold.Index(ctx, coldObject(e))
	if err != nil {
		return nil, fmt.Errorf("reading the index of %s: %w", e.Key, err)
	}
	if at, ok := x.ProducerSnapshotOffset(); !ok || at != offset {
		return nil, fmt.Errorf("%w: object %s carries none", errNoTieredSnapshot, e.Key)
	}
	return x.ProducerSnapshot, nil
}

// restartSnapshot is follower.RestartSnapshot for p, read through read
// (Broker.tieredProducerSnapshot or a test seam; nil: none).
func restartSnapshot(ctx context.Context, log *slog.Logger, read func(context.Context, *partition, int64) ([]byte, error),
	p *partition, start int64, why string) []byte {
	var readAt func(context.Context, int64) ([]byte, error)
	if read != nil {
		readAt = func(ctx context.Context, offset int64) ([]byte, error) { return read(ctx, p, offset) }
	}
	return follower.RestartSnapshot(ctx, log, readAt, p.topic, p.index, start, why)
}

// restartLog is follower.RestartLog for p's log.
// REQUIRES: p's replica mutex (no append or truncation interleaves).
func restartLog(log *slog.Logger, p *partition, start int64, snap []byte, why string) error {
	return follower.RestartLog(log, p.log, p.topic, p.index, start, snap, why)
}
