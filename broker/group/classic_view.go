package group

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The classic group APIs (ListGroups, DescribeGroups) show consumer-protocol
// groups too, as Kafka 4 does; the views here are what they answer.

// ListStateNames lists the classic groups in the states named (Kafka's
// names, case-insensitively; no names: every state). Names of no state
// are ignored; when only such are asked for, nothing is listed.
func (c *Coordinator) ListStateNames(names []string) ([]Listed, int16) {
	states := statesNamed(names)
	if len(names) > 0 && len(states) == 0 {
		return nil, 0
	}
	return c.List(states)
}

// statesNamed is the states among names (case-insensitively).
func statesNamed(names []string) []State {
	var states []State
	for _, name := range names {
		for st := StateEmpty; st <= StateDead; st++ {
			if strings.EqualFold(st.String(), name) {
				states = append(states, st)
			}
		}
	}
	return states
}

// ClassicDescription is a group as DescribeGroups shows it. A classic
// group is shown as Describe has it. A consumer-protocol group has
// protocol type "consumer" (empty once Dead), its assignor as the
// protocol, its state (Empty, Assigning, Reconciling, Stable), and each
// member's subscription (Metadata: ConsumerMemberMetadata v0) and current
// assignment (Assignment: ConsumerMemberAssignment v0) in the classic
// consumer protocol's encoding.
type ClassicDescription struct {
	State, ProtocolType, Protocol string
	Members                       []MemberDescription
}

// DescribeAsClassic describes a group of either protocol for
// DescribeGroups.
func (c *Coordinator) DescribeAsClassic(groupID string) (ClassicDescription, int16) {
	if !c.IsConsumerGroup(groupID) {
		d, code := c.Describe(groupID)
		return ClassicDescription{State: d.State.String(), ProtocolType: d.ProtocolType, Protocol: d.Protocol,
			Members: d.Members}, code
	}
	return c.describeConsumerAsClassic(groupID)
}

// describeConsumerAsClassic describes a consumer-protocol group. A group
// deleted since IsConsumerGroup saw it is "Dead" with code 0, as Kafka
// answers.
func (c *Coordinator) describeConsumerAsClassic(groupID string) (ClassicDescription, int16) {
	d, code := c.ConsumerDescribe(groupID)
	switch {
	case code == kerr.GroupIDNotFound.Code:
		return ClassicDescription{State: "Dead"}, 0
	case code != 0:
		return ClassicDescription{}, code
	}
	topics := c.currentTopics() // without mu: SetTopicMetadata's contract
	out := ClassicDescription{State: d.State, ProtocolType: "consumer", Protocol: d.Assignor}
	for _, m := range d.Members {
		md := kmsg.ConsumerMemberMetadata{Topics: append([]string{}, m.SubscribedTopicNames...)}
		var a kmsg.ConsumerMemberAssignment
		for _, tp := range m.Assignment.List() {
			a.Topics = append(a.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: topics[tp.Topic].Name, Partitions: tp.Partitions})
		}
		out.Members = append(out.Members, MemberDescription{MemberID: m.MemberID, InstanceID: m.InstanceID,
			ClientID: m.ClientID, ClientHost: m.ClientHost, Metadata: md.AppendTo(nil), Assignment: a.AppendTo(nil)})
	}
	return out, 0
}
