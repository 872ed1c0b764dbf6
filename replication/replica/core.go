package replica

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

// ErrClosed: the partition's replica was retired (its log closed or
// removed); inputs are refused.
var ErrClosed = errors.New("replica: partition closed")

// Log is the part of a partition's hotlog.Log the shell reads and
// truncates; the machine reads its epochs.
type Log interface {
	replication.LocalEpochs
	LogEndOffset() int64
	FlushedOffset() int64
	// WaitFlushed returns once FlushedOffset() > offset, ctx ends, or the
	// log fails or closes (its error).
	WaitFlushed(ctx context.Context, offset int64) error
	// Changed is closed at the next append or flush.
	Changed() <-chan struct{}
	Truncate(offset int64) error
}

// Outputs takes the outputs of one partition's Ready that reach beyond
// the shell. Called under the Core's applyMu (see doc.go); none may block
// on the consumer's locks that come before it.
type Outputs interface {
	// Follow starts (or moves) fetching from fs.Leader at fs.Offset.
	Follow(fs replication.FetchStart)
	// Query asks q.Leader for the end offset of q.Epoch (truncation).
	Query(q replication.EpochQuery)
	// StopFollowing stops fetching and querying (no-op when not).
	StopFollowing()
	// LeadershipChanged: the replica started or stopped leading.
	LeadershipChanged()
}

// Partition names the partition a Core replicates (for logs and the ISR
// compare-and-swap).
type Partition struct {
	Topic   string
	TopicID metadata.TopicID
	Index   int32
}

// Applied is what a Core knows of its partition state in etcd.
type Applied struct {
	// Led is the partition state the replica leads with, updated by
	// accepted BecomeLeader inputs and committed ISR changes: the base of
	// the next ISR compare-and-swap.
	Led metadata.PartitionState
	// Version is the newest partition-state version applied (or written
	// by this leader); older states are stale and ignored.
	Version int64
}

// Core is one partition's replication state machine and what the shell
// publishes from it. See doc.go for the locking.
type Core struct {
	shell *Shell // read-only
	part  Partition
	log   Log
	out   Outputs

	applyMu sync.Mutex
	retired bool // guarded by applyMu: the partition closed; inputs are refused
	// fetching is true from a carried-out EpochQuery or Fetch until the
	// consumer is told to stop following (guarded by applyMu), so a
	// leader's hot path never calls StopFollowing.
	fetching bool

	mu      sync.Mutex
	r       *replication.Replica // guarded by mu
	applied Applied              // guarded by mu

	// Published after each WithReplica; read lock-free.
	hw    atomic.Int64
	role  atomic.Int32 // replication.Role
	epoch atomic.Int32
	// reportedLEO and reportedFlushed are the local log positions last
	// reported to a leading replica (Append/Flushed), so the log watcher
	// can skip taking the locks when nothing moved.
	reportedLEO, reportedFlushed atomic.Int64
	// behind is the tick's note of a report the watcher still owed (see
	// reportMissedProgressLocked). Guarded by mu.
	behind owedReport

	hwChanged signal
	// leading has a pending token after the replica became leader: the log
	// watcher skips changes while the published role is not leader, so a
	// change in between (after the new leader's own report, before the
	// role is published) would wait for the next one. Capacity 1.
	leading chan struct{}
	// stop is closed when the partition closes; it ends its log watcher.
	stop     chan struct{}
	stopOnce sync.Once
}

// New builds a partition's state machine (RoleNone: nobody leads until a
// state says so). minInsync is the topic's min.insync.replicas (MinInsync).
func (s *Shell) New(part Partition, l Log, minInsync int, out Outputs) (*Core, error) {
	r, err := replication.New(replication.Config{
		ReplicaID:           s.cfg.ReplicaID,
		ReplicaLagTimeMaxMs: max(s.cfg.LagTimeMax.Milliseconds(), 1),
		MinInsyncReplicas:   minInsync,
		FsyncDurability:     s.cfg.Fsync,
	}, l)
	if err != nil {
		return nil, err
	}
	c := &Core{shell: s, part: part, log: l, out: out, r: r, stop: make(chan struct{}), leading: make(chan struct{}, 1)}
	c.behind.mark = -1
	c.role.Store(int32(replication.RoleNone))
	c.epoch.Store(-1)
	c.reportedLEO.Store(-1)
	c.reportedFlushed.Store(-1)
	return c, nil
}

// WithReplica runs fn on the replica, then carries out the Ready it left,
// in the order replication/doc.go prescribes, and publishes the HW, role
// and epoch. fn's error is returned (the replica's outputs are carried out
// either way). ErrClosed once the partition was retired.
func (c *Core) WithReplica(fn func(r *replication.Replica) error) error {
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	if c.retired {
		return ErrClosed
	}
	c.mu.Lock()
	wasLeader := c.r.Role() == replication.RoleLeader
	err := fn(c.r)
	var rd replication.Ready
	hasReady := c.r.HasReady()
	if hasReady {
		rd = c.r.Ready()
		c.r.Advance(rd)
	}
	role, epoch := c.r.Role(), c.r.LeaderEpoch()
	following := role == replication.RoleFollower && c.r.Status().Leader >= 0
	base := c.applied.Led
	c.mu.Unlock()
	c.role.Store(int32(role))
	c.epoch.Store(epoch)
	if hasReady {
		c.carryOut(rd, base)
	}
	if c.fetching && !following {
		c.fetching = false
		c.out.StopFollowing()
	}
	if wasLeader != (role == replication.RoleLeader) {
		if !wasLeader {
			select {
			case c.leading <- struct{}{}:
			default: // a token is pending already
			}
		}
		c.out.LeadershipChanged()
	}
	return err
}

// carryOut applies one Ready in doc order. base is the state the replica
// leads with (for the proposal's CAS).
// REQUIRES: c.applyMu held.
func (c *Core) carryOut(rd replication.Ready, base metadata.PartitionState) {
	log := c.shell.cfg.Logger
	if rd.HighWatermarkChanged {
		c.hw.Store(max(rd.HighWatermark, 0))
		c.hwChanged.broadcast()
	}
	if rd.Proposal != nil {
		c.proposeISR(*rd.Proposal, base)
	}
	c.shell.acks.complete(rd.Acks)
	if rd.Fenced {
		log.Warn("ISR change rejected: deposed as leader", "topic", c.part.Topic, "partition", c.part.Index)
	}
	if rd.Truncate != nil {
		c.truncateFollower(rd.Truncate.Offset)
	}
	if rd.EpochQuery != nil {
		c.fetching = true
		c.out.Query(*rd.EpochQuery)
	}
	if rd.Fetch != nil {
		c.fetching = true
		c.out.Follow(*rd.Fetch)
	}
}

// truncateFollower drops the log from offset on (KIP-101). A failure
// fences the log (sticky, hotlog); it is logged, and the follower's next
// append fails until the log is reopened.
func (c *Core) truncateFollower(offset int64) {
	log := c.shell.cfg.Logger
	before := c.log.LogEndOffset()
	if err := c.log.Truncate(offset); err != nil {
		log.Error("follower truncation failed", "topic", c.part.Topic, "partition", c.part.Index, "offset", offset, "err", err)
		return
	}
	log.Info("follower truncated", "topic", c.part.Topic, "partition", c.part.Index, "offset", offset, "leo_before", before)
}

// Status is a snapshot of the replica (for Metadata and status).
func (c *Core) Status() replication.Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Status()
}

// IsLeader reports whether the replica leads now (published value).
func (c *Core) IsLeader() bool {
	return replication.Role(c.role.Load()) == replication.RoleLeader
}

// HighWatermark is the published HW (0 before any).
func (c *Core) HighWatermark() int64 { return c.hw.Load() }

// Epoch is the published leader epoch (-1 before the first role).
func (c *Core) Epoch() int32 { return c.epoch.Load() }

// HWChanged is closed at the next change of the published HW.
func (c *Core) HWChanged() <-chan struct{} { return c.hwChanged.wait() }

// Reported is the log positions last reported to the leading replica
// (-1: none yet).
func (c *Core) Reported() (leo, flushed int64) { return c.reportedLEO.Load(), c.reportedFlushed.Load() }

// AppliedLocked is the partition state bookkeeping, for the consumer
// applying states. REQUIRES: inside WithReplica (c.mu held).
func (c *Core) AppliedLocked() *Applied { return &c.applied }

// Retire ends the replication when the partition's log closes: a leader's
// acks=all waiters are answered NOT_LEADER_OR_FOLLOWER, following stops,
// the log watcher ends, and later inputs get ErrClosed. It does not call
// LeadershipChanged (callers may hold the consumer's locks).
func (c *Core) Retire() {
	c.stopOnce.Do(func() { close(c.stop) })
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	if c.retired {
		return
	}
	c.retired = true
	c.mu.Lock()
	_ = StepDown(c.r, c.r.LeaderEpoch(), c.log)
	var acks []replication.AckResult
	if c.r.HasReady() {
		rd := c.r.Ready()
		c.r.Advance(rd)
		acks = rd.Acks
	}
	c.mu.Unlock()
	c.role.Store(int32(replication.RoleNone))
	c.shell.acks.complete(acks)
	c.out.StopFollowing()
}

// StepDownIfLeader makes a leading replica step down now (the broker's
// registration was lost: see the consumer's RULE); others are untouched.
func (c *Core) StepDownIfLeader() error {
	return c.WithReplica(func(r *replication.Replica) error {
		if r.Role() != replication.RoleLeader {
			return nil
		}
		return StepDown(r, r.LeaderEpoch(), c.log)
	})
}

// StepDown makes r neither lead nor fetch: BecomeFollower of no leader. A
// leader moves past the epoch it led (a replica may not follow in an epoch
// it led); a replica that never had a role keeps RoleNone, and with it the
// machine's restart rule.
// REQUIRES: the Core's mu held (inside WithReplica).
func StepDown(r *replication.Replica, epoch int32, l Log) error {
	switch r.Role() {
	case replication.RoleNone:
		return nil
	case replication.RoleLeader:
		epoch = max(epoch, r.LeaderEpoch()+1)
	default:
		epoch = max(epoch, r.LeaderEpoch(), 0)
	}
	return r.BecomeFollower(replication.FollowerState{
		Epoch: epoch, Leader: -1, LEO: l.LogEndOffset(), HighWatermark: r.HighWatermark(),
	})
}
