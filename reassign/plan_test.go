package reassign

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// roundRobin is a topic placed the way a broker places a new one: replica
// j of partition i on broker (i+j) mod n, leader the first.
func roundRobin(topic string, partitions, rf int, brokers []int32) []Partition {
	var out []Partition
	for i := range partitions {
		var replicas []int32
		for j := range rf {
			replicas = append(replicas, brokers[(i+j)%len(brokers)])
		}
		out = append(out, Partition{Topic: topic, Partition: int32(i), Replicas: replicas, Leader: replicas[0]})
	}
	return out
}

func brokers(racks ...string) []Broker {
	var out []Broker
	for i, r := range racks {
		out = append(out, Broker{ID: int32(i + 1), Rack: r})
	}
	return out
}

// checkPlan fails t unless moves keep the invariants of doc.go for c.
func checkPlan(t *testing.T, c Cluster, moves []Move) {
	t.Helper()
	given := map[string][]int32{}
	for _, p := range c.Partitions {
		given[fmt.Sprintf("%s/%d", p.Topic, p.Partition)] = p.Replicas
	}
	known := map[int32]bool{}
	for _, b := range c.Brokers {
		known[b.ID] = true
	}
	for i, m := range moves {
		name := fmt.Sprintf("%s/%d", m.Topic, m.Partition)
		if i > 0 && (moves[i-1].Topic > m.Topic || moves[i-1].Topic == m.Topic && moves[i-1].Partition >= m.Partition) {
			t.Fatalf("moves not sorted, one per partition: %v before %s", moves[i-1], name)
		}
		if !slices.Equal(m.From, given[name]) {
			t.Fatalf("%s: From %v, want the given replicas %v", name, m.From, given[name])
		}
		if len(m.To) != len(m.From) {
			t.Fatalf("%s: %v → %v changes the replication factor", name, m.From, m.To)
		}
		seen := map[int32]bool{}
		for _, id := range m.To {
			if seen[id] {
				t.Fatalf("%s: To %v names broker %d twice", name, m.To, id)
			}
			seen[id] = true
			if !known[id] && !slices.Contains(m.From, id) {
				t.Fatalf("%s: To %v names unknown broker %d", name, m.To, id)
			}
		}
	}
}

// checkBalanced fails t unless every listed broker's replicas and leaders
// are within ±1 of the even share over the brokers in c.
func checkBalanced(t *testing.T, c Cluster) {
	t.Helper()
	loads := Loads(c)
	replicas, leaders := 0, 0
	for _, l := range loads {
		replicas += l.Replicas
		leaders += l.Leaders
	}
	n := float64(len(c.Brokers))
	for _, l := range loads {
		if d := float64(l.Replicas) - float64(replicas)/n; d < -1 || d > 1 {
			t.Errorf("broker %d holds %d replicas, even share %.2f: %+v", l.Broker, l.Replicas, float64(replicas)/n, loads)
		}
		if d := float64(l.Leaders) - float64(leaders)/n; d < -1 || d > 1 {
			t.Errorf("broker %d leads %d, even share %.2f: %+v", l.Broker, l.Leaders, float64(leaders)/n, loads)
		}
	}
}

func TestBalance(t *testing.T) {
	ids := func(ids ...int32) []int32 { return ids }
	tests := []struct {
		name      string
		cluster   Cluster
		maxMoves  int  // plan size bound (fewest moves)
		reordered bool // every move only reorders replicas
	}{{
		name: "fourth broker added to a 12-partition RF=3 topic",
		cluster: Cluster{Brokers: brokers("", "", "", ""),
			Partitions: roundRobin("orders", 12, 3, ids(1, 2, 3))},
		maxMoves: 9,
	}, {
		name: "racks: all replicas on two racks of three",
		cluster: Cluster{Brokers: brokers("a", "a", "b", "b", "c", "c"),
			Partitions: roundRobin("t", 6, 3, ids(1, 2, 3, 4))},
		maxMoves: 6,
	}, {
		name: "fewer racks than replicas: at most two per rack",
		cluster: Cluster{Brokers: brokers("a", "a", "a", "b", "b", "b"),
			Partitions: roundRobin("t", 6, 3, ids(1, 2, 3))},
		maxMoves: 6,
	}, {
		name: "only leadership uneven: reorder, move no data",
		cluster: Cluster{Brokers: brokers("", "", ""), Partitions: []Partition{
			{Topic: "t", Partition: 0, Replicas: ids(1, 2, 3), Leader: 1},
			{Topic: "t", Partition: 1, Replicas: ids(1, 3, 2), Leader: 3},
			{Topic: "t", Partition: 2, Replicas: ids(1, 2, 3), Leader: 2},
			{Topic: "t", Partition: 3, Replicas: ids(1, 3, 2), Leader: 1},
			{Topic: "t", Partition: 4, Replicas: ids(1, 2, 3), Leader: 1},
			{Topic: "t", Partition: 5, Replicas: ids(1, 2, 3), Leader: 1},
		}},
		maxMoves:  4,
		reordered: true,
	}, {
		name: "two topics, one broker empty",
		cluster: Cluster{Brokers: brokers("", "", "", "", ""),
			Partitions: append(roundRobin("a", 5, 2, ids(1, 2, 3, 4)), roundRobin("b", 7, 3, ids(1, 2, 3, 4))...)},
		maxMoves: 12,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			moves := Balance(tt.cluster)
			checkPlan(t, tt.cluster, moves)
			after := Apply(tt.cluster, moves)
			checkBalanced(t, after)
			if v := RackViolations(after); len(v) > 0 {
				t.Errorf("racks crowded after the plan: %v", v)
			}
			if len(moves) > tt.maxMoves {
				t.Errorf("%d moves, want at most %d: %v", len(moves), tt.maxMoves, moves)
			}
			for _, m := range moves {
				if tt.reordered && !sameSet(m.From, m.To) {
					t.Errorf("%s/%d: %v → %v moves data; only leadership was uneven", m.Topic, m.Partition, m.From, m.To)
				}
			}
			if again := Balance(after); len(again) > 0 {
				t.Errorf("Balance of the balanced cluster plans %v, want nothing", again)
			}
			if !slices.EqualFunc(moves, Balance(shuffled(tt.cluster)), equalMove) {
				t.Errorf("the plan depends on the input order")
			}
		})
	}
}

// The acceptance shape in numbers: 9 replicas and 3 leaderships each,
// give or take one, and the current leaders kept where the plan allows.
func TestBalanceFourthBroker(t *testing.T) {
	c := Cluster{Brokers: brokers("", "", "", ""), Partitions: roundRobin("orders", 12, 3, []int32{1, 2, 3})}
	moves := Balance(c)
	for _, l := range Loads(Apply(c, moves)) {
		if l.Replicas < 8 || l.Replicas > 10 || l.Leaders < 2 || l.Leaders > 4 {
			t.Errorf("broker %d: %d replicas, %d leaders; want 9±1 and 3±1", l.Broker, l.Replicas, l.Leaders)
		}
	}
	kept := 0
	for _, m := range moves {
		if m.To[0] == m.From[0] {
			kept++
		}
	}
	if kept == 0 {
		t.Errorf("no moved partition keeps its leader: %v", moves)
	}
}

func TestBalanceBalancedIsIdempotent(t *testing.T) {
	for _, c := range []Cluster{
		{},
		{Brokers: brokers("", "", "")},
		{Brokers: brokers("", "", ""), Partitions: roundRobin("t", 12, 3, []int32{1, 2, 3})},
		{Brokers: brokers("a", "b", "c", "a", "b", "c"), Partitions: roundRobin("t", 30, 3, []int32{1, 2, 3, 4, 5, 6})},
		nearlyEven(),
	} {
		if moves := Balance(c); len(moves) > 0 {
			t.Errorf("Balance of a balanced cluster %+v plans %v", Loads(c), moves)
		}
	}
}

// A replica on a broker that is not listed (stopped) stays where it is and
// no replica goes there.
func TestBalanceKeepsUnknownBrokers(t *testing.T) {
	c := Cluster{Brokers: brokers("", "", ""), Partitions: []Partition{
		{Topic: "t", Partition: 0, Replicas: []int32{9, 1}, Leader: 9},
		{Topic: "t", Partition: 1, Replicas: []int32{1, 9}, Leader: 1},
		{Topic: "t", Partition: 2, Replicas: []int32{1, 2}, Leader: 1},
		{Topic: "t", Partition: 3, Replicas: []int32{1, 2}, Leader: 1},
	}}
	moves := Balance(c)
	checkPlan(t, c, moves)
	for _, m := range moves {
		if slices.Contains(m.From, 9) != slices.Contains(m.To, 9) {
			t.Errorf("%v → %v moves the replica on unknown broker 9", m.From, m.To)
		}
	}
}

func TestDrain(t *testing.T) {
	four := Cluster{Brokers: brokers("", "", "", ""), Partitions: roundRobin("orders", 12, 3, []int32{1, 2, 3})}
	balanced := Apply(four, Balance(four))
	racked := Cluster{Brokers: brokers("a", "b", "c", "a", "b", "c"),
		Partitions: roundRobin("t", 12, 3, []int32{1, 2, 3, 4, 5, 6})}
	for _, tt := range []struct {
		name    string
		cluster Cluster
		node    int32
		// racks bound the balance: with one broker left in the drained
		// node's rack, it takes that rack's share of every partition.
		racksOnly bool
	}{
		{"4 brokers, drain the new one", balanced, 4, false},
		{"4 brokers, drain broker 1", balanced, 1, false},
		{"racks kept", racked, 2, true},
		{"unlisted node", Cluster{Brokers: brokers("", "", ""), Partitions: roundRobin("t", 6, 2, []int32{1, 2, 3, 7})}, 7, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			moves, err := Drain(tt.cluster, tt.node)
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, tt.cluster, moves)
			for _, m := range moves {
				if !slices.Contains(m.From, tt.node) {
					t.Errorf("%s/%d moves without a replica on %d: %v → %v", m.Topic, m.Partition, tt.node, m.From, m.To)
				}
			}
			after := Apply(tt.cluster, moves)
			rest := Cluster{Partitions: after.Partitions}
			for _, l := range Loads(after) {
				if l.Broker == tt.node && l.Replicas > 0 {
					t.Fatalf("broker %d still holds %d replicas", tt.node, l.Replicas)
				}
			}
			for _, b := range after.Brokers {
				if b.ID != tt.node {
					rest.Brokers = append(rest.Brokers, b)
				}
			}
			if !tt.racksOnly {
				checkBalanced(t, rest)
			}
			if v := RackViolations(after); len(v) > 0 {
				t.Errorf("racks crowded after draining: %v", v)
			}
		})
	}
}

func TestDrainNotEnoughBrokers(t *testing.T) {
	c := Cluster{Brokers: brokers("", "", ""), Partitions: roundRobin("orders", 3, 3, []int32{1, 2, 3})}
	moves, err := Drain(c, 2)
	if !errors.Is(err, ErrCannotDrain) || moves != nil {
		t.Fatalf("Drain: %v, %v; want ErrCannotDrain", moves, err)
	}
	if want := "reassign: not enough other brokers to drain: orders/0 has 3 replicas [1 2 3] and no other broker can take broker 2's (2 other brokers)"; err.Error() != want {
		t.Errorf("error %q\nwant %q", err, want)
	}
}

// Random clusters: every plan keeps the invariants, a rackless cluster
// ends balanced, and balancing twice changes nothing.
func TestBalanceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		n := 2 + rng.IntN(7)
		var ids []int32
		for id := range n {
			ids = append(ids, int32(id+1))
		}
		c := Cluster{Brokers: brokers(make([]string, n)...)}
		for topic := range 1 + rng.IntN(3) {
			rf := 1 + rng.IntN(min(3, n))
			on := ids[:rf+rng.IntN(n-rf+1)] // a prefix: new brokers empty
			c.Partitions = append(c.Partitions, roundRobin(fmt.Sprint("t", topic), 1+rng.IntN(20), rf, on)...)
		}
		moves := Balance(c)
		checkPlan(t, c, moves)
		after := Apply(c, moves)
		checkBalanced(t, after)
		if again := Balance(after); len(again) > 0 {
			t.Fatalf("case %d: second Balance plans %v", i, again)
		}
		if t.Failed() {
			t.Fatalf("case %d: %+v", i, c)
		}
	}
}

// nearlyEven holds 10, 9, 9 and 8 replicas and leaderships: within ±1 of
// 9, so Balance leaves it alone.
func nearlyEven() Cluster {
	c := Cluster{Brokers: brokers("", "", "", ""), Partitions: roundRobin("t", 36, 1, []int32{1, 2, 3, 4})}
	c.Partitions[3].Replicas, c.Partitions[3].Leader = []int32{1}, 1
	return c
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func equalMove(a, b Move) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && slices.Equal(a.From, b.From) && slices.Equal(a.To, b.To)
}

func shuffled(c Cluster) Cluster {
	out := Cluster{Brokers: slices.Clone(c.Brokers), Partitions: slices.Clone(c.Partitions)}
	slices.Reverse(out.Brokers)
	slices.Reverse(out.Partitions)
	return out
}

// With a big internal topic beside it, the cluster-wide Balance can even
// the counts by moving the internal topic alone; BalanceEachTopic spreads
// each topic, the 12-partition one included.
func TestBalanceEachTopic(t *testing.T) {
	brokers := []Broker{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	old := []int32{1, 2, 3}
	c := Cluster{Brokers: brokers, Partitions: append(roundRobin("__consumer_offsets", 50, 3, old), roundRobin("orders", 12, 3, old)...)}
	moves := BalanceEachTopic(c)
	after := Apply(c, moves)
	for _, topic := range []string{"__consumer_offsets", "orders"} {
		var parts []Partition
		for _, p := range after.Partitions {
			if p.Topic == topic {
				parts = append(parts, p)
			}
		}
		checkBalanced(t, Cluster{Brokers: brokers, Partitions: parts})
	}
	if again := BalanceEachTopic(after); len(again) != 0 {
		t.Fatalf("a balanced cluster planned %d more moves", len(again))
	}
}
