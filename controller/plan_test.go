package controller

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/metadata"
)

// broker is a live registration; epoch = 100*id (+ restarts) so that
// goldens read easily.
func broker(id int32, epoch int64) metadata.BrokerInfo {
	return metadata.BrokerInfo{NodeID: id, Host: "127.0.0.1", Port: 9000 + id, Epoch: epoch}
}

func draining(b metadata.BrokerInfo) metadata.BrokerInfo { b.Draining = true; return b }

// state is a stored state at version 7 unless version says otherwise.
func state(leader int32, epoch int32, brokerEpoch int64, replicas, isr []int32) metadata.PartitionState {
	return metadata.PartitionState{Leader: leader, LeaderEpoch: epoch, LeaderBrokerEpoch: brokerEpoch,
		Replicas: replicas, ISR: isr, Version: 7}
}

func ids(v ...int32) []int32 { return v }

func oneTopic(configs map[string]string, states ...metadata.PartitionState) []TopicView {
	t := metadata.Topic{Name: "t", ID: metadata.TopicID{1}, Configs: configs}
	for _, st := range states {
		t.Replicas = append(t.Replicas, st.Replicas)
	}
	return []TopicView{{Topic: t, States: states}}
}

var unclean = map[string]string{"unclean.leader.election.enable": "true"}

// planCases are golden: want lists Change.String() of every change.
var planCases = []struct {
	name    string
	brokers []metadata.BrokerInfo
	topics  []TopicView
	want    []string
}{
	{"healthy: nothing to do",
		[]metadata.BrokerInfo{broker(1, 100), broker(2, 200)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2), ids(1, 2))),
		nil},
	{"dead leader: next ISR member in assignment order, epoch+1",
		[]metadata.BrokerInfo{broker(2, 200), broker(3, 300)},
		oneTopic(nil, state(1, 3, 100, ids(1, 3, 2), ids(1, 2, 3))),
		[]string{"t/0 v7: leader 1→3 epoch 3→4 (broker epoch 100→300) isr [1 2 3]→[2 3]: leader 1 not registered; elected 3 from the ISR; isr drops [1] (not registered or draining)"}},
	{"restarted leader: re-elected itself with epoch+1",
		[]metadata.BrokerInfo{broker(1, 101), broker(2, 200)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2), ids(1, 2))),
		[]string{"t/0 v7: leader 1 epoch 3→4 (broker epoch 100→101): leader 1 re-registered; elected 1 from the ISR"}},
	{"restarted leader out of the ISR: another member",
		[]metadata.BrokerInfo{broker(1, 101), broker(2, 200)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2), ids(2))),
		[]string{"t/0 v7: leader 1→2 epoch 3→4 (broker epoch 100→200): leader 1 re-registered; elected 2 from the ISR"}},
	{"initial state: first replica elected, epoch stays 0",
		[]metadata.BrokerInfo{broker(1, 100), broker(2, 200)},
		oneTopic(nil, metadata.InitialPartitionState(ids(1, 2))),
		[]string{"t/0 v0: leader 1 epoch 0→0 (broker epoch 0→100): leader 1 never elected (initial state); elected 1 from the ISR"}},
	{"initial state, first replica not registered",
		[]metadata.BrokerInfo{broker(2, 200)},
		oneTopic(nil, metadata.InitialPartitionState(ids(1, 2))),
		[]string{"t/0 v0: leader 1→2 epoch 0→0 (broker epoch 0→200) isr [1 2]→[2]: leader 1 not registered; elected 2 from the ISR; isr drops [1] (not registered or draining)"}},
	{"initial state, no replica registered: left unwritten",
		[]metadata.BrokerInfo{broker(3, 300)},
		oneTopic(nil, metadata.InitialPartitionState(ids(1, 2))),
		nil},
	{"draining leader moves to a serving ISR member",
		[]metadata.BrokerInfo{draining(broker(1, 100)), broker(2, 200)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2), ids(1, 2))),
		[]string{"t/0 v7: leader 1→2 epoch 3→4 (broker epoch 100→200) isr [1 2]→[2]: leader 1 draining; elected 2 from the ISR; isr drops [1] (not registered or draining)"}},
	{"draining leader stays when no other ISR member serves",
		[]metadata.BrokerInfo{draining(broker(1, 100)), broker(2, 200)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2), ids(1))),
		nil},
	{"dead and draining followers leave the ISR, epoch unchanged",
		[]metadata.BrokerInfo{broker(1, 100), draining(broker(3, 300))},
		oneTopic(nil, state(1, 3, 100, ids(1, 2, 3), ids(1, 2, 3))),
		[]string{"t/0 v7: leader 1 isr [1 2 3]→[1]: isr drops [2 3] (not registered or draining)"}},
	{"dead leader, only a draining ISR member left: it leads rather than nobody",
		[]metadata.BrokerInfo{draining(broker(2, 200)), broker(3, 300)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2, 3), ids(1, 2))),
		[]string{"t/0 v7: leader 1→2 epoch 3→4 (broker epoch 100→200) isr [1 2]→[2]: leader 1 not registered; elected 2 from the ISR; isr drops [1] (not registered or draining)"}},
	{"no eligible ISR member, unclean off: leader -1, last member kept",
		[]metadata.BrokerInfo{broker(3, 300)},
		oneTopic(nil, state(1, 3, 100, ids(1, 2, 3), ids(2, 1))),
		[]string{"t/0 v7: leader 1→-1 epoch 3→4 (broker epoch 100→0) isr [2 1]→[1]: leader 1 not registered; no eligible replica; isr drops [2] (not registered or draining)"}},
	{"no eligible ISR member, unclean on: first live replica, ISR = [it]",
		[]metadata.BrokerInfo{broker(3, 300)},
		oneTopic(unclean, state(1, 3, 100, ids(1, 2, 3), ids(1, 2))),
		[]string{"t/0 v7: leader 1→3 epoch 3→4 (broker epoch 100→300) isr [1 2]→[3]: leader 1 not registered; unclean election of 3"}},
	{"unparsable topic configs: unclean stays off",
		[]metadata.BrokerInfo{broker(3, 300)},
		oneTopic(map[string]string{"unclean.leader.election.enable": "true", "retention.ms": "soon"},
			state(1, 3, 100, ids(1, 2, 3), ids(1))),
		[]string{"t/0 v7: leader 1→-1 epoch 3→4 (broker epoch 100→0): leader 1 not registered; no eligible replica"}},
	{"leaderless partition: the kept ISR member returns and leads",
		[]metadata.BrokerInfo{broker(2, 201), broker(3, 300)},
		oneTopic(nil, state(-1, 4, 0, ids(1, 2, 3), ids(2))),
		[]string{"t/0 v7: leader -1→2 epoch 4→5 (broker epoch 0→201): no leader; elected 2 from the ISR"}},
	{"leaderless partition, nobody eligible: nothing",
		[]metadata.BrokerInfo{broker(3, 300)},
		oneTopic(nil, state(-1, 4, 0, ids(1, 2, 3), ids(2))),
		nil},
	{"several topics: name then partition order",
		[]metadata.BrokerInfo{broker(2, 200)},
		append(oneTopicNamed("b", state(1, 1, 100, ids(1, 2), ids(1, 2)), state(2, 1, 200, ids(2, 1), ids(2, 1))),
			oneTopicNamed("a", state(1, 1, 100, ids(1, 2), ids(1, 2)))...),
		[]string{
			"a/0 v7: leader 1→2 epoch 1→2 (broker epoch 100→200) isr [1 2]→[2]: leader 1 not registered; elected 2 from the ISR; isr drops [1] (not registered or draining)",
			"b/0 v7: leader 1→2 epoch 1→2 (broker epoch 100→200) isr [1 2]→[2]: leader 1 not registered; elected 2 from the ISR; isr drops [1] (not registered or draining)",
			"b/1 v7: leader 2 isr [2 1]→[2]: isr drops [1] (not registered or draining)",
		}},
}

func oneTopicNamed(name string, states ...metadata.PartitionState) []TopicView {
	tv := oneTopic(nil, states...)
	tv[0].Topic.Name = name
	tv[0].Topic.ID = metadata.TopicID{byte(name[0])}
	return tv
}

func TestPlanGolden(t *testing.T) {
	for _, tc := range planCases {
		t.Run(tc.name, func(t *testing.T) {
			v := View{Brokers: tc.brokers, Topics: tc.topics}
			changes := Plan(v)
			var got []string
			for _, c := range changes {
				got = append(got, c.String())
				if c.New.Version != c.Old.Version {
					t.Errorf("change %s: New.Version %d, want the CAS expectation %d", c, c.New.Version, c.Old.Version)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("plan:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if again := Plan(applyChanges(v, changes)); len(again) != 0 {
				t.Fatalf("not idempotent: second plan %v", again)
			}
		})
	}
}

// applyChanges writes changes into a copy of v as the store would (new
// Version).
func applyChanges(v View, changes []Change) View {
	out := View{Brokers: v.Brokers}
	byID := map[metadata.TopicID]int{}
	for i, tv := range v.Topics {
		out.Topics = append(out.Topics, TopicView{Topic: tv.Topic, States: slices.Clone(tv.States)})
		byID[tv.Topic.ID] = i
	}
	for _, c := range changes {
		st := c.New
		st.Version = c.Old.Version + 1000
		out.Topics[byID[c.TopicID]].States[c.Partition] = st
	}
	return out
}

// TestPlanProperties plans random clusters and checks the invariants of
// the result and idempotence.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 3000 {
		v := randomView(rng)
		changes := Plan(v)
		after := applyChanges(v, changes)
		if again := Plan(after); len(again) != 0 {
			t.Fatalf("round %d: not idempotent:\nview %+v\nfirst %v\nsecond %v", round, v, changes, again)
		}
		live := liveness{}
		for _, b := range v.Brokers {
			live[b.NodeID] = b
		}
		for i, c := range changes {
			checkChange(t, c, live, v.Topics[0].Topic.Configs != nil, round, i)
		}
	}
}

func checkChange(t *testing.T, c Change, live liveness, unclean bool, round, i int) {
	t.Helper()
	n := c.New
	fail := func(what string) { t.Fatalf("round %d change %d %s: %s", round, i, c, what) }
	if len(n.ISR) == 0 {
		fail("empty ISR")
	}
	if n.LeaderEpoch < c.Old.LeaderEpoch {
		fail("epoch went down")
	}
	leaderChanged := n.Leader != c.Old.Leader || n.LeaderBrokerEpoch != c.Old.LeaderBrokerEpoch
	firstClaim := c.Old.Version == 0 && c.Old.LeaderBrokerEpoch == 0
	if wantRise := leaderChanged && !firstClaim; wantRise != (n.LeaderEpoch == c.Old.LeaderEpoch+1) {
		fail("epoch must rise by one exactly at a leader change other than an initial state's first election")
	}
	if firstClaim && n.LeaderEpoch != c.Old.LeaderEpoch {
		fail("the first election of an initial state must keep its epoch")
	}
	if n.Leader >= 0 {
		if !slices.Contains(n.ISR, n.Leader) || n.LeaderBrokerEpoch != live[n.Leader].Epoch || !live.live(n.Leader) {
			fail("leader not a live ISR member with its epoch")
		}
		if !unclean && !slices.Contains(c.Old.ISR, n.Leader) {
			fail("unclean election with unclean off")
		}
	}
	for _, id := range n.ISR {
		if !slices.Contains(c.Old.ISR, id) && !(unclean && id == n.Leader) {
			fail("ISR grew")
		}
	}
}

func randomView(rng *rand.Rand) View {
	var brokers []metadata.BrokerInfo
	for id := int32(1); id <= 4; id++ {
		if rng.IntN(3) > 0 {
			b := broker(id, int64(id)*100+int64(rng.IntN(2)))
			b.Draining = rng.IntN(5) == 0
			brokers = append(brokers, b)
		}
	}
	var configs map[string]string
	if rng.IntN(2) == 0 {
		configs = unclean
	}
	var states []metadata.PartitionState
	for range 4 {
		replicas := rng.Perm(4)[:1+rng.IntN(3)]
		st := metadata.PartitionState{Version: int64(rng.IntN(2)) * 7, LeaderEpoch: int32(rng.IntN(3))}
		for _, r := range replicas {
			st.Replicas = append(st.Replicas, int32(r+1))
			if rng.IntN(3) > 0 || len(st.ISR) == 0 {
				st.ISR = append(st.ISR, int32(r+1))
			}
		}
		st.Leader = st.ISR[rng.IntN(len(st.ISR))]
		if rng.IntN(6) == 0 {
			st.Leader = -1
		}
		if st.Version == 0 { // initial states are what InitialPartitionState says
			st = metadata.InitialPartitionState(st.Replicas)
		} else if st.Leader >= 0 {
			st.LeaderBrokerEpoch = int64(st.Leader)*100 + int64(rng.IntN(2))
		}
		states = append(states, st)
	}
	return View{Brokers: brokers, Topics: oneTopic(configs, states...)}
}
