package replication

import (
	"fmt"
	"slices"
)

// Role is what a replica currently does for its partition.
type Role int8

const (
	// RoleNone: not yet told by the controller.
	RoleNone Role = iota
	// RoleLeader: serves produce and fetch, tracks the followers, owns the HW.
	RoleLeader
	// RoleFollower: truncates, then fetches from the leader.
	RoleFollower
	// RoleFenced: was leader, but its ISR CAS failed, so it was deposed. It
	// serves nothing until the controller's next state arrives.
	RoleFenced
)

func (r Role) String() string {
	switch r {
	case RoleNone:
		return "none"
	case RoleLeader:
		return "leader"
	case RoleFollower:
		return "follower"
	case RoleFenced:
		return "fenced"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Replica is the replication state machine of one partition on one broker.
// It is pure: no I/O, no clock, no goroutines. Inputs are method calls;
// outputs accumulate until Ready and are acknowledged with Advance.
//
// Owner: not safe for concurrent use; the shell serializes every call (one
// mutex per partition, or one goroutine), and must apply a Ready's outputs
// in the order documented on Ready before calling Advance.
type Replica struct {
	cfg    Config
	epochs LocalEpochs // read-only view of the local log's epoch checkpoint
	minISR int

	role  Role
	epoch int32 // current leader epoch; -1 before the first role
	nowMs int64 // logical time: the sum of Tick inputs

	// highWatermark: on a leader, min LEO over the maximal ISR, never
	// decreasing while leader, never above the leader's (durable) LEO. On a
	// follower, min(leader's HW from the last fetch, own LEO).
	highWatermark int64

	// fencedVersion is the partition-state version whose CAS failed: a
	// fenced replica resumes leading its epoch only for a newer state.
	fencedVersion int64

	leader   *leaderState   // non-nil iff role == RoleLeader
	follower *followerState // non-nil iff role == RoleFollower

	out         pending
	publishedHW int64 // the HW of the last Ready acknowledged by Advance
	stats       Counters
}

// pending collects outputs until Ready/Advance.
type pending struct {
	proposal *ISRProposal
	acks     []AckResult
	fenced   bool
	truncate *Truncation
	query    *EpochQuery
	fetch    *FetchStart
}

// New returns a replica in RoleNone. epochs is the local log's epoch view.
func New(cfg Config, epochs LocalEpochs) (*Replica, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if epochs == nil {
		return nil, fmt.Errorf("%w: nil LocalEpochs", ErrInvalidConfig)
	}
	cfg = cfg.withDefaults()
	return &Replica{cfg: cfg, epochs: epochs, minISR: cfg.MinInsyncReplicas, epoch: -1}, nil
}

// Tick advances logical time by ms milliseconds. A leader then proposes to
// shrink the ISR if a follower lags (see doc.go) and times out acks=all
// waiters whose deadline passed.
func (r *Replica) Tick(ms int64) error {
	if ms < 0 {
		return fmt.Errorf("%w: tick of %d ms", ErrInvalidOffset, ms)
	}
	r.nowMs = saturatingAdd(r.nowMs, ms)
	if r.role == RoleLeader {
		r.maybeShrinkISR()
		r.expireWaiters()
	}
	return nil
}

// SetMinInsyncReplicas changes min.insync.replicas (a topic config change).
func (r *Replica) SetMinInsyncReplicas(n int) error {
	if n < 1 || n > MaxReplicas {
		return fmt.Errorf("%w: min.insync.replicas %d", ErrInvalidConfig, n)
	}
	r.minISR = n
	return nil
}

func saturatingAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// Ready is the machine's accumulated output. Apply it in field order:
// publish the HW; CAS the proposal; answer the acks; stop leading if
// Fenced; truncate the log; then send the epoch query or start fetching.
// Then call Advance with it.
type Ready struct {
	// HighWatermarkChanged says HighWatermark differs from the last
	// acknowledged Ready: publish it (wake fetch long-polls, tiering).
	HighWatermarkChanged bool
	HighWatermark        int64
	// Proposal, if non-nil, is an ISR change to write to etcd with a CAS
	// on ExpectedVersion; report the outcome with ISRCommitted or
	// ISRRejected. It appears in exactly one Ready.
	Proposal *ISRProposal
	// Acks are completed acks=all waiters, in completion order.
	Acks []AckResult
	// Fenced: the leader's CAS failed; it was deposed. Stop leading now.
	Fenced bool
	// Truncate, if non-nil, asks the follower to truncate its log.
	Truncate *Truncation
	// EpochQuery, if non-nil, asks the follower to send OffsetForLeaderEpoch
	// to the leader and pass the answer to HandleEpochEndOffset.
	EpochQuery *EpochQuery
	// Fetch, if non-nil, says truncation is done: fetch from Fetch.Offset.
	Fetch *FetchStart
}

// ISRChange says which way a proposal moves the ISR.
type ISRChange int8

const (
	ISRShrink ISRChange = iota
	ISRExpand
)

func (c ISRChange) String() string {
	if c == ISRExpand {
		return "expand"
	}
	return "shrink"
}

// ISRProposal is an ISR change the leader wants written to the partition
// state in etcd, compare-and-swapped on ExpectedVersion.
type ISRProposal struct {
	Change          ISRChange
	LeaderEpoch     int32
	ExpectedVersion int64
	ISR             []int32 // the new ISR, in replica-assignment order
	Changed         []int32 // the replicas added or removed
}

// AckResult completes one acks=all waiter: Err is nil (acknowledge),
// ErrNotEnoughReplicasAfterAppend, ErrTimedOut or ErrNotLeader.
type AckResult struct {
	ID             uint64
	RequiredOffset int64
	Err            error
}

// Truncation asks the follower to drop every offset >= Offset.
type Truncation struct{ Offset int64 }

// EpochQuery asks the follower's shell to send OffsetForLeaderEpoch with
// LeaderEpoch = Epoch and CurrentLeaderEpoch = CurrentEpoch to Leader.
type EpochQuery struct {
	Leader       int32
	CurrentEpoch int32
	Epoch        int32
}

// FetchStart tells the follower (replication/follower) to fetch from Leader at Offset
// with CurrentLeaderEpoch = Epoch.
type FetchStart struct {
	Leader int32
	Epoch  int32
	Offset int64
}

// HasReady reports whether Ready would return anything.
func (r *Replica) HasReady() bool {
	o := &r.out
	return r.highWatermark != r.publishedHW || o.proposal != nil || len(o.acks) > 0 ||
		o.fenced || o.truncate != nil || o.query != nil || o.fetch != nil
}

// Ready returns the outputs accumulated since the last Advance.
func (r *Replica) Ready() Ready {
	o := &r.out
	return Ready{
		HighWatermarkChanged: r.highWatermark != r.publishedHW,
		HighWatermark:        r.highWatermark,
		Proposal:             o.proposal,
		Acks:                 slices.Clone(o.acks),
		Fenced:               o.fenced,
		Truncate:             o.truncate,
		EpochQuery:           o.query,
		Fetch:                o.fetch,
	}
}

// Advance acknowledges rd, a value returned by Ready. Outputs produced
// after that Ready stay pending.
func (r *Replica) Advance(rd Ready) {
	o := &r.out
	if rd.HighWatermarkChanged {
		r.publishedHW = rd.HighWatermark
	}
	if rd.Proposal != nil && rd.Proposal == o.proposal {
		o.proposal = nil
	}
	o.acks = o.acks[min(len(rd.Acks), len(o.acks)):]
	if rd.Fenced {
		o.fenced = false
	}
	if rd.Truncate != nil && rd.Truncate == o.truncate {
		o.truncate = nil
	}
	if rd.EpochQuery != nil && rd.EpochQuery == o.query {
		o.query = nil
	}
	if rd.Fetch != nil && rd.Fetch == o.fetch {
		o.fetch = nil
	}
}

// clearFollowerOutputs drops follower outputs made obsolete by a role change.
func (r *Replica) clearFollowerOutputs() {
	r.out.truncate, r.out.query, r.out.fetch = nil, nil, nil
}
