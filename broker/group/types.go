package group

import "github.com/twmb/franz-go/pkg/kerr"

// State is a group's state in the classic protocol.
type State int8

const (
	StateEmpty State = iota
	StatePreparingRebalance
	StateCompletingRebalance
	StateStable
	StateDead
)

// String is Kafka's name for the state (DescribeGroups, ListGroups).
func (s State) String() string {
	switch s {
	case StateEmpty:
		return "Empty"
	case StatePreparingRebalance:
		return "PreparingRebalance"
	case StateCompletingRebalance:
		return "CompletingRebalance"
	case StateStable:
		return "Stable"
	}
	return "Dead"
}

// Protocol is one assignor a member supports, with its metadata (for the
// consumer protocol, a ConsumerMemberMetadata the broker passes through
// untouched).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinInput is a JoinGroup request.
type JoinInput struct {
	Group, MemberID, InstanceID, ClientID, ClientHost, ProtocolType string
	Protocols                                                       []Protocol
	SessionTimeoutMs, RebalanceTimeoutMs                            int32
	// RequireKnownMemberID: JoinGroup v4+ (KIP-394): a new dynamic member
	// first gets MEMBER_ID_REQUIRED with its id and must join again with it.
	RequireKnownMemberID bool
}

// JoinMember is one member as the leader's join response lists it.
type JoinMember struct {
	MemberID, InstanceID string
	Metadata             []byte
}

// JoinResult answers a JoinGroup.
type JoinResult struct {
	Code                   int16
	Generation             int32
	ProtocolType, Protocol string
	Leader, MemberID       string
	SkipAssignment         bool
	Members                []JoinMember // only for the leader
}

// Assignment is the leader's assignment for one member.
type Assignment struct {
	MemberID   string
	Assignment []byte
}

// SyncInput is a SyncGroup request.
type SyncInput struct {
	Group, MemberID, InstanceID string
	Generation                  int32
	ProtocolType, Protocol      *string // v5+; nil: not checked
	Assignments                 []Assignment
}

// SyncResult answers a SyncGroup.
type SyncResult struct {
	Code                   int16
	ProtocolType, Protocol string
	Assignment             []byte
}

// Response is a delayed answer, addressed by the request id the caller gave.
type Response struct {
	Req  uint64
	Join *JoinResult
	Sync *SyncResult
}

// MemberRef identifies a member in Heartbeat, LeaveGroup and OffsetCommit.
type MemberRef struct {
	MemberID, InstanceID string
}

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// GroupOffset is one group's committed offset on one partition.
type GroupOffset struct {
	Group string
	TopicPartition
	Offset          int64
	CommitTimestamp int64 // unix ms
}

// Offset is a committed offset.
type Offset struct {
	Offset          int64
	LeaderEpoch     int32
	Metadata        string
	CommitTimestamp int64
	// logOffset is where the commit record sits in __consumer_offsets:
	// applying an older record never overwrites a newer one.
	logOffset int64
}

// MemberDescription is a member as DescribeGroups shows it.
type MemberDescription struct {
	MemberID, InstanceID, ClientID, ClientHost string
	Metadata, Assignment                       []byte
}

// Description is a group as DescribeGroups shows it.
type Description struct {
	Group                  string
	State                  State
	ProtocolType, Protocol string
	Generation             int32
	Leader                 string
	Members                []MemberDescription
}

// Listed is a group as ListGroups shows it.
type Listed struct {
	Group, ProtocolType string
	State               State
}

// Kafka error codes the machine answers with.
var (
	errUnknownMember       = kerr.UnknownMemberID.Code
	errIllegalGeneration   = kerr.IllegalGeneration.Code
	errRebalance           = kerr.RebalanceInProgress.Code
	errFenced              = kerr.FencedInstanceID.Code
	errInconsistent        = kerr.InconsistentGroupProtocol.Code
	errInvalidGroupID      = kerr.InvalidGroupID.Code
	errSessionTimeout      = kerr.InvalidSessionTimeout.Code
	errMemberIDRequired    = kerr.MemberIDRequired.Code
	errGroupNotFound       = kerr.GroupIDNotFound.Code
	errNonEmpty            = kerr.NonEmptyGroup.Code
	errMaxSize             = kerr.GroupMaxSizeReached.Code
	errSubscribed          = kerr.GroupSubscribedToTopic.Code
	errCoordinatorNotAvail = kerr.CoordinatorNotAvailable.Code
)
