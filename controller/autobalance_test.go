package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/reassign"
)

// autoView is a settled cluster: brokers 1..n registered (epoch 100*id),
// and each topic's partitions with the replicas given, led by the first,
// every replica in sync.
func autoView(brokers int, topics map[string][][]int32) View {
	var v View
	for id := int32(1); id <= int32(brokers); id++ {
		v.Brokers = append(v.Brokers, broker(id, 100*int64(id)))
	}
	n := byte(0)
	for name, assignment := range topics {
		n++
		tv := TopicView{Topic: metadata.Topic{Name: name, ID: metadata.TopicID{n}, Revision: 3}}
		for _, replicas := range assignment {
			tv.Topic.Replicas = append(tv.Topic.Replicas, slices.Clone(replicas))
			tv.States = append(tv.States, state(replicas[0], 1, 100*int64(replicas[0]), slices.Clone(replicas), slices.Clone(replicas)))
		}
		v.Topics = append(v.Topics, tv)
	}
	return v
}

// roundRobin is partitions placed over brokers 1..brokers with rf replicas
// each, leaders rotating.
func roundRobin(partitions, brokers, rf int) [][]int32 {
	out := make([][]int32, partitions)
	for p := range out {
		for r := range rf {
			out[p] = append(out[p], int32((p+r)%brokers+1))
		}
	}
	return out
}

// applyRound writes the round's changes into v and finishes them as the
// cluster would: the added replicas catch up, the move completes and the
// preferred leader is elected (a reordering only needs the last).
func applyRound(v View, changes []Change) {
	for _, ch := range changes {
		for i := range v.Topics {
			tv := &v.Topics[i]
			if tv.Topic.ID != ch.TopicID {
				continue
			}
			st := ch.New
			st.Replicas = st.TargetReplicas()
			st.ISR = slices.Clone(st.Replicas)
			st.AddingReplicas, st.RemovingReplicas, st.ReassignStartMs = nil, nil, 0
			if st.Leader != st.Replicas[0] {
				st.Leader, st.LeaderBrokerEpoch = st.Replicas[0], 100*int64(st.Replicas[0])
				st.LeaderEpoch++
			}
			st.Version++
			tv.States[ch.Partition] = st
			tv.Topic.Replicas[ch.Partition] = slices.Clone(st.Replicas)
		}
	}
}

// playRounds runs AutoBalance rounds, each finished by applyRound, until
// one begins nothing; it fails t after limit rounds. It returns the
// rounds that moved something and the replicas they added in all.
func playRounds(t *testing.T, v View, maxMoves, limit int) (rounds, added int) {
	t.Helper()
	for {
		changes, waiting := AutoBalance(v, maxMoves, 1000)
		if len(changes) == 0 {
			if waiting != "" {
				t.Fatalf("after %d rounds: waiting for %q on a settled view", rounds, waiting)
			}
			return rounds, added
		}
		if len(changes) > maxMoves {
			t.Fatalf("round %d begins %d moves, more than %d", rounds+1, len(changes), maxMoves)
		}
		for _, ch := range changes {
			if !ch.ChangesAssignment() || len(ch.New.TargetReplicas()) != len(ch.Old.Replicas) {
				t.Fatalf("round %d: %v does not move the partition to as many replicas", rounds+1, ch)
			}
			added += len(ch.New.AddingReplicas)
		}
		applyRound(v, changes)
		if rounds++; rounds > limit {
			t.Fatalf("still moving after %d rounds: %v", limit, changes)
		}
	}
}

// clusterOf is v as the planner sees it.
func clusterOf(v View) reassign.Cluster {
	c, _ := balanceInput(v)
	return c
}

// A fourth broker joins three that hold a 12-partition RF=3 topic: rounds
// of at most 4 moves each bring every broker within the band of 9±1
// replicas and 3±1 preferred leaderships, adding no more replicas than the one plan
// of `cluster balance` does, and then stop.
func TestAutoBalanceSpreadsOntoANewBroker(t *testing.T) {
	v := autoView(4, map[string][][]int32{"orders": roundRobin(12, 3, 3)})
	plan := reassign.BalanceEachTopic(clusterOf(v))
	planned := 0
	for _, m := range plan {
		for _, id := range m.To {
			if !slices.Contains(m.From, id) {
				planned++
			}
		}
	}
	rounds, added := playRounds(t, v, 4, 10)
	if rounds < 2 || added != planned {
		t.Fatalf("%d rounds added %d replicas; want several rounds of at most 4 moves adding the %d that one plan adds (%d moves)",
			rounds, added, planned, len(plan))
	}
	for _, l := range reassign.Loads(clusterOf(v)) {
		if l.Replicas < 8 || l.Replicas > 10 || l.Leaders < 2 || l.Leaders > 4 {
			t.Fatalf("after %d rounds: %+v; want 9±1 replicas and 3±1 preferred leaderships on every broker", rounds, reassign.Loads(clusterOf(v)))
		}
	}
	for _, tv := range v.Topics {
		for p, st := range tv.States {
			if st.Leader != st.Replicas[0] {
				t.Fatalf("%s/%d: leader %d, preferred %d", tv.Topic.Name, p, st.Leader, st.Replicas[0])
			}
		}
	}
}

// The rounds converge on random clusters too (brokers added to a cluster
// with several topics, of replication factors 1 to 3): every round within
// its bound, no more replicas added in all than the one plan adds (a round
// cut short churns nothing), and at the end nothing left to plan.
func TestAutoBalanceConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 1))
	for trial := range 200 {
		before := 2 + rng.IntN(4)
		topics := map[string][][]int32{}
		for n := range 1 + rng.IntN(3) {
			rf := 1 + rng.IntN(min(3, before))
			topics[fmt.Sprintf("t%d", n)] = roundRobin(1+rng.IntN(24), before, rf)
		}
		v := autoView(before+1+rng.IntN(3), topics)
		planned := 0
		for _, m := range reassign.BalanceEachTopic(clusterOf(v)) {
			for _, id := range m.To {
				if !slices.Contains(m.From, id) {
					planned++
				}
			}
		}
		maxMoves := 1 + rng.IntN(5)
		rounds, added := playRounds(t, v, maxMoves, 100)
		if added > planned {
			t.Fatalf("trial %d (%d→%d brokers, at most %d moves a round): %d rounds added %d replicas, one plan adds %d",
				trial, before, len(v.Brokers), maxMoves, rounds, added, planned)
		}
		if again := reassign.BalanceEachTopic(clusterOf(v)); len(again) != 0 {
			t.Fatalf("trial %d: AutoBalance stopped with moves left to plan: %v", trial, again)
		}
	}
}

// It begins nothing until the cluster is settled, and says why.
func TestAutoBalanceWaitsForASettledCluster(t *testing.T) {
	unbalanced := func() View { return autoView(4, map[string][][]int32{"orders": roundRobin(12, 3, 3)}) }
	cases := map[string]struct {
		change func(v *View)
		want   string
	}{
		"a move runs": {func(v *View) {
			v.Topics[0].States[3], _ = Reassign(v.Topics[0].States[3], ids(4, 1, 2), 1)
		}, "orders/3 is being reassigned"},
		"under-replicated": {func(v *View) { v.Topics[0].States[5].ISR = ids(3, 1) }, "orders/5 is under-replicated"},
		"a replica's broker is down": {func(v *View) {
			v.Brokers = slices.DeleteFunc(v.Brokers, func(b metadata.BrokerInfo) bool { return b.NodeID == 2 })
		}, "partition changes pending"},
		"a replica's broker drains": {func(v *View) { v.Brokers[1] = draining(v.Brokers[1]) }, "partition changes pending"},
		"a leader to elect":         {func(v *View) { v.Topics[0].States[0].LeaderBrokerEpoch = 7 }, "partition changes pending"},
	}
	for name, tc := range cases {
		v := unbalanced()
		tc.change(&v)
		changes, waiting := AutoBalance(v, 10, 1000)
		if len(changes) != 0 || !strings.Contains(waiting, tc.want) {
			t.Errorf("%s: %d changes, waiting %q; want none, waiting for %q", name, len(changes), waiting, tc.want)
		}
	}
	// A single replica on a draining broker: Plan keeps it leading (no
	// other replica could) and its ISR is whole, yet it waits.
	v := autoView(4, map[string][][]int32{"orders": roundRobin(12, 2, 2), "solo": {{3}}})
	v.Brokers[2] = draining(v.Brokers[2])
	if changes, waiting := AutoBalance(v, 10, 1000); len(changes) != 0 || waiting != "broker 3, a replica of solo/0, is not serving" {
		t.Errorf("with solo/0 on draining broker 3: %v, waiting %q", changes, waiting)
	}
}

// A balanced cluster gives nothing; a draining broker that holds nothing
// receives nothing.
func TestAutoBalanceLeavesBalancedAndDrainingBrokersAlone(t *testing.T) {
	balanced := autoView(3, map[string][][]int32{"orders": roundRobin(12, 3, 3)})
	if changes, waiting := AutoBalance(balanced, 10, 1000); len(changes) != 0 || waiting != "" {
		t.Fatalf("balanced: %v, waiting %q", changes, waiting)
	}
	v := autoView(4, map[string][][]int32{"orders": roundRobin(12, 2, 2)})
	v.Brokers[3] = draining(v.Brokers[3])
	changes, _ := AutoBalance(v, 100, 1000)
	if len(changes) == 0 {
		t.Fatal("brokers 1 and 2 hold everything and broker 3 nothing: want moves onto 3")
	}
	for _, ch := range changes {
		if slices.Contains(ch.New.Replicas, 4) {
			t.Fatalf("%v moves a replica onto draining broker 4", ch)
		}
		if ch.New.ReassignStartMs != 1000 || ch.topic.Revision != 3 {
			t.Fatalf("%v: start %d, topic record at revision %d", ch, ch.New.ReassignStartMs, ch.topic.Revision)
		}
	}
}

// The decision does not depend on the order of the View's topics.
func TestAutoBalanceIsDeterministic(t *testing.T) {
	v := autoView(4, map[string][][]int32{"a": roundRobin(6, 3, 3), "b": roundRobin(9, 3, 2), "c": roundRobin(3, 3, 1)})
	first, _ := AutoBalance(v, 5, 1000)
	slices.Reverse(v.Topics)
	second, _ := AutoBalance(v, 5, 1000)
	if len(first) != 5 || fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("topic order changed the decision:\n%v\n%v", first, second)
	}
}
