package replication

import (
	"fmt"
	"slices"
)

// LeaderState is the controller's partition state naming this replica
// leader, plus the local log's positions at that moment.
type LeaderState struct {
	Epoch    int32
	Version  int64 // the partition state's etcd version; ISR CAS compares on it
	Replicas []int32
	ISR      []int32
	// LEO and DurableOffset are the local log's end offset and flushed
	// offset now (DurableOffset is ignored without fsync durability).
	LEO           int64
	DurableOffset int64
	// HighWatermark is the replica's HW before the change (as follower, or
	// from the checkpoint after a restart). Clamped to the durable LEO.
	HighWatermark int64
}

// leaderState is the leader-only part of a Replica. Owned by the Replica.
type leaderState struct {
	version  int64
	replicas []int32
	isr      []int32      // committed ISR; always holds the leader
	proposal *ISRProposal // in flight, at most one (Kafka's AlterPartition rule)
	leo      int64        // local LEO
	durable  int64        // local durable LEO: the leader's own HW contribution
	// epochStartOffset is the LEO when this epoch began: a follower must
	// reach it to rejoin the ISR, proving it truncated against this epoch.
	epochStartOffset int64
	followers        map[int32]*progress // every replica but the leader
	waiters          []ackWaiter
}

// BecomeLeader makes this replica leader of s.Epoch. With the epoch it
// already leads and a newer Version it is a metadata update (replicas or
// ISR changed by the controller, which also resolves any proposal in
// flight); an older or equal Version is ignored. An older epoch is refused.
func (r *Replica) BecomeLeader(s LeaderState) error {
	if err := r.validateLeaderState(s); err != nil {
		return err
	}
	if s.Epoch < r.epoch {
		return fmt.Errorf("%w: leader epoch %d < %d", ErrStaleEpoch, s.Epoch, r.epoch)
	}
	if r.role == RoleNone && s.Epoch <= r.epochs.LatestEpoch() {
		// A restarted replica whose log already holds batches of this
		// epoch led it before the restart (only the leader writes an
		// epoch) and may have lost unflushed batches that followers
		// fetched: leading on in the same epoch would let two different
		// batches share an (epoch, offset), which KIP-101 cannot detect.
		// The controller must raise the epoch first.
		return fmt.Errorf("%w: restarted replica cannot lead epoch %d again (log holds epoch %d)", ErrStaleEpoch, s.Epoch, r.epochs.LatestEpoch())
	}
	if r.role == RoleLeader && s.Epoch == r.epoch {
		if s.Version > r.leader.version {
			r.updateLeaderState(s)
		}
		return nil
	}
	sameEpochResume := s.Epoch == r.epoch && r.role == RoleFenced
	if sameEpochResume && s.Version <= r.fencedVersion {
		return nil // a state from before the failed CAS: still deposed
	}
	r.startLeading(s, sameEpochResume)
	return nil
}

// startLeading begins a leadership term: followers' LEOs unknown, ISR
// members counted as caught up now, the epoch starting at the LEO.
func (r *Replica) startLeading(s LeaderState, sameEpochResume bool) {
	var waiters []ackWaiter
	if r.leader != nil {
		waiters = r.leader.waiters // same log, still leader: keep waiting
	}
	r.follower = nil
	r.clearFollowerOutputs()
	durable := s.LEO
	if r.cfg.FsyncDurability {
		durable = min(s.DurableOffset, s.LEO)
	}
	// The inherited HW is clamped to the durable LEO: a follower's HW never
	// exceeds what it flushed, so this only bites on a corrupt checkpoint.
	hw := min(max(s.HighWatermark, 0), durable)
	if sameEpochResume {
		hw = min(max(hw, r.highWatermark), durable)
	}
	l := &leaderState{
		version: s.Version, replicas: slices.Clone(s.Replicas), isr: orderLike(s.Replicas, s.ISR),
		leo: s.LEO, durable: durable, epochStartOffset: s.LEO,
		followers: map[int32]*progress{}, waiters: waiters,
	}
	for _, id := range s.Replicas {
		if id != r.cfg.ReplicaID {
			l.followers[id] = newProgress(slices.Contains(s.ISR, id), r.nowMs)
		}
	}
	r.role, r.epoch, r.leader, r.highWatermark = RoleLeader, s.Epoch, l, hw
	r.maybeAdvanceHW()
}

// validateLeaderState rejects states the controller cannot have written.
func (r *Replica) validateLeaderState(s LeaderState) error {
	switch {
	case s.Epoch < 0:
		return fmt.Errorf("%w: leader epoch %d", ErrInvalidState, s.Epoch)
	case s.LEO < 0 || s.DurableOffset < 0:
		return fmt.Errorf("%w: LEO %d, durable %d", ErrInvalidOffset, s.LEO, s.DurableOffset)
	}
	if err := validateReplicaSet(s.Replicas, s.ISR, r.cfg.ReplicaID); err != nil {
		return err
	}
	return nil
}

// validateReplicaSet checks: replicas unique, bounded, holding self; ISR a
// duplicate-free subset of replicas holding self (the leader is always in
// the ISR: it is elected from it, or the ISR is reset to it).
func validateReplicaSet(replicas, isr []int32, self int32) error {
	if len(replicas) > MaxReplicas || len(isr) > len(replicas) {
		return fmt.Errorf("%w: %d replicas, %d in ISR", ErrInvalidState, len(replicas), len(isr))
	}
	if hasDuplicates(replicas) || hasDuplicates(isr) {
		return fmt.Errorf("%w: duplicate replica ids", ErrInvalidState)
	}
	if !slices.Contains(replicas, self) || !slices.Contains(isr, self) {
		return fmt.Errorf("%w: leader %d not in replicas %v / ISR %v", ErrInvalidState, self, replicas, isr)
	}
	for _, id := range isr {
		if !slices.Contains(replicas, id) {
			return fmt.Errorf("%w: ISR member %d not a replica", ErrInvalidState, id)
		}
	}
	return nil
}

func hasDuplicates(ids []int32) bool {
	for i, id := range ids {
		if slices.Contains(ids[i+1:], id) {
			return true
		}
	}
	return false
}

// orderLike returns the members of set in the order they have in order.
func orderLike(order, set []int32) []int32 {
	out := make([]int32, 0, len(set))
	for _, id := range order {
		if slices.Contains(set, id) {
			out = append(out, id)
		}
	}
	return out
}

// updateLeaderState applies a newer controller state within the same
// epoch. Known followers keep their progress; new ones start unknown.
func (r *Replica) updateLeaderState(s LeaderState) {
	l := r.leader
	followers := map[int32]*progress{}
	for _, id := range s.Replicas {
		if id == r.cfg.ReplicaID {
			continue
		}
		if p, ok := l.followers[id]; ok {
			followers[id] = p
		} else {
			followers[id] = newProgress(slices.Contains(s.ISR, id), r.nowMs)
		}
	}
	l.version, l.replicas, l.isr, l.followers = s.Version, slices.Clone(s.Replicas), orderLike(s.Replicas, s.ISR), followers
	l.proposal = nil
	if r.out.proposal != nil {
		r.out.proposal = nil
	}
	r.maybeAdvanceHW()
}

// Append reports the leader's new LEO after a local append. Without fsync
// durability it is also the leader's durable LEO.
func (r *Replica) Append(leo int64) error {
	if r.role != RoleLeader {
		return ErrNotLeader
	}
	l := r.leader
	if leo < l.leo {
		return fmt.Errorf("%w: leader LEO %d < %d", ErrInvalidOffset, leo, l.leo)
	}
	l.leo = leo
	if !r.cfg.FsyncDurability {
		l.durable = leo
	}
	r.maybeAdvanceHW()
	return nil
}

// Flushed reports the leader's durable LEO (fsync durability): every offset
// below it is on disk. It never moves back; it may run ahead of the last
// Append report, which it then also raises.
func (r *Replica) Flushed(offset int64) error {
	if r.role != RoleLeader {
		return ErrNotLeader
	}
	if !r.cfg.FsyncDurability {
		return nil // Append already moved the durable LEO
	}
	l := r.leader
	if offset < l.durable {
		return fmt.Errorf("%w: flushed offset %d < %d", ErrInvalidOffset, offset, l.durable)
	}
	l.durable = offset
	l.leo = max(l.leo, offset)
	r.maybeAdvanceHW()
	return nil
}
