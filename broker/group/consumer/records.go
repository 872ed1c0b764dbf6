package consumer

import (
	"fmt"
	"maps"
	"slices"
)

// Record is one change to a Group, to be persisted in __consumer_offsets.
// The types are named after Kafka's group-coordinator records (key type in
// parentheses, as in Kafka's CoordinatorRecordType: verify when mapping);
// kmsg v1.15 has no types for them, so the coordinator encodes them. Each
// record's key is the group id plus, for member records, MemberID; a
// Tombstone record is the key with a null value (the member is gone).
// Compaction keeps the latest value per key, and Replay of the compacted
// records rebuilds the same group.
type Record interface{ coordinatorRecordType() int16 }

// ConsumerGroupMetadataValue (3): the group epoch.
type ConsumerGroupMetadataValue struct{ Epoch int32 }

// ConsumerGroupPartitionMetadataValue (4): the metadata of the subscribed
// topics the current target was computed from.
type ConsumerGroupPartitionMetadataValue struct{ Topics []TopicMetadata }

// ConsumerGroupMemberMetadataValue (5): a member's subscription and client
// information, as its heartbeats told them.
type ConsumerGroupMemberMetadataValue struct {
	MemberID             string
	Tombstone            bool
	InstanceID           string
	RackID               string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
	SubscribedTopicRegex string
	RebalanceTimeoutMs   int32
	ServerAssignor       string
}

// ConsumerGroupTargetAssignmentMetadataValue (6): the group epoch the
// target assignment was computed for.
type ConsumerGroupTargetAssignmentMetadataValue struct{ AssignmentEpoch int32 }

// ConsumerGroupTargetAssignmentMemberValue (7): one member's target.
type ConsumerGroupTargetAssignmentMemberValue struct {
	MemberID        string
	Tombstone       bool
	TopicPartitions []TopicPartitions
}

// ConsumerGroupCurrentMemberAssignmentValue (8): one member's
// reconciliation state. MemberEpoch -2 marks a static member that left;
// PreviousMemberEpoch is then the epoch it resumes with.
type ConsumerGroupCurrentMemberAssignmentValue struct {
	MemberID                    string
	Tombstone                   bool
	MemberEpoch                 int32
	PreviousMemberEpoch         int32
	State                       int8
	AssignedPartitions          []TopicPartitions
	PartitionsPendingRevocation []TopicPartitions
}

func (ConsumerGroupMetadataValue) coordinatorRecordType() int16                 { return 3 }
func (ConsumerGroupPartitionMetadataValue) coordinatorRecordType() int16        { return 4 }
func (ConsumerGroupMemberMetadataValue) coordinatorRecordType() int16           { return 5 }
func (ConsumerGroupTargetAssignmentMetadataValue) coordinatorRecordType() int16 { return 6 }
func (ConsumerGroupTargetAssignmentMemberValue) coordinatorRecordType() int16   { return 7 }
func (ConsumerGroupCurrentMemberAssignmentValue) coordinatorRecordType() int16  { return 8 }

func (g *Group) persistMember(id string, m *member) {
	g.persist(ConsumerGroupMemberMetadataValue{MemberID: id, InstanceID: m.sub.InstanceID, RackID: m.sub.Rack,
		ClientID: m.clientID, ClientHost: m.clientHost, SubscribedTopicNames: slices.Clone(m.sub.Topics),
		SubscribedTopicRegex: m.sub.Regex, RebalanceTimeoutMs: m.rebalanceTimeoutMs, ServerAssignor: m.serverAssignor})
}

func (g *Group) persistState(id string, s MemberState) {
	g.persist(ConsumerGroupCurrentMemberAssignmentValue{MemberID: id, MemberEpoch: s.Epoch,
		PreviousMemberEpoch: s.PreviousEpoch, State: int8(s.State), AssignedPartitions: s.Assigned.List(),
		PartitionsPendingRevocation: s.PendingRevocation.List()})
}

// Replay rebuilds a group from its records (in log order, compacted or
// not) at logical time nowMs. Deadlines are not persisted: every member
// gets a full session timeout from nowMs, and members revoking a full
// rebalance timeout, as Kafka re-arms its timers on load. Topics are those
// of the last partition metadata record until the caller's SetTopics, which
// bumps the epoch only if a subscribed topic changed meanwhile.
func Replay(id string, cfg Config, records []Record, nowMs int64) (*Group, error) {
	g, err := NewGroup(id, cfg)
	if err != nil {
		return nil, err
	}
	for _, r := range records {
		g.replayOne(r)
	}
	return g, g.finishReplay(nowMs)
}

func (g *Group) replayOne(r Record) {
	switch r := r.(type) {
	case ConsumerGroupMetadataValue:
		g.epoch = r.Epoch
	case ConsumerGroupPartitionMetadataValue:
		g.topics = map[TopicID]TopicMetadata{}
		for _, md := range r.Topics {
			g.topics[md.ID] = md
		}
	case ConsumerGroupTargetAssignmentMetadataValue:
		g.assignmentEpoch = r.AssignmentEpoch
	case ConsumerGroupTargetAssignmentMemberValue:
		if r.Tombstone {
			delete(g.target, r.MemberID)
		} else {
			g.target[r.MemberID] = fromList(r.TopicPartitions)
		}
	case ConsumerGroupMemberMetadataValue:
		g.replayMember(r)
	case ConsumerGroupCurrentMemberAssignmentValue:
		g.replayState(r)
	}
}

func (g *Group) replayMember(r ConsumerGroupMemberMetadataValue) {
	if r.Tombstone {
		delete(g.members, r.MemberID)
		return
	}
	m := g.members[r.MemberID]
	if m == nil {
		m = &member{state: NewMember()}
		g.members[r.MemberID] = m
	}
	m.sub = MemberSubscription{MemberID: r.MemberID, InstanceID: r.InstanceID, Rack: r.RackID,
		Topics: slices.Clone(r.SubscribedTopicNames), Regex: r.SubscribedTopicRegex}
	m.clientID, m.clientHost = r.ClientID, r.ClientHost
	m.rebalanceTimeoutMs, m.serverAssignor = r.RebalanceTimeoutMs, r.ServerAssignor
}

// replayState: a state record may precede its member's metadata record
// (not in what Group writes, but compaction reorders keys), so it creates
// the member; finishReplay drops members that never got metadata.
func (g *Group) replayState(r ConsumerGroupCurrentMemberAssignmentValue) {
	m := g.members[r.MemberID]
	if r.Tombstone {
		if m != nil {
			m.state = NewMember()
		}
		return
	}
	if m == nil {
		m = &member{}
		g.members[r.MemberID] = m
	}
	state := State(r.State)
	if state > StateUnknown {
		state = StateUnknown
	}
	m.state = MemberState{State: state, Epoch: r.MemberEpoch, PreviousEpoch: r.PreviousMemberEpoch,
		Assigned: fromList(r.AssignedPartitions), PendingRevocation: fromList(r.PartitionsPendingRevocation)}
}

// finishReplay restores the derived state: the static index, owners, a
// target entry per member and the deadlines.
func (g *Group) finishReplay(nowMs int64) error {
	states := map[string]MemberState{}
	for id, m := range g.members {
		if m.sub.MemberID == "" { // state without metadata: a deleted member
			delete(g.members, id)
			continue
		}
		states[id] = m.state
		m.assignedAt = assignedSince(nil, MemberState{}, m.state) // commit.go: strict after a reload
		if m.sub.InstanceID != "" {
			g.static[m.sub.InstanceID] = id
		}
		if _, ok := g.target[id]; !ok {
			g.target[id] = Assignment{}
		}
		m.sessionDeadline = nowMs + g.cfg.SessionTimeoutMs
		if m.state.State == StateUnrevokedPartitions {
			m.rebalanceDeadline = nowMs + int64(m.rebalanceTimeoutMs)
		}
	}
	for id := range maps.Clone(g.target) {
		if g.members[id] == nil {
			delete(g.target, id)
		}
	}
	owners, err := NewOwners(states)
	if err != nil {
		return fmt.Errorf("consumer: replaying group %q: %w", g.id, err)
	}
	g.owners = owners
	return nil
}

func fromList(l []TopicPartitions) Assignment {
	var tps []TopicPartition
	for _, t := range l {
		for _, p := range t.Partitions {
			tps = append(tps, TopicPartition{t.Topic, p})
		}
	}
	return NewAssignment(tps...)
}
