package consumer

import "slices"

// Group states of ConsumerGroupDescribe (and ListGroups).
const (
	GroupEmpty       = "Empty"
	GroupAssigning   = "Assigning"
	GroupReconciling = "Reconciling"
	GroupStable      = "Stable"
)

// Description is a group as ConsumerGroupDescribe reports it.
type Description struct {
	GroupID         string
	State           string // GroupEmpty, ...
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []MemberDescription // sorted by member id
}

// MemberDescription is one member of a Description. Assignment and
// TargetAssignment are copies.
type MemberDescription struct {
	MemberID             string
	InstanceID           string
	RackID               string
	ClientID             string
	ClientHost           string
	MemberEpoch          int32 // -2: a static member away
	State                State
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	Assignment           Assignment // assigned partitions
	PendingRevocation    Assignment
	TargetAssignment     Assignment
}

// Describe reports the group's state.
func (g *Group) Describe() Description {
	d := Description{GroupID: g.id, State: g.state(), Epoch: g.epoch, AssignmentEpoch: g.assignmentEpoch,
		Assignor: g.assignor().Name()}
	for _, id := range g.memberIDs() {
		m := g.members[id]
		d.Members = append(d.Members, MemberDescription{MemberID: id, InstanceID: m.sub.InstanceID,
			RackID: m.sub.Rack, ClientID: m.clientID, ClientHost: m.clientHost, MemberEpoch: m.state.Epoch,
			State: m.state.State, SubscribedTopicNames: slices.Clone(m.sub.Topics), SubscribedTopicRegex: m.sub.Regex,
			Assignment: m.state.Assigned.Clone(), PendingRevocation: m.state.PendingRevocation.Clone(),
			TargetAssignment: g.target[id].Clone()})
	}
	return d
}

// state is Kafka's ConsumerGroup.State: Reconciling while any member has
// not reached the target epoch with its target.
func (g *Group) state() string {
	switch {
	case len(g.members) == 0:
		return GroupEmpty
	case g.epoch > g.assignmentEpoch:
		return GroupAssigning
	}
	for id, m := range g.members {
		if m.state.State != StateStable || m.state.Epoch != g.assignmentEpoch || !m.state.Assigned.Equal(g.target[id]) {
			return GroupReconciling
		}
	}
	return GroupStable
}
