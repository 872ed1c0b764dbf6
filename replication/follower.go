package replication

import "fmt"

// FollowerState is the controller's partition state naming another broker
// leader, plus the local log's positions at that moment.
type FollowerState struct {
	Epoch  int32
	Leader int32 // -1: no leader (offline partition): wait for the next state
	// LEO and HighWatermark are the local log's end offset and HW now.
	LEO           int64
	HighWatermark int64
}

type followerPhase int8

const (
	phaseIdle       followerPhase = iota // no leader to follow
	phaseTruncating                      // an EpochQuery is outstanding
	phaseFetching                        // truncation done; fetching
)

// followerState is the follower-only part of a Replica. Owned by the Replica.
type followerState struct {
	leader     int32
	leo        int64
	phase      followerPhase
	queryEpoch int32 // the epoch asked in the outstanding EpochQuery
}

// BecomeFollower makes this replica a follower of s.Leader in s.Epoch. A
// leader loses its role and fails its acks=all waiters with ErrNotLeader.
// The follower then truncates (KIP-101): the Ready carries an EpochQuery
// for the local log's latest epoch, or, for an empty log, a Fetch at 0.
// The same epoch and leader again is a no-op (a re-delivered state).
func (r *Replica) BecomeFollower(s FollowerState) error {
	if err := r.validateFollowerState(s); err != nil {
		return err
	}
	if r.role == RoleFollower && s.Epoch == r.epoch && s.Leader == r.follower.leader {
		return nil
	}
	r.failWaiters(ErrNotLeader)
	r.out.proposal = nil
	r.clearFollowerOutputs()
	f := &followerState{leader: s.Leader, leo: s.LEO}
	r.role, r.epoch, r.leader, r.follower = RoleFollower, s.Epoch, nil, f
	r.highWatermark = min(max(s.HighWatermark, 0), s.LEO)
	switch latest := r.epochs.LatestEpoch(); {
	case s.Leader < 0:
		f.phase = phaseIdle
	case s.LEO == 0:
		r.startFetching()
	case latest < 0:
		// A log without epoch records (never written by Strata): the only
		// safe point known is the HW, Kafka's pre-KIP-101 fallback.
		r.truncateTo(r.highWatermark)
		r.startFetching()
	default:
		r.askEpoch(latest)
	}
	return nil
}

func (r *Replica) validateFollowerState(s FollowerState) error {
	switch {
	case s.Epoch < r.epoch:
		return fmt.Errorf("%w: follower epoch %d < %d", ErrStaleEpoch, s.Epoch, r.epoch)
	case s.Epoch < 0:
		return fmt.Errorf("%w: epoch %d", ErrInvalidState, s.Epoch)
	case s.Leader == r.cfg.ReplicaID:
		return fmt.Errorf("%w: follower of itself", ErrInvalidState)
	case s.Epoch == r.epoch && r.role == RoleLeader:
		return fmt.Errorf("%w: leader of epoch %d told to follow in the same epoch", ErrStaleEpoch, s.Epoch)
	case s.LEO < 0:
		return fmt.Errorf("%w: LEO %d", ErrInvalidOffset, s.LEO)
	}
	return nil
}

func (r *Replica) askEpoch(epoch int32) {
	f := r.follower
	f.phase, f.queryEpoch = phaseTruncating, epoch
	r.out.query = &EpochQuery{Leader: f.leader, CurrentEpoch: r.epoch, Epoch: epoch}
	r.out.fetch = nil
}

func (r *Replica) startFetching() {
	f := r.follower
	f.phase = phaseFetching
	r.out.fetch = &FetchStart{Leader: f.leader, Epoch: r.epoch, Offset: f.leo}
	r.out.query = nil
}

// truncateTo drops the local log from offset on (if below the LEO). The HW
// follows the LEO down, as Kafka's truncation does.
func (r *Replica) truncateTo(offset int64) {
	f := r.follower
	offset = max(offset, 0)
	if offset >= f.leo {
		return
	}
	f.leo = offset
	r.highWatermark = min(r.highWatermark, offset)
	r.out.truncate = &Truncation{Offset: offset}
	r.stats.Truncations++
}

// EpochEndOffset is the leader's OffsetForLeaderEpoch answer.
type EpochEndOffset struct {
	RequestedEpoch int32 // the epoch the query asked for
	LeaderEpoch    int32 // the largest epoch <= RequestedEpoch the leader knows; -1 unknown
	EndOffset      int64 // the end offset of LeaderEpoch on the leader; -1 unknown
}

// HandleEpochEndOffset applies the leader's answer to the outstanding
// EpochQuery and decides the truncation (Kafka's
// getOffsetTruncationState, KIP-101 and KIP-279):
//   - unknown end offset: the leader knows no such epoch; keep the log.
//   - the follower holds LeaderEpoch too: truncate to min(its end of that
//     epoch, the leader's end, LEO) and start fetching.
//   - the follower's largest epoch <= LeaderEpoch is older (it never saw
//     LeaderEpoch): truncate to the end of that older epoch and ask again
//     for it; each round asks a strictly smaller epoch.
//   - the follower knows no epoch <= LeaderEpoch: truncate to
//     min(leader's end, LEO).
//
// The follower's own HW never decides the offset.
func (r *Replica) HandleEpochEndOffset(a EpochEndOffset) error {
	if r.role != RoleFollower || r.follower.phase != phaseTruncating || a.RequestedEpoch != r.follower.queryEpoch {
		return ErrUnexpectedAnswer
	}
	if a.LeaderEpoch > a.RequestedEpoch {
		return fmt.Errorf("%w: epoch %d answered for %d", ErrInvalidAnswer, a.LeaderEpoch, a.RequestedEpoch)
	}
	f := r.follower
	if a.EndOffset < 0 || a.LeaderEpoch < 0 {
		r.startFetching()
		return nil
	}
	localEpoch, localEnd := r.epochs.EndOffsetForEpoch(a.LeaderEpoch)
	switch {
	case localEnd < 0:
		r.truncateTo(min(a.EndOffset, f.leo))
	case localEpoch != a.LeaderEpoch && localEpoch < f.queryEpoch:
		r.truncateTo(min(localEnd, f.leo))
		r.askEpoch(localEpoch)
		return nil
	default:
		r.truncateTo(min(localEnd, a.EndOffset, f.leo))
	}
	r.startFetching()
	return nil
}

// ValidateFetch says whether a fetch response for a fetch at fetchOffset
// in epoch may be appended: nil, or ErrNotFollower, ErrStaleEpoch,
// ErrStaleFetch (drop its records). Call it before appending.
func (r *Replica) ValidateFetch(epoch int32, fetchOffset int64) error {
	if err := r.checkFetching(); err != nil {
		return err
	}
	if epoch != r.epoch {
		return fmt.Errorf("%w: fetch in epoch %d, now %d", ErrStaleEpoch, epoch, r.epoch)
	}
	if fetchOffset != r.follower.leo {
		return fmt.Errorf("%w: fetched at %d, LEO now %d", ErrStaleFetch, fetchOffset, r.follower.leo)
	}
	return nil
}

// Fetched reports the follower's LEO after appending a valid fetch
// response (with fsync durability: its flushed LEO, which is then also its
// next fetch offset) and the leader's HW from that response. The follower's
// HW becomes min(leaderHW, LEO).
func (r *Replica) Fetched(epoch int32, leo, leaderHW int64) error {
	if err := r.checkFetching(); err != nil {
		return err
	}
	if epoch != r.epoch {
		return fmt.Errorf("%w: fetch in epoch %d, now %d", ErrStaleEpoch, epoch, r.epoch)
	}
	f := r.follower
	if leo < f.leo {
		return fmt.Errorf("%w: follower LEO %d < %d", ErrInvalidOffset, leo, f.leo)
	}
	f.leo = leo
	r.highWatermark = min(max(leaderHW, 0), leo)
	return nil
}

// checkFetching: fetch responses apply only to a follower past truncation.
func (r *Replica) checkFetching() error {
	switch {
	case r.role != RoleFollower:
		return ErrNotFollower
	case r.follower.phase != phaseFetching:
		return fmt.Errorf("%w: not fetching (truncating or no leader)", ErrStaleFetch)
	}
	return nil
}
