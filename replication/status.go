package replication

import "slices"

// Counters are cumulative event counts for metrics (cmd maps them to
// Prometheus names such as IsrShrinksPerSec).
type Counters struct {
	ISRShrinks  uint64 // committed shrinks
	ISRExpands  uint64 // committed expands
	Fenced      uint64 // rejected ISR CASes
	Truncations uint64 // follower truncations that dropped data
}

// FollowerStatus is the leader's view of one follower, for
// DescribeProducers-like admin answers and metrics.
type FollowerStatus struct {
	ReplicaID int32
	InISR     bool  // in the committed ISR
	LEO       int64 // last fetch offset; -1 unknown this term
	// Lag is the leader's LEO minus the follower's LEO (the leader's LEO
	// when unknown).
	Lag int64
	// LastCaughtUpMs and LastFetchMs are logical times; -1 never.
	LastCaughtUpMs int64
	LastFetchMs    int64
}

// Status is a snapshot of the replica's state.
type Status struct {
	Role          Role
	LeaderEpoch   int32
	HighWatermark int64
	NowMs         int64
	// Leader only:
	LEO              int64
	DurableOffset    int64
	EpochStartOffset int64
	Version          int64
	Replicas         []int32
	ISR              []int32 // committed
	Proposal         *ISRProposal
	Followers        []FollowerStatus // in replica-assignment order
	PendingAcks      int
	UnderReplicated  bool // ISR smaller than the replica set
	UnderMinISR      bool // ISR smaller than min.insync.replicas
	// Follower only:
	Leader      int32 // -1 when not following anyone
	Truncating  bool  // an EpochQuery is outstanding
	FollowerLEO int64
	Counters    Counters
}

// HighWatermark is the HW: consumers read below it.
func (r *Replica) HighWatermark() int64 { return max(r.highWatermark, 0) }

// Role is the current role.
func (r *Replica) Role() Role { return r.role }

// LeaderEpoch is the current leader epoch, -1 before any role.
func (r *Replica) LeaderEpoch() int32 { return r.epoch }

// ISR is the committed ISR (a copy); nil unless leader.
func (r *Replica) ISR() []int32 {
	if r.leader == nil {
		return nil
	}
	return slices.Clone(r.leader.isr)
}

// MaximalISR is the committed ISR united with the proposal in flight: the
// set the HW waits for. nil unless leader.
func (r *Replica) MaximalISR() []int32 {
	if r.leader == nil {
		return nil
	}
	return slices.Clone(r.leader.maximalISR())
}

// FetchOffset is the follower's next fetch offset; ok is false unless the
// replica is a follower past truncation.
func (r *Replica) FetchOffset() (offset int64, ok bool) {
	if r.role != RoleFollower || r.follower.phase != phaseFetching {
		return 0, false
	}
	return r.follower.leo, true
}

// Status returns a snapshot.
func (r *Replica) Status() Status {
	s := Status{Role: r.role, LeaderEpoch: r.epoch, HighWatermark: r.HighWatermark(), NowMs: r.nowMs, Leader: -1, Counters: r.stats}
	if l := r.leader; l != nil {
		s.Leader = r.cfg.ReplicaID
		s.LEO, s.DurableOffset, s.EpochStartOffset, s.Version = l.leo, l.durable, l.epochStartOffset, l.version
		s.Replicas, s.ISR, s.PendingAcks = slices.Clone(l.replicas), slices.Clone(l.isr), len(l.waiters)
		if l.proposal != nil {
			p := *l.proposal
			s.Proposal = &p
		}
		s.UnderReplicated, s.UnderMinISR = len(l.isr) < len(l.replicas), len(l.isr) < r.minISR
		s.Followers = r.followerStatuses()
	}
	if f := r.follower; f != nil {
		s.Leader, s.Truncating, s.FollowerLEO = f.leader, f.phase == phaseTruncating, f.leo
	}
	return s
}

func (r *Replica) followerStatuses() []FollowerStatus {
	l := r.leader
	out := make([]FollowerStatus, 0, len(l.followers))
	for _, id := range l.replicas {
		p, ok := l.followers[id]
		if !ok {
			continue
		}
		lag := l.leo - max(p.leo, 0)
		out = append(out, FollowerStatus{
			ReplicaID: id, InISR: slices.Contains(l.isr, id), LEO: p.leo, Lag: lag,
			LastCaughtUpMs: p.lastCaughtUpMs, LastFetchMs: p.lastFetchMs,
		})
	}
	return out
}
