package consumer

import (
	"cmp"
	"slices"
)

// Uniform is the sticky, balanced "uniform" assignor (doc.go).
type Uniform struct{}

// Name is "uniform".
func (Uniform) Name() string { return UniformName }

// Assign keeps every member's valid current partitions, gives the
// remaining ones to the least-loaded eligible members (most constrained
// partitions first), then moves partitions from the most to the least
// loaded members while that narrows the spread. Each move lowers the sum of
// squared member counts, so the loop ends; with homogeneous subscriptions it
// ends with counts differing by at most one, and a member only ever loses or
// only ever gains partitions, so nothing moves that need not.
func (Uniform) Assign(members []MemberSpec, topics map[TopicID]TopicMetadata) map[string]Assignment {
	u := newUniformRun(sortedMembers(members), topics)
	u.keepCurrent()
	u.placeUnowned()
	for u.moveOne() {
	}
	return u.result()
}

// uniformRun is the working state of one Assign call.
type uniformRun struct {
	members []MemberSpec
	topics  map[TopicID]TopicMetadata
	// all: every partition of a subscribed topic, sorted.
	all []TopicPartition
	// owner: member index per placed partition; count: partitions per member.
	owner map[TopicPartition]int
	count []int
}

func newUniformRun(members []MemberSpec, topics map[TopicID]TopicMetadata) *uniformRun {
	u := &uniformRun{
		members: members,
		topics:  topics,
		owner:   map[TopicPartition]int{},
		count:   make([]int, len(members)),
	}
	for _, t := range subscribedTopics(members, topics) {
		for p := range topics[t].Partitions {
			u.all = append(u.all, TopicPartition{t, p})
		}
	}
	return u
}

// keepCurrent places each member's current partitions that still exist and
// that it still subscribes to; a partition claimed by two members (the
// caller's input was inconsistent) goes to the first by member id.
func (u *uniformRun) keepCurrent() {
	for i, m := range u.members {
		for _, tp := range m.Current.Partitions() {
			md, ok := u.topics[tp.Topic]
			if !ok || tp.Partition < 0 || tp.Partition >= md.Partitions || !subscribes(m, tp.Topic) {
				continue
			}
			if _, taken := u.owner[tp]; !taken {
				u.place(tp, i)
			}
		}
	}
}

// placeUnowned gives each unplaced partition to its least-loaded eligible
// member (lowest index on ties), partitions of topics with fewer
// subscribers first so that constrained partitions are not crowded out.
func (u *uniformRun) placeUnowned() {
	eligible := map[TopicID][]int{}
	for _, tp := range u.all {
		if _, ok := eligible[tp.Topic]; !ok {
			for i, m := range u.members {
				if subscribes(m, tp.Topic) {
					eligible[tp.Topic] = append(eligible[tp.Topic], i)
				}
			}
		}
	}
	var unowned []TopicPartition
	for _, tp := range u.all {
		if _, ok := u.owner[tp]; !ok {
			unowned = append(unowned, tp)
		}
	}
	slices.SortStableFunc(unowned, func(a, b TopicPartition) int {
		return cmp.Compare(len(eligible[a.Topic]), len(eligible[b.Topic]))
	})
	for _, tp := range unowned {
		best := eligible[tp.Topic][0]
		for _, i := range eligible[tp.Topic][1:] {
			if u.count[i] < u.count[best] {
				best = i
			}
		}
		u.place(tp, best)
	}
}

func (u *uniformRun) place(tp TopicPartition, i int) {
	if old, ok := u.owner[tp]; ok {
		u.count[old]--
	}
	u.owner[tp] = i
	u.count[i]++
}

// moveOne moves one partition from a most-loaded member to a member with
// at least two fewer partitions that subscribes to its topic; false when
// no such move exists.
func (u *uniformRun) moveOne() bool {
	byLoad := make([]int, len(u.members))
	for i := range byLoad {
		byLoad[i] = i
	}
	slices.SortStableFunc(byLoad, func(a, b int) int { return cmp.Compare(u.count[b], u.count[a]) })
	for _, over := range byLoad {
		for k := len(byLoad) - 1; k >= 0; k-- {
			under := byLoad[k]
			if u.count[under] >= u.count[over]-1 {
				break
			}
			if tp, ok := u.movable(over, under); ok {
				u.place(tp, under)
				return true
			}
		}
	}
	return false
}

// movable: the last partition (in sorted order) of member over whose topic
// member under subscribes to.
func (u *uniformRun) movable(over, under int) (TopicPartition, bool) {
	for k := len(u.all) - 1; k >= 0; k-- {
		tp := u.all[k]
		if u.owner[tp] == over && subscribes(u.members[under], tp.Topic) {
			return tp, true
		}
	}
	return TopicPartition{}, false
}

func (u *uniformRun) result() map[string]Assignment {
	lists := make([][]TopicPartition, len(u.members))
	for _, tp := range u.all {
		i := u.owner[tp]
		lists[i] = append(lists[i], tp)
	}
	out := emptyResult(u.members)
	for i, m := range u.members {
		out[m.MemberID] = NewAssignment(lists[i]...)
	}
	return out
}
