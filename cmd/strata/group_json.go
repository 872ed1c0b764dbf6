package main

import (
	"io"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The --json forms of `group list` and `group describe`: the tables'
// fields with exact numbers (offsets, epochs, seconds) and null where the
// table prints "-" or "?". Partition rows reuse lagJSON, the element of
// `group lag --json`, so a program reads all three alike.

// groupListJSON is one element of `group list --json`.
type groupListJSON struct {
	Group        string `json:"group"`
	Type         string `json:"type"` // "" when the broker does not say
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
	// RetentionMarginSeconds is the most urgent partition's margin: 0 when
	// lost; null when no partition has a time limit or it is unknown.
	RetentionMarginSeconds *float64 `json:"retention_margin_seconds"`
	Lost                   bool     `json:"lost"`
	Retention              string   `json:"retention"` // the RETENTION text
}

func printGroupListJSON(w io.Writer, groups []kadm.ListedGroup, margins map[string]retentionMargin) error {
	out := make([]groupListJSON, 0, len(groups))
	for _, g := range groups {
		m := marginOf(margins, g.Group)
		j := groupListJSON{Group: g.Group, Type: g.GroupType, State: g.State, ProtocolType: g.ProtocolType,
			Coordinator: g.Coordinator, Lost: m.Kind == retentionLost, Retention: m.summary()}
		switch m.Kind {
		case retentionTime:
			j.RetentionMarginSeconds = &m.Seconds
		case retentionLost:
			j.RetentionMarginSeconds = new(float64)
		}
		out = append(out, j)
	}
	return writeJSON(w, out)
}

// groupDescribeJSON is one element of `group describe --json`.
type groupDescribeJSON struct {
	Group        string                  `json:"group"`
	State        string                  `json:"state"`
	ProtocolType string                  `json:"protocol_type"`
	Protocol     string                  `json:"protocol"`
	Coordinator  int32                   `json:"coordinator"`
	Members      []groupMemberJSON       `json:"members"`
	Partitions   []describePartitionJSON `json:"partitions"`
	Consumer     *consumerProtocolJSON   `json:"consumer_protocol,omitempty"` // KIP-848 groups only
}

type groupMemberJSON struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   string  `json:"client_id"`
	Host       string  `json:"host"`
}

// describePartitionJSON is a lag row with the member it is assigned to
// (null fields when none).
type describePartitionJSON struct {
	lagJSON
	MemberID *string `json:"member_id"`
	ClientID *string `json:"client_id"`
	Host     *string `json:"host"`
}

type consumerProtocolJSON struct {
	GroupEpoch      int32                `json:"group_epoch"`
	AssignmentEpoch int32                `json:"assignment_epoch"`
	Assignor        string               `json:"assignor"`
	Members         []consumerMemberJSON `json:"members"`
}

type consumerMemberJSON struct {
	MemberID   string           `json:"member_id"`
	InstanceID *string          `json:"instance_id"`
	ClientID   string           `json:"client_id"`
	Host       string           `json:"host"`
	Epoch      int32            `json:"epoch"`
	Assigned   []assignmentJSON `json:"assigned"`
	Target     []assignmentJSON `json:"target"`
}

type assignmentJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// printDescribeJSON prints the named groups as one array, or nothing and
// the first group's error when one cannot be described.
func printDescribeJSON(w io.Writer, names []string, lags kadm.DescribedGroupLags, rows map[lagRowKey]lagRow,
	consumerGroups map[string]kmsg.ConsumerGroupDescribeResponseGroup, namer *topicNamer,
) error {
	out := make([]groupDescribeJSON, 0, len(names))
	for _, name := range names {
		l, err := describedGroup(lags, name)
		if err != nil {
			return err
		}
		j := groupDescribeJSON{Group: l.Group, State: l.State, ProtocolType: l.ProtocolType, Protocol: l.Protocol,
			Coordinator: l.Coordinator.NodeID, Members: []groupMemberJSON{}, Partitions: describePartitions(l, rows)}
		for _, m := range l.Members {
			j.Members = append(j.Members, groupMemberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID,
				ClientID: m.ClientID, Host: m.ClientHost})
		}
		slices.SortFunc(j.Members, func(a, b groupMemberJSON) int { return strings.Compare(a.MemberID, b.MemberID) })
		if g, ok := consumerGroups[name]; ok {
			if j.Consumer, err = consumerProtocol(g, namer); err != nil {
				return err
			}
		}
		out = append(out, j)
	}
	return writeJSON(w, out)
}

// describePartitions is the JSON of printGroupLag's rows.
func describePartitions(l kadm.DescribedGroupLag, rows map[lagRowKey]lagRow) []describePartitionJSON {
	out := []describePartitionJSON{}
	for _, p := range l.Lag.Sorted() {
		r, ok := rows[lagRowKey{l.Group, topicPartition{p.Topic, p.Partition}}]
		if !ok { // not gathered: what kadm knows, margin unknown
			r = lagRow{
				groupPartition: groupPartition{Group: l.Group, Topic: p.Topic, Partition: p.Partition,
					Committed: p.Commit.At, LogStart: p.Start.Offset, End: p.End.Offset, KadmLag: p.Lag, Err: p.Err},
				Records: p.Lag, Margin: retentionMargin{Kind: retentionUnknown},
			}
		}
		j := describePartitionJSON{lagJSON: r.json()}
		if m := p.Member; m != nil {
			j.MemberID, j.ClientID, j.Host = &m.MemberID, &m.ClientID, &m.ClientHost
		}
		out = append(out, j)
	}
	return out
}

func consumerProtocol(g kmsg.ConsumerGroupDescribeResponseGroup, namer *topicNamer) (*consumerProtocolJSON, error) {
	out := &consumerProtocolJSON{GroupEpoch: g.Epoch, AssignmentEpoch: g.AssignmentEpoch, Assignor: g.AssignorName,
		Members: []consumerMemberJSON{}}
	for _, m := range g.Members {
		assigned, err := assignmentTopics(m.Assignment, namer)
		if err != nil {
			return nil, err
		}
		target, err := assignmentTopics(m.TargetAssignment, namer)
		if err != nil {
			return nil, err
		}
		out.Members = append(out.Members, consumerMemberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID,
			ClientID: m.ClientID, Host: m.ClientHost, Epoch: m.MemberEpoch, Assigned: assigned, Target: target})
	}
	slices.SortFunc(out.Members, func(a, b consumerMemberJSON) int { return strings.Compare(a.MemberID, b.MemberID) })
	return out, nil
}

// assignmentTopics is a as topics with their partitions, both sorted.
func assignmentTopics(a kmsg.Assignment, namer *topicNamer) ([]assignmentJSON, error) {
	out := []assignmentJSON{}
	for _, tp := range a.TopicPartitions {
		name, err := namer.name(tp)
		if err != nil {
			return nil, err
		}
		ps := slices.Clone(tp.Partitions)
		slices.Sort(ps)
		out = append(out, assignmentJSON{Topic: name, Partitions: ps})
	}
	slices.SortFunc(out, func(a, b assignmentJSON) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}
