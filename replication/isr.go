package replication

import (
	"fmt"
	"slices"
)

// FollowerFetch records a fetch by follower replica at fetchOffset with
// CurrentLeaderEpoch epoch. It moves the follower's LEO and caught-up time,
// may advance the HW, and may propose adding the follower to the ISR. The
// errors say how to answer the fetch; on error nothing changed.
func (r *Replica) FollowerFetch(replica int32, fetchOffset int64, epoch int32) error {
	if r.role != RoleLeader {
		return ErrNotLeader
	}
	switch {
	case epoch >= 0 && epoch < r.epoch:
		return fmt.Errorf("%w: fetch epoch %d < %d", ErrStaleEpoch, epoch, r.epoch)
	case epoch > r.epoch:
		return fmt.Errorf("%w: fetch epoch %d > %d", ErrUnknownEpoch, epoch, r.epoch)
	}
	l := r.leader
	p, ok := l.followers[replica]
	if !ok {
		return fmt.Errorf("%w: replica %d", ErrUnknownReplica, replica)
	}
	if fetchOffset < 0 || fetchOffset > l.leo {
		return fmt.Errorf("%w: fetch offset %d, leader LEO %d", ErrOffsetOutOfRange, fetchOffset, l.leo)
	}
	p.update(fetchOffset, l.leo, r.nowMs)
	r.maybeAdvanceHW()
	r.maybeExpandISR(replica, p)
	return nil
}

// maximalISR is the committed ISR united with the ISR of the proposal in
// flight: while a change is pending the HW waits for both (Kafka's
// maximalIsr), so neither outcome of the CAS can leave an ISR member with
// a LEO below the HW.
func (l *leaderState) maximalISR() []int32 {
	if l.proposal == nil {
		return l.isr
	}
	union := slices.Clone(l.isr)
	for _, id := range l.proposal.ISR {
		if !slices.Contains(union, id) {
			union = append(union, id)
		}
	}
	return union
}

// maybeAdvanceHW raises the HW to min(durable LEO, LEO of every other
// member of the maximal ISR) if that is higher, and completes the acks=all
// waiters it passes.
// Invariant: HW <= durable LEO <= LEO; HW never decreases while leader.
func (r *Replica) maybeAdvanceHW() {
	l := r.leader
	candidate := l.durable
	for _, id := range l.maximalISR() {
		if p, ok := l.followers[id]; ok {
			candidate = min(candidate, p.leo) // an unknown LEO (-1) holds the HW
		}
	}
	if candidate <= r.highWatermark {
		return
	}
	r.highWatermark = candidate
	r.completeWaiters()
}

// maybeShrinkISR proposes removing every ISR follower that is out of sync
// (not at the leader's LEO and not caught up within the lag time). Nothing
// is proposed while another proposal is in flight.
func (r *Replica) maybeShrinkISR() {
	l := r.leader
	if l.proposal != nil {
		return
	}
	var lagging []int32
	for _, id := range l.isr {
		if p, ok := l.followers[id]; ok && !p.inSync(l.leo, r.nowMs, r.cfg.ReplicaLagTimeMaxMs) {
			lagging = append(lagging, id)
		}
	}
	if len(lagging) == 0 {
		return
	}
	isr := slices.DeleteFunc(slices.Clone(l.isr), func(id int32) bool { return slices.Contains(lagging, id) })
	r.propose(ISRShrink, isr, lagging)
}

// maybeExpandISR proposes adding a follower outside the ISR once it has
// reached the HW and this epoch's start offset (so it has truncated against
// this leader and holds everything committed).
func (r *Replica) maybeExpandISR(replica int32, p *progress) {
	l := r.leader
	if l.proposal != nil || slices.Contains(l.isr, replica) {
		return
	}
	if p.leo < r.highWatermark || p.leo < l.epochStartOffset {
		return
	}
	r.propose(ISRExpand, orderLike(l.replicas, append(slices.Clone(l.isr), replica)), []int32{replica})
}

func (r *Replica) propose(change ISRChange, isr, changed []int32) {
	l := r.leader
	l.proposal = &ISRProposal{
		Change: change, LeaderEpoch: r.epoch, ExpectedVersion: l.version,
		ISR: isr, Changed: changed,
	}
	r.out.proposal = l.proposal
}

// ISRCommitted reports that the proposal in flight was written with a CAS;
// newVersion is the partition state's version after the write.
func (r *Replica) ISRCommitted(newVersion int64) error {
	if r.role != RoleLeader || r.leader.proposal == nil {
		return ErrNoProposal
	}
	l := r.leader
	if newVersion <= l.version {
		return fmt.Errorf("%w: committed version %d <= %d", ErrInvalidState, newVersion, l.version)
	}
	prop := l.proposal
	l.isr, l.version, l.proposal = prop.ISR, newVersion, nil
	if r.out.proposal == prop {
		r.out.proposal = nil
	}
	if prop.Change == ISRShrink {
		r.stats.ISRShrinks++
	} else {
		r.stats.ISRExpands++
		// A replica that just joined gets a full lag period to reach the
		// LEO (it has reached the HW); without it, one that never sat at
		// the LEO would be removed at the next tick and flap.
		for _, id := range prop.Changed {
			if p, ok := l.followers[id]; ok {
				p.lastCaughtUpMs = max(p.lastCaughtUpMs, r.nowMs)
			}
		}
	}
	r.maybeAdvanceHW()
	return nil
}

// ISRRejected reports that the proposal's CAS failed: the partition state
// changed under the leader, which means it was deposed. The replica stops
// leading (RoleFenced) and fails its acks=all waiters with ErrNotLeader.
func (r *Replica) ISRRejected() error {
	if r.role != RoleLeader || r.leader.proposal == nil {
		return ErrNoProposal
	}
	r.failWaiters(ErrNotLeader)
	r.fencedVersion = r.leader.version
	r.role, r.leader = RoleFenced, nil
	r.out.proposal = nil
	r.out.fenced = true
	r.stats.Fenced++
	return nil
}

// LeaderEpochEndOffset answers an OffsetForLeaderEpoch request on the
// leader: the largest epoch <= requested that this log knows and where it
// ends. The current epoch counts as starting at the LEO the leader had
// when it took over, even before a batch of it is written (Kafka assigns
// that start in its epoch cache on becoming leader): without it a leader
// with an empty log, or whose log ends in an older epoch, would answer
// UNDEFINED and a follower would keep a divergent suffix.
func (r *Replica) LeaderEpochEndOffset(requested int32) (int32, int64, error) {
	if r.role != RoleLeader {
		return -1, -1, ErrNotLeader
	}
	l := r.leader
	switch {
	case requested < 0 || requested > r.epoch:
		return -1, -1, nil
	case requested == r.epoch:
		return r.epoch, l.leo, nil
	}
	latest := r.epochs.LatestEpoch()
	if latest >= r.epoch {
		epoch, end := r.epochs.EndOffsetForEpoch(requested)
		return epoch, end, nil
	}
	// No batch of the current epoch yet, so the LEO is still the epoch's
	// start offset: the log's answer is right unless it knows no epoch
	// <= requested, or none at all.
	if epoch, end := r.epochs.EndOffsetForEpoch(requested); end >= 0 {
		return epoch, min(end, l.epochStartOffset), nil
	}
	if latest < 0 {
		return requested, l.epochStartOffset, nil
	}
	return latest, l.epochStartOffset, nil
}
