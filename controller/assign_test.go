package controller

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-log/strata/metadata"
)

func racked(spec ...any) []metadata.BrokerInfo {
	var out []metadata.BrokerInfo
	for i := 0; i < len(spec); i += 2 {
		out = append(out, metadata.BrokerInfo{NodeID: int32(spec[i].(int)), Rack: spec[i+1].(string)})
	}
	return out
}

func TestAssignGolden(t *testing.T) {
	cases := []struct {
		name            string
		brokers         []metadata.BrokerInfo
		from, count, rf int
		want            string
	}{
		{"no racks", racked(3, "", 1, "", 2, ""), 0, 6, 2, "[[1 2] [2 3] [3 1] [1 3] [2 1] [3 2]]"},
		{"no racks, rf 3", racked(1, "", 2, "", 3, "", 4, ""), 0, 4, 3, "[[1 2 3] [2 3 4] [3 4 1] [4 1 2]]"},
		{"racks alternate", racked(1, "a", 2, "a", 3, "b", 4, "b"), 0, 4, 2, "[[1 3] [3 2] [2 4] [4 1]]"},
		{"single broker", racked(7, ""), 0, 2, 1, "[[7] [7]]"},
		{"added partitions", racked(1, "", 2, "", 3, ""), 3, 3, 2, "[[1 3] [2 1] [3 2]]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Assign(tc.brokers, tc.from, tc.count, tc.rf)); got != tc.want {
				t.Fatalf("Assign = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestAssignInvalid(t *testing.T) {
	b := racked(1, "", 2, "")
	for _, tc := range []struct{ from, count, rf int }{{0, 1, 0}, {0, 1, 3}, {0, -1, 1}, {-1, 1, 1}} {
		if got := Assign(b, tc.from, tc.count, tc.rf); got != nil {
			t.Errorf("Assign(from %d, count %d, rf %d) = %v, want nil", tc.from, tc.count, tc.rf, got)
		}
	}
	// A broker listed twice counts once: rf 2 of {1, 1} cannot be met.
	if got := Assign(racked(1, "", 1, ""), 0, 1, 2); got != nil {
		t.Errorf("duplicate brokers: %v", got)
	}
	if got := Assign(nil, 0, 1, 1); got != nil {
		t.Errorf("no brokers: %v", got)
	}
}

// TestAssignProperties: for random broker sets (with and without racks)
// every partition has rf distinct known brokers; leaders are spread within
// one of each other; with racks a partition spans min(rf, racks) racks;
// the result does not depend on input order; and adding partitions later
// places them as creating them at once would.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 500 {
		brokers := randomBrokers(rng)
		n := len(brokers)
		rf := 1 + rng.IntN(n)
		count := 1 + rng.IntN(20)
		got := Assign(brokers, 0, count, rf)
		where := fmt.Sprintf("round %d brokers %v rf %d count %d", round, brokers, rf, count)
		checkPlacement(t, where, brokers, got, count, rf)
		shuffled := slices.Clone(brokers)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if again := Assign(shuffled, 0, count, rf); fmt.Sprint(again) != fmt.Sprint(got) {
			t.Fatalf("%s: depends on input order: %v vs %v", where, got, again)
		}
		split := rng.IntN(count + 1)
		later := Assign(brokers, split, count-split, rf)
		if fmt.Sprint(later) != fmt.Sprint(got[split:]) {
			t.Fatalf("%s: partitions added at %d: %v, created at once: %v", where, split, later, got[split:])
		}
	}
}

func randomBrokers(rng *rand.Rand) []metadata.BrokerInfo {
	racks := []string{"a", "b", "c"}[:rng.IntN(4)]
	var out []metadata.BrokerInfo
	for id := int32(1); id <= 8; id++ {
		if rng.IntN(2) == 0 && len(out) > 0 {
			continue
		}
		b := metadata.BrokerInfo{NodeID: id * 10}
		if len(racks) > 0 {
			b.Rack = racks[rng.IntN(len(racks))]
		}
		out = append(out, b)
	}
	return out
}

func checkPlacement(t *testing.T, where string, brokers []metadata.BrokerInfo, got [][]int32, count, rf int) {
	t.Helper()
	rackOf := map[int32]string{}
	for _, b := range brokers {
		rackOf[b.NodeID] = b.Rack
	}
	racks := map[string]bool{}
	for _, r := range rackOf {
		racks[r] = true
	}
	if len(got) != count {
		t.Fatalf("%s: %d partitions", where, len(got))
	}
	leads := map[int32]int{}
	for p, replicas := range got {
		spanned := map[string]bool{}
		for _, id := range replicas {
			if _, ok := rackOf[id]; !ok {
				t.Fatalf("%s: partition %d: unknown broker %d", where, p, id)
			}
			spanned[rackOf[id]] = true
		}
		if len(replicas) != rf || len(slices.Compact(slices.Sorted(slices.Values(replicas)))) != rf {
			t.Fatalf("%s: partition %d: replicas %v", where, p, replicas)
		}
		if len(racks) > 1 && len(spanned) != min(rf, len(racks)) {
			t.Fatalf("%s: partition %d: %v spans %d racks of %d", where, p, replicas, len(spanned), len(racks))
		}
		leads[replicas[0]]++
	}
	lo, hi := count, 0
	for _, b := range brokers {
		lo, hi = min(lo, leads[b.NodeID]), max(hi, leads[b.NodeID])
	}
	if hi-lo > 1 {
		t.Fatalf("%s: leaders unevenly spread: %v", where, leads)
	}
}
