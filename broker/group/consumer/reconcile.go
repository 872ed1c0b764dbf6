package consumer

import "fmt"

// State is a member's reconciliation state (KIP-848 "Member States").
type State uint8

const (
	// StateStable: the member has its target for its epoch, or waits for a
	// new target.
	StateStable State = iota
	// StateUnrevokedPartitions: the member must revoke PendingRevocation
	// before its epoch advances.
	StateUnrevokedPartitions
	// StateUnreleasedPartitions: the member is at the target epoch but some
	// target partitions are still owned by other members.
	StateUnreleasedPartitions
	// StateUnknown: a state this version does not know (e.g. from a newer
	// record). Reconcile fences such a member unless its client reports
	// that it owns nothing, then reconciles it from scratch.
	StateUnknown
)

func (s State) String() string {
	switch s {
	case StateStable:
		return "STABLE"
	case StateUnrevokedPartitions:
		return "UNREVOKED_PARTITIONS"
	case StateUnreleasedPartitions:
		return "UNRELEASED_PARTITIONS"
	case StateUnknown:
		return "UNKNOWN"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// MemberState is the reconciliation part of one member's stored state.
// Invariant: Assigned and PendingRevocation are disjoint; PendingRevocation
// is empty unless State is StateUnrevokedPartitions.
type MemberState struct {
	State         State
	Epoch         int32
	PreviousEpoch int32
	// Assigned: the partitions the member is given (the heartbeat
	// response's assignment).
	Assigned Assignment
	// PendingRevocation: partitions the member must give up; still owned by
	// it, so given to no one else.
	PendingRevocation Assignment
}

// NewMember is the state of a member that has just joined (epoch 0).
func NewMember() MemberState { return MemberState{State: StateStable} }

// Owned is every partition the member owns: assigned or pending revocation.
func (m MemberState) Owned() Assignment { return m.Assigned.Union(m.PendingRevocation) }

// Reconcile computes the member's next state from its current state, its
// target assignment and the target's epoch (doc.go, "Reconciliation").
// ownedByOthers reports whether another member owns a partition (assigned
// or pending revocation); ownedByClient is the heartbeat's owned
// partitions, nil when the request did not carry them. cur is not
// modified. The only error is ErrFencedMemberEpoch, for a member in
// StateUnknown that may still own partitions: it must rejoin.
//
// REQUIRES: ownedByOthers reflects the current states of all other
// members, and the caller stores the result before reconciling another
// member of the group; then no partition is ever owned by two members.
func Reconcile(cur MemberState, target Assignment, targetEpoch int32,
	ownedByOthers func(TopicID, int32) bool, ownedByClient *Assignment) (MemberState, error) {
	r := reconciler{cur, target, targetEpoch, ownedByOthers, ownedByClient}
	switch cur.State {
	case StateStable:
		if cur.Epoch == targetEpoch && cur.Assigned.Equal(target) {
			return cur, nil
		}
		return r.next(cur.Epoch), nil
	case StateUnrevokedPartitions:
		if r.clientOwnsAny(cur.PendingRevocation) {
			return cur, nil
		}
		// Advance by one epoch at most: the target may be newer than the
		// epoch whose revocation was just acknowledged.
		return r.next(min(cur.Epoch+1, targetEpoch)), nil
	case StateUnreleasedPartitions:
		return r.next(cur.Epoch), nil
	}
	// StateUnknown (or any value this version does not know), as Kafka.
	if ownedByClient == nil || ownedByClient.Len() > 0 {
		return cur, ErrFencedMemberEpoch
	}
	return r.next(targetEpoch), nil
}

type reconciler struct {
	cur           MemberState
	target        Assignment
	targetEpoch   int32
	ownedByOthers func(TopicID, int32) bool
	ownedByClient *Assignment
}

// next is computeNext of doc.go: epoch is the member's epoch should it have
// to wait for a revocation.
func (r reconciler) next(epoch int32) MemberState {
	keep := r.cur.Assigned.Intersect(r.target)
	revoke := r.cur.Assigned.Minus(r.target)
	wanted := r.target.Minus(r.cur.Assigned)
	free := wanted.Filter(func(t TopicID, p int32) bool { return !r.ownedByOthers(t, p) })
	if revoke.Len() > 0 && r.clientOwnsAny(revoke) {
		return r.update(StateUnrevokedPartitions, epoch, keep, revoke)
	}
	state := StateStable
	if free.Len() < wanted.Len() {
		state = StateUnreleasedPartitions
	}
	return r.update(state, r.targetEpoch, keep.Union(free), Assignment{})
}

func (r reconciler) update(s State, epoch int32, assigned, pending Assignment) MemberState {
	return MemberState{
		State:             s,
		Epoch:             epoch,
		PreviousEpoch:     r.cur.Epoch,
		Assigned:          assigned,
		PendingRevocation: pending,
	}
}

// clientOwnsAny: whether the client may still own a partition of parts;
// true when it did not say what it owns.
func (r reconciler) clientOwnsAny(parts Assignment) bool {
	if r.ownedByClient == nil {
		return true
	}
	return parts.Intersect(*r.ownedByClient).Len() > 0
}
