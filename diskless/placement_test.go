package diskless

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-log/strata/metadata"
)

func brokersOf(ids ...int32) []metadata.BrokerInfo {
	out := make([]metadata.BrokerInfo, len(ids))
	for i, id := range ids {
		out[i] = metadata.BrokerInfo{NodeID: id, Host: "127.0.0.1", Port: 9000 + id}
	}
	return out
}

func topicID(seed byte) metadata.TopicID {
	var id metadata.TopicID
	for i := range id {
		id[i] = seed*31 + byte(i)*7
	}
	return id
}

// leaders maps every partition of topic to its leader.
func leaders(topic metadata.TopicID, partitions int, brokers []metadata.BrokerInfo, rack string) []int32 {
	out := make([]int32, partitions)
	for p := range out {
		out[p] = Leader(topic, int32(p), brokers, rack)
	}
	return out
}

func TestLeaderSpreads(t *testing.T) {
	for _, seed := range []byte{1, 2, 3} {
		counts := map[int32]int{}
		for _, l := range leaders(topicID(seed), 1000, brokersOf(1, 2, 3), "") {
			counts[l]++
		}
		for _, id := range []int32{1, 2, 3} {
			if n := counts[id]; n < 267 || n > 400 { // 1000/3 ± 20%
				t.Errorf("topic %d: broker %d leads %d of 1000 partitions: %v", seed, id, n, counts)
			}
		}
	}
}

// TestLeaderStableWhenBrokersChange: a broker that leaves moves only the
// partitions it led, and one that joins takes partitions only for itself.
func TestLeaderStableWhenBrokersChange(t *testing.T) {
	topic := topicID(9)
	before := leaders(topic, 1000, brokersOf(1, 2, 3, 4), "")
	after := leaders(topic, 1000, brokersOf(1, 3, 4), "")
	moved := 0
	for p := range before {
		switch {
		case before[p] == 2:
			moved++
			if after[p] == 2 || after[p] < 0 {
				t.Fatalf("partition %d still on the broker that left: %d", p, after[p])
			}
		case after[p] != before[p]:
			t.Fatalf("partition %d moved %d→%d though its leader stayed", p, before[p], after[p])
		}
	}
	if moved == 0 {
		t.Fatal("broker 2 led nothing")
	}
	joined := leaders(topic, 1000, brokersOf(1, 2, 3, 4, 5), "")
	for p := range before {
		if joined[p] != before[p] && joined[p] != 5 {
			t.Fatalf("partition %d moved %d→%d when broker 5 joined", p, before[p], joined[p])
		}
	}
}

func TestLeaderIgnoresOrder(t *testing.T) {
	brokers := brokersOf(1, 2, 3, 4, 5)
	want := leaders(topicID(4), 200, brokers, "")
	r := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		r.Shuffle(len(brokers), func(i, j int) { brokers[i], brokers[j] = brokers[j], brokers[i] })
		if got := leaders(topicID(4), 200, brokers, ""); !slices.Equal(got, want) {
			t.Fatalf("order %v changed the leaders", brokers)
		}
	}
}

func TestLeaderPrefersClientRack(t *testing.T) {
	brokers := brokersOf(1, 2, 3, 4, 5, 6)
	for i := range brokers {
		brokers[i].Rack = fmt.Sprintf("az-%c", 'a'+i%3) // 1,4: a; 2,5: b; 3,6: c
	}
	counts := map[int32]int{}
	for _, l := range leaders(topicID(5), 600, brokers, "az-b") {
		counts[l]++
	}
	if len(counts) != 2 || counts[2] == 0 || counts[5] == 0 {
		t.Fatalf("client in az-b led by %v, want brokers 2 and 5 only", counts)
	}
	// A rack no broker has: as if the client named none.
	if got, want := leaders(topicID(5), 100, brokers, "az-z"), leaders(topicID(5), 100, brokers, ""); !slices.Equal(got, want) {
		t.Fatal("an unknown rack changed the placement")
	}
	// The rack's brokers draining: the client goes to another rack.
	brokers[1].Draining, brokers[4].Draining = true, true
	for p, l := range leaders(topicID(5), 100, brokers, "az-b") {
		if l == 2 || l == 5 || l < 0 {
			t.Fatalf("partition %d led by %d: its rack's brokers are draining", p, l)
		}
	}
}

func TestLeaderSkipsDraining(t *testing.T) {
	brokers := brokersOf(1, 2, 3)
	brokers[0].Draining = true
	for p, l := range leaders(topicID(6), 300, brokers, "") {
		if l == 1 || l < 0 {
			t.Fatalf("partition %d led by %d", p, l)
		}
	}
	for i := range brokers {
		brokers[i].Draining = true
	}
	if l := Leader(topicID(6), 0, brokers, ""); l < 0 {
		t.Fatal("every broker draining: no leader, want one of them (they serve until they exit)")
	}
}

func TestLeaderWithoutBrokers(t *testing.T) {
	if l := Leader(topicID(7), 0, nil, ""); l != -1 {
		t.Fatalf("no brokers: %d, want -1", l)
	}
	if l := Leader(topicID(7), 0, nil, "az-a"); l != -1 {
		t.Fatalf("no brokers, a rack: %d, want -1", l)
	}
}

// TestLeaderGolden pins the weight function: a change moves every
// partition's advertised leader in a mixed-version cluster (placement.go).
func TestLeaderGolden(t *testing.T) {
	got := leaders(topicID(1), 12, brokersOf(1, 2, 3, 4), "")
	want := []int32{1, 3, 4, 4, 3, 1, 4, 4, 3, 4, 4, 1}
	if !slices.Equal(got, want) {
		t.Fatalf("leaders %v, want %v", got, want)
	}
}
