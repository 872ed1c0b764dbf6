package consumer

import (
	"slices"
	"testing"
)

func TestAssignmentSetOps(t *testing.T) {
	a := NewAssignment(TopicPartition{tid(2), 3}, TopicPartition{tid(1), 1}, TopicPartition{tid(2), 3}, TopicPartition{tid(2), 0})
	if want := []TopicPartitions{{tid(1), []int32{1}}, {tid(2), []int32{0, 3}}}; !equalLists(a.List(), want) {
		t.Fatalf("List = %v, want %v", a.List(), want)
	}
	b := asg(1, 1, 2, -1, 2, 3, 4)
	cases := []struct {
		name      string
		got, want Assignment
	}{
		{"intersect", a.Intersect(b), asg(1, 1, -1, 2, 3)},
		{"minus", a.Minus(b), asg(2, 0)},
		{"union", a.Union(b), asg(1, 1, 2, -1, 2, 0, 3, 4)},
		{"clone", a.Clone(), a},
	}
	for _, c := range cases {
		if !c.got.Equal(c.want) || !c.want.Equal(c.got) {
			t.Errorf("%s = %v, want %v", c.name, c.got.List(), c.want.List())
		}
	}
	if !a.Contains(tid(2), 3) || a.Contains(tid(2), 1) || a.Contains(tid(3), 0) {
		t.Fatal("Contains wrong")
	}
	if a.Len() != 3 || !asg(2, 0).SubsetOf(a) || b.SubsetOf(a) || Assignment(nil).Len() != 0 {
		t.Fatal("Len/SubsetOf wrong")
	}
	if len(a.Minus(a)) != 0 {
		t.Fatal("a − a must hold no topics (no empty lists)")
	}
}

func equalLists(a, b []TopicPartitions) bool {
	return slices.EqualFunc(a, b, func(x, y TopicPartitions) bool {
		return x.Topic == y.Topic && slices.Equal(x.Partitions, y.Partitions)
	})
}

func TestSpecForResolvesNames(t *testing.T) {
	topics := topicsMeta(map[byte]int32{1: 3, 2: 1})
	sub := MemberSubscription{MemberID: "m", InstanceID: "i", Topics: []string{"t2", "missing", "t1", "t2"}, Regex: "t.*"}
	spec := SpecFor(sub, topics, asg(1, 0))
	if !slices.Equal(spec.Topics, []TopicID{tid(1), tid(2)}) {
		t.Fatalf("Topics = %v", spec.Topics)
	}
	if spec.MemberID != "m" || spec.InstanceID != "i" || !spec.Current.Equal(asg(1, 0)) {
		t.Fatalf("spec = %+v", spec)
	}
}
