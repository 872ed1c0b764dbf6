package consumer

import "errors"

// Errors of CheckEpoch; the protocol edge maps them to Kafka's error codes
// of the same names.
var (
	ErrFencedMemberEpoch = errors.New("consumer: fenced member epoch")
	ErrUnknownMemberID   = errors.New("consumer: unknown member id")
	ErrInvalidRequest    = errors.New("consumer: invalid request")
)

// Special member epochs of ConsumerGroupHeartbeat requests.
const (
	JoinEpoch        int32 = 0
	LeaveEpoch       int32 = -1
	StaticLeaveEpoch int32 = -2
)

// Action is what an accepted heartbeat asks for.
type Action uint8

const (
	// ActionHeartbeat: a member in the group heartbeats (and reconciles).
	ActionHeartbeat Action = iota
	// ActionJoin: a new member, or a known one rejoining from scratch.
	ActionJoin
	// ActionLeave: the member leaves; its partitions are released.
	ActionLeave
	// ActionStaticLeave: a static member leaves temporarily, keeping its
	// assignment for its instance id until its session expires.
	ActionStaticLeave
)

// StoredMember is what CheckEpoch needs of the coordinator's member.
type StoredMember struct {
	Epoch, PreviousEpoch int32
	InstanceID           string
	Assigned             Assignment
}

// CheckEpoch validates a heartbeat's member epoch (doc.go, "Heartbeat epoch
// checks"). stored is nil when the member id is not known; owned is the
// request's owned partitions, nil when it did not carry them.
func CheckEpoch(stored *StoredMember, requestEpoch int32, owned *Assignment) (Action, error) {
	switch {
	case requestEpoch == JoinEpoch:
		return ActionJoin, nil
	case requestEpoch < StaticLeaveEpoch:
		return 0, ErrInvalidRequest
	case stored == nil:
		return 0, ErrUnknownMemberID
	case requestEpoch == LeaveEpoch:
		return ActionLeave, nil
	case requestEpoch == StaticLeaveEpoch:
		if stored.InstanceID == "" {
			return 0, ErrInvalidRequest
		}
		return ActionStaticLeave, nil
	}
	return ActionHeartbeat, checkPositiveEpoch(*stored, requestEpoch, owned)
}

// checkPositiveEpoch: the stored epoch is accepted; the previous one only
// with owned partitions within the assigned ones, as the client then just
// missed the response that bumped its epoch and owns nothing it should not.
func checkPositiveEpoch(stored StoredMember, requestEpoch int32, owned *Assignment) error {
	switch {
	case requestEpoch == stored.Epoch:
		return nil
	case requestEpoch > stored.Epoch:
		return ErrFencedMemberEpoch
	case requestEpoch == stored.PreviousEpoch && owned != nil && owned.SubsetOf(stored.Assigned):
		return nil
	}
	return ErrFencedMemberEpoch
}
