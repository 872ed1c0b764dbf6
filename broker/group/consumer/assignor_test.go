package consumer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func specs(subs map[string][]byte) []MemberSpec {
	var out []MemberSpec
	for id, ts := range subs {
		m := MemberSpec{MemberID: id}
		for _, n := range ts {
			m.Topics = append(m.Topics, tid(n))
		}
		out = append(out, m)
	}
	return out
}

func TestRangeAssignor(t *testing.T) {
	cases := []struct {
		name   string
		topics map[byte]int32
		subs   map[string][]byte
		want   map[string]Assignment
	}{
		{"co-partitioned topics line up", map[byte]int32{1: 3, 2: 3},
			map[string][]byte{"b": {1, 2}, "a": {1, 2}},
			map[string]Assignment{"a": asg(1, 0, 1, -1, 2, 0, 1), "b": asg(1, 2, -1, 2, 2)}},
		{"more members than partitions", map[byte]int32{1: 2},
			map[string][]byte{"a": {1}, "b": {1}, "c": {1}},
			map[string]Assignment{"a": asg(1, 0), "b": asg(1, 1), "c": {}}},
		{"per-topic subscribers", map[byte]int32{1: 4, 2: 2},
			map[string][]byte{"a": {1}, "b": {1, 2}, "c": {2}},
			map[string]Assignment{"a": asg(1, 0, 1), "b": asg(1, 2, 3, -1, 2, 0), "c": asg(2, 1)}},
		{"unknown and empty topics ignored", map[byte]int32{1: 1, 3: 0},
			map[string][]byte{"a": {1, 2, 3}},
			map[string]Assignment{"a": asg(1, 0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Range{}.Assign(specs(c.subs), topicsMeta(c.topics))
			for id, want := range c.want {
				if !got[id].Equal(want) {
					t.Errorf("%s: got %v, want %v", id, got[id].List(), want.List())
				}
			}
			checkAssignment(t, specs(c.subs), topicsMeta(c.topics), got)
		})
	}
}

func TestUniformBalancedHomogeneous(t *testing.T) {
	for _, members := range []int{1, 2, 3, 5, 8} {
		for _, parts := range []int32{0, 1, 4, 7, 16} {
			topics := topicsMeta(map[byte]int32{1: parts, 2: parts / 2})
			var ms []MemberSpec
			for i := range members {
				ms = append(ms, MemberSpec{MemberID: fmt.Sprintf("m%d", i), Topics: []TopicID{tid(1), tid(2)}})
			}
			got := Uniform{}.Assign(ms, topics)
			checkAssignment(t, ms, topics, got)
			if lo, hi := spread(got); hi-lo > 1 {
				t.Errorf("%d members, %d partitions: counts %d..%d", members, parts, lo, hi)
			}
		}
	}
}

func spread(a map[string]Assignment) (lo, hi int) {
	lo = 1 << 30
	for _, x := range a {
		lo, hi = min(lo, x.Len()), max(hi, x.Len())
	}
	return lo, hi
}

// TestUniformSticky: after a member joins or leaves, every remaining member
// keeps min(its old count, its new count) of its old partitions: only what
// must move moves.
func TestUniformSticky(t *testing.T) {
	topics := topicsMeta(map[byte]int32{1: 7, 2: 6})
	all := []TopicID{tid(1), tid(2)}
	ms := []MemberSpec{{MemberID: "a", Topics: all}, {MemberID: "b", Topics: all}, {MemberID: "c", Topics: all}}
	prev := Uniform{}.Assign(ms, topics)
	steps := []struct {
		name string
		edit func([]MemberSpec) []MemberSpec
	}{
		{"join d", func(m []MemberSpec) []MemberSpec { return append(m, MemberSpec{MemberID: "d", Topics: all}) }},
		{"join e", func(m []MemberSpec) []MemberSpec { return append(m, MemberSpec{MemberID: "e", Topics: all}) }},
		{"leave b", func(m []MemberSpec) []MemberSpec { return append(m[:1:1], m[2:]...) }},
		{"leave a", func(m []MemberSpec) []MemberSpec { return m[1:] }},
	}
	for _, s := range steps {
		ms = s.edit(ms)
		for i := range ms {
			ms[i].Current = prev[ms[i].MemberID]
		}
		got := Uniform{}.Assign(ms, topics)
		checkAssignment(t, ms, topics, got)
		if lo, hi := spread(got); hi-lo > 1 {
			t.Fatalf("%s: unbalanced %d..%d", s.name, lo, hi)
		}
		for _, m := range ms {
			kept := got[m.MemberID].Intersect(m.Current).Len()
			if want := min(m.Current.Len(), got[m.MemberID].Len()); kept != want {
				t.Errorf("%s: %s kept %d of %v, want %d", s.name, m.MemberID, kept, m.Current.List(), want)
			}
		}
		prev = got
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	topics := topicsMeta(map[byte]int32{1: 6, 2: 6, 3: 2})
	ms := specs(map[string][]byte{"a": {1}, "b": {1, 2}, "c": {2, 3}, "d": {1, 2, 3}})
	got := Uniform{}.Assign(ms, topics)
	checkAssignment(t, ms, topics, got)
	// 14 partitions over 4 members, every member can reach 3 or 4.
	if lo, hi := spread(got); hi-lo > 1 {
		t.Fatalf("counts %d..%d: %v", lo, hi, got)
	}
	// A member subscribed to a topic nobody else wants gets all of it.
	ms = specs(map[string][]byte{"a": {1}, "b": {2}})
	got = Uniform{}.Assign(ms, topics)
	if !got["a"].Equal(asg(1, 0, 1, 2, 3, 4, 5)) || !got["b"].Equal(asg(2, 0, 1, 2, 3, 4, 5)) {
		t.Fatalf("got %v", got)
	}
}

// TestAssignorsRandomized: on random inputs both assignors give a valid
// assignment, the same one whatever the member order, and uniform balances
// homogeneous groups.
func TestAssignorsRandomized(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for iter := range 300 {
		topics := map[byte]int32{}
		for n := byte(1); n <= byte(1+rng.IntN(4)); n++ {
			topics[n] = int32(rng.IntN(9))
		}
		meta := topicsMeta(topics)
		homogeneous := iter%2 == 0
		ms := randomSpecs(rng, len(topics), homogeneous)
		for _, a := range []Assignor{Uniform{}, Range{}} {
			got := a.Assign(ms, meta)
			checkAssignment(t, ms, meta, got)
			shuffled := append([]MemberSpec(nil), ms...)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			again := a.Assign(shuffled, meta)
			for id := range got {
				if !got[id].Equal(again[id]) {
					t.Fatalf("%s not deterministic for %s", a.Name(), id)
				}
			}
			if lo, hi := spread(got); a.Name() == UniformName && homogeneous && len(ms) > 0 && hi-lo > 1 {
				t.Fatalf("uniform unbalanced %d..%d", lo, hi)
			}
		}
	}
}

// randomSpecs: up to 6 members with random current assignments (possibly
// overlapping or stale) and, unless homogeneous, random subscriptions.
func randomSpecs(rng *rand.Rand, topics int, homogeneous bool) []MemberSpec {
	var ms []MemberSpec
	for i := range rng.IntN(7) {
		m := MemberSpec{MemberID: fmt.Sprintf("m%d", i)}
		for n := 1; n <= topics; n++ {
			if homogeneous || rng.IntN(2) == 0 {
				m.Topics = append(m.Topics, tid(byte(n)))
			}
		}
		var cur []TopicPartition
		for range rng.IntN(5) {
			cur = append(cur, TopicPartition{tid(byte(1 + rng.IntN(topics+1))), int32(rng.IntN(10))})
		}
		m.Current = NewAssignment(cur...)
		ms = append(ms, m)
	}
	return ms
}

func TestAssignorByName(t *testing.T) {
	for _, name := range []string{UniformName, RangeName} {
		if a, ok := AssignorByName(name); !ok || a.Name() != name {
			t.Fatalf("AssignorByName(%q) = %v, %v", name, a, ok)
		}
	}
	if _, ok := AssignorByName("cooperative-sticky"); ok {
		t.Fatal("unknown name accepted")
	}
}

// BenchmarkUniformJoin: one member joins a 100-member group consuming
// 10 topics of 100 partitions.
func BenchmarkUniformJoin(b *testing.B) {
	counts := map[byte]int32{}
	var all []TopicID
	for n := byte(1); n <= 10; n++ {
		counts[n] = 100
		all = append(all, tid(n))
	}
	topics := topicsMeta(counts)
	var ms []MemberSpec
	for i := range 100 {
		ms = append(ms, MemberSpec{MemberID: fmt.Sprintf("m%03d", i), Topics: all})
	}
	prev := Uniform{}.Assign(ms, topics)
	for i := range ms {
		ms[i].Current = prev[ms[i].MemberID]
	}
	ms = append(ms, MemberSpec{MemberID: "new", Topics: all})
	for b.Loop() {
		Uniform{}.Assign(ms, topics)
	}
}
