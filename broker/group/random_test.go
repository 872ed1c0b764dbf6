package group

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRandomInvariants drives the machine with random requests and ticks
// (deterministic seeds) and checks its invariants after every step.
func TestRandomInvariants(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRun(t, rand.New(rand.NewPCG(seed, seed))) })
	}
}

func randomRun(t *testing.T, rng *rand.Rand) {
	ids := 0
	m := NewMachine(MachineConfig{
		InitialRebalanceDelayMs: 300, MinSessionTimeoutMs: 1000, MaxSessionTimeoutMs: 10000, OffsetsRetentionMs: 5000,
		NewMemberID: func(p string) string { ids++; return fmt.Sprintf("%s-%d", p, ids) },
	})
	answered := map[uint64]bool{}
	generations := map[string]int32{}
	var now int64
	var req uint64
	for step := 0; step < 400; step++ {
		now += int64(rng.IntN(700))
		req++
		randomStep(m, rng, now, req)
		for _, r := range m.Ready().Responses {
			if answered[r.Req] {
				t.Fatalf("step %d: request %d answered twice", step, r.Req)
			}
			answered[r.Req] = true
		}
		checkInvariants(t, m, generations)
	}
}

// randomStep sends one random input about one of two groups, naming
// members that exist (or existed) and static instances i0..i2.
func randomStep(m *Machine, rng *rand.Rand, now int64, req uint64) {
	group := []string{"a", "b"}[rng.IntN(2)]
	var known []string
	if g := m.groups[group]; g != nil {
		known = append(append(known, g.order...), "stale-1")
		for id := range g.pending {
			known = append(known, id)
		}
	}
	pick := func() string {
		if len(known) == 0 || rng.IntN(5) == 0 {
			return ""
		}
		return known[rng.IntN(len(known))]
	}
	instance := ""
	if rng.IntN(3) == 0 {
		instance = fmt.Sprintf("i%d", rng.IntN(3))
	}
	gen := int32(rng.IntN(4))
	if g := m.groups[group]; g != nil && rng.IntN(10) < 7 {
		gen = g.generation // mostly the right one, so groups reach Stable
	}
	protocols := [][]Protocol{{{"range", []byte("r")}}, {{"roundrobin", []byte("x")}, {"range", []byte("y")}}}[rng.IntN(2)]
	switch rng.IntN(8) {
	case 0, 1:
		m.Join(now, req, JoinInput{Group: group, MemberID: pick(), InstanceID: instance, ClientID: "c", ProtocolType: "consumer",
			Protocols: protocols, SessionTimeoutMs: 1000 + int32(rng.IntN(3000)), RebalanceTimeoutMs: 2000, RequireKnownMemberID: rng.IntN(2) == 0})
	case 2:
		id := pick()
		m.Sync(now, req, SyncInput{Group: group, MemberID: id, InstanceID: instance, Generation: gen,
			Assignments: []Assignment{{MemberID: id, Assignment: []byte("a")}}})
	case 3:
		m.Heartbeat(now, group, gen, MemberRef{MemberID: pick(), InstanceID: instance})
	case 4:
		m.Leave(now, group, []MemberRef{{MemberID: pick(), InstanceID: instance}})
	case 5:
		m.Commit(now, CommitInput{Group: group, Generation: gen - 1, Member: MemberRef{MemberID: pick()},
			Offsets: map[TopicPartition]Offset{{"t", 0}: {Offset: int64(req)}}})
	case 6:
		m.Tick(now)
	default:
		m.ExpireOffsets(now, func(string) bool { return true })
		m.DeleteGroup(now, group)
	}
}

func checkInvariants(t *testing.T, m *Machine, generations map[string]int32) {
	t.Helper()
	for id := range generations {
		if m.groups[id] == nil {
			delete(generations, id) // deleted: a new group may start over
		}
	}
	for id, g := range m.groups {
		if g.generation < generations[id] {
			t.Fatalf("group %s: generation went back from %d to %d", id, generations[id], g.generation)
		}
		generations[id] = g.generation
		if len(g.order) != len(g.members) {
			t.Fatalf("group %s: order %v vs %d members", id, g.order, len(g.members))
		}
		for inst, mid := range g.instances {
			if mb := g.members[mid]; mb == nil || mb.instanceID != inst {
				t.Fatalf("group %s: instance %s maps to %s, not a member with that instance", id, inst, mid)
			}
		}
		switch g.state {
		case StateEmpty:
			if len(g.members) != 0 {
				t.Fatalf("group %s: Empty with members %v", id, g.order)
			}
		case StateCompletingRebalance, StateStable:
			if g.members[g.leader] == nil {
				t.Fatalf("group %s: %s with leader %q not a member", id, g.state, g.leader)
			}
			for _, mid := range g.order {
				if !g.members[mid].supports(g.protocol) {
					t.Fatalf("group %s: member %s does not support %s", id, mid, g.protocol)
				}
				if g.state == StateStable && g.members[mid].syncReq != 0 {
					t.Fatalf("group %s: Stable with a held sync", id)
				}
			}
		}
		if g.state != StateCompletingRebalance && slices.ContainsFunc(g.order, func(mid string) bool { return g.members[mid].syncReq != 0 }) {
			t.Fatalf("group %s: held sync outside CompletingRebalance", id)
		}
	}
}
