package consumer

import (
	"slices"
	"strings"
)

// Assignor computes a target assignment (doc.go, "Assignors"). Assign must
// be deterministic, give every member an entry (possibly empty), give each
// partition of a subscribed topic to exactly one member subscribed to it,
// and not modify its arguments.
type Assignor interface {
	Name() string
	Assign(members []MemberSpec, topics map[TopicID]TopicMetadata) map[string]Assignment
}

// Names of the built-in assignors (group.consumer.assignors).
const (
	UniformName = "uniform"
	RangeName   = "range"
)

var (
	_ Assignor = Uniform{}
	_ Assignor = Range{}
)

// AssignorByName returns the built-in assignor of that name.
func AssignorByName(name string) (Assignor, bool) {
	switch name {
	case UniformName:
		return Uniform{}, true
	case RangeName:
		return Range{}, true
	}
	return nil, false
}

// Range is Kafka's range assignor run on the broker (doc.go).
type Range struct{}

// Name is "range".
func (Range) Name() string { return RangeName }

// Assign splits each topic's partitions into contiguous ranges over the
// members subscribed to it, in member id order.
func (Range) Assign(members []MemberSpec, topics map[TopicID]TopicMetadata) map[string]Assignment {
	sorted := sortedMembers(members)
	out := emptyResult(sorted)
	for _, t := range subscribedTopics(sorted, topics) {
		subs := subscribersOf(sorted, t)
		n := int(topics[t].Partitions)
		per, extra := n/len(subs), n%len(subs)
		next := 0
		for i, m := range subs {
			count := per
			if i < extra {
				count++
			}
			for p := next; p < next+count; p++ {
				out[m.MemberID][t] = append(out[m.MemberID][t], int32(p))
			}
			next += count
		}
	}
	return out
}

// sortedMembers is a copy of members sorted by member id.
func sortedMembers(members []MemberSpec) []MemberSpec {
	s := slices.Clone(members)
	slices.SortFunc(s, func(a, b MemberSpec) int { return strings.Compare(a.MemberID, b.MemberID) })
	return s
}

func emptyResult(members []MemberSpec) map[string]Assignment {
	out := make(map[string]Assignment, len(members))
	for _, m := range members {
		out[m.MemberID] = Assignment{}
	}
	return out
}

// subscribedTopics: the existing topics with at least one partition that
// some member subscribes to, sorted.
func subscribedTopics(members []MemberSpec, topics map[TopicID]TopicMetadata) []TopicID {
	var ts []TopicID
	for _, m := range members {
		for _, t := range m.Topics {
			if md, ok := topics[t]; ok && md.Partitions > 0 {
				ts = append(ts, t)
			}
		}
	}
	slices.SortFunc(ts, TopicID.Compare)
	return slices.Compact(ts)
}

// subscribersOf: the members (in the given order) subscribed to t.
func subscribersOf(members []MemberSpec, t TopicID) []MemberSpec {
	var out []MemberSpec
	for _, m := range members {
		if subscribes(m, t) {
			out = append(out, m)
		}
	}
	return out
}

func subscribes(m MemberSpec, t TopicID) bool { return slices.Contains(m.Topics, t) }
