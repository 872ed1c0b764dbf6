package replication

import (
	"errors"
	"fmt"
)

// Sentinel errors. The shell translates them to Kafka error codes at the
// protocol edge (the code each maps to is noted beside it).
var (
	ErrInvalidConfig = errors.New("replication: invalid config")
	// ErrNotLeader: the input needs the leader role. NOT_LEADER_OR_FOLLOWER.
	ErrNotLeader = errors.New("replication: not the leader")
	// ErrNotFollower: the input needs the follower role. NOT_LEADER_OR_FOLLOWER.
	ErrNotFollower = errors.New("replication: not a follower")
	// ErrStaleEpoch: the input carries an older leader epoch than this
	// replica knows. FENCED_LEADER_EPOCH.
	ErrStaleEpoch = errors.New("replication: stale leader epoch")
	// ErrUnknownEpoch: the input carries a newer leader epoch than this
	// replica knows (its metadata lags). UNKNOWN_LEADER_EPOCH.
	ErrUnknownEpoch = errors.New("replication: unknown (newer) leader epoch")
	// ErrUnknownReplica: a fetch from a broker that is not in the replica
	// set. NOT_LEADER_OR_FOLLOWER, as Kafka.
	ErrUnknownReplica = errors.New("replication: replica not assigned")
	// ErrOffsetOutOfRange: a follower fetch offset outside [0, leader LEO].
	// OFFSET_OUT_OF_RANGE.
	ErrOffsetOutOfRange = errors.New("replication: offset out of range")
	// ErrInvalidOffset: an offset input that contradicts the machine's
	// state (a shrinking LEO, a negative offset). A shell bug; never a
	// client-visible code.
	ErrInvalidOffset = errors.New("replication: invalid offset")
	// ErrInvalidState: a controller state that cannot be right (self not
	// in the replicas, ISR not a subset of the replicas, duplicates).
	ErrInvalidState = errors.New("replication: invalid partition state")
	// ErrNoProposal: an ISR CAS result arrived with no proposal in flight
	// (a newer controller state already resolved it). Ignore it.
	ErrNoProposal = errors.New("replication: no ISR proposal in flight")
	// ErrUnexpectedAnswer: an OffsetForLeaderEpoch answer for a query that
	// is not outstanding (stale, or the epoch changed). Ignore it.
	ErrUnexpectedAnswer = errors.New("replication: unexpected epoch answer")
	// ErrInvalidAnswer: an OffsetForLeaderEpoch answer that breaks the
	// protocol (an epoch above the one asked for).
	ErrInvalidAnswer = errors.New("replication: invalid epoch answer")
	// ErrStaleFetch: a fetch response for a fetch position that is no longer
	// current (the follower truncated or the epoch moved). Drop its records.
	ErrStaleFetch = errors.New("replication: stale fetch response")
	// ErrNotEnoughReplicas: acks=all refused before appending because the
	// ISR is smaller than min.insync.replicas. NOT_ENOUGH_REPLICAS.
	ErrNotEnoughReplicas = errors.New("replication: not enough in-sync replicas")
	// ErrNotEnoughReplicasAfterAppend: the HW passed an acks=all batch but
	// the ISR had shrunk below min.insync.replicas.
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND.
	ErrNotEnoughReplicasAfterAppend = errors.New("replication: not enough in-sync replicas after append")
	// ErrTimedOut: an acks=all waiter's timeout passed. REQUEST_TIMED_OUT.
	ErrTimedOut = errors.New("replication: acks=all timed out")
	// ErrTooManyWaiters: Config.MaxAckWaiters acks=all waiters are pending.
	// REQUEST_TIMED_OUT (retriable) at the edge.
	ErrTooManyWaiters = errors.New("replication: too many acks=all waiters")
)

// MaxReplicas bounds the replica set accepted from the controller, so a
// corrupt partition state cannot make the machine allocate without bound.
const MaxReplicas = 256

// Config configures one partition replica's state machine. Zero values get
// the defaults noted; Validate rejects nonsense.
type Config struct {
	// ReplicaID is this broker's node id. Must be >= 0.
	ReplicaID int32
	// ReplicaLagTimeMaxMs is replica.lag.time.max.ms: a follower in the ISR
	// that has not caught up to the leader's LEO for longer than this is
	// proposed for removal. Logical milliseconds (see Tick). Default 30000.
	ReplicaLagTimeMaxMs int64
	// MinInsyncReplicas is min.insync.replicas for acks=all. Default 1.
	// Changeable later with SetMinInsyncReplicas.
	MinInsyncReplicas int
	// FsyncDurability is true with --durability=fsync: the leader's own
	// contribution to the HW is the offset reported by Flushed, not the LEO
	// reported by Append. With false (--durability=replication) Append
	// moves both.
	FsyncDurability bool
	// MaxAckWaiters bounds the acks=all waiters held at once. Default 65536.
	MaxAckWaiters int
}

// DefaultReplicaLagTimeMaxMs is Kafka's default replica.lag.time.max.ms.
const DefaultReplicaLagTimeMaxMs = 30_000

func (c Config) withDefaults() Config {
	if c.ReplicaLagTimeMaxMs == 0 {
		c.ReplicaLagTimeMaxMs = DefaultReplicaLagTimeMaxMs
	}
	if c.MinInsyncReplicas == 0 {
		c.MinInsyncReplicas = 1
	}
	if c.MaxAckWaiters == 0 {
		c.MaxAckWaiters = 1 << 16
	}
	return c
}

// Validate checks the config after defaults are applied.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.ReplicaID < 0:
		return fmt.Errorf("%w: replica id %d < 0", ErrInvalidConfig, c.ReplicaID)
	case c.ReplicaLagTimeMaxMs < 0:
		return fmt.Errorf("%w: replica.lag.time.max.ms %d < 0", ErrInvalidConfig, c.ReplicaLagTimeMaxMs)
	case c.MinInsyncReplicas < 1 || c.MinInsyncReplicas > MaxReplicas:
		return fmt.Errorf("%w: min.insync.replicas %d not in [1, %d]", ErrInvalidConfig, c.MinInsyncReplicas, MaxReplicas)
	case c.MaxAckWaiters < 0:
		return fmt.Errorf("%w: max ack waiters %d < 0", ErrInvalidConfig, c.MaxAckWaiters)
	}
	return nil
}
