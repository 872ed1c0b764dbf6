package controller

import (
	"cmp"
	"slices"

	"github.com/strata-log/strata/metadata"
)

// Assign places count partitions, numbered from `from`, on rf brokers
// each (Kafka's AdminUtils placement with a fixed start, so it is
// deterministic):
//
//   - brokers are ordered by node id; when any broker has a rack, they are
//     ordered rack-alternated instead (the first broker of each rack in
//     rack name order, then the second of each, ...; a broker without a
//     rack counts as rack "");
//   - partition p's leader is broker p mod n of that order, so leaders
//     spread evenly;
//   - follower j of partition p is at shift 1 + (p/n + j) mod (n-1) after
//     the leader (the shift grows every n partitions, spreading followers);
//     rack-aware, a candidate is skipped while its rack already holds a
//     replica and some rack holds none.
//
// Assign(b, 0, a+c, rf)[a:] equals Assign(b, a, c, rf): partitions added
// later land where they would have had the topic been created with them.
// It returns nil when the request cannot be met (rf < 1, rf > number of
// distinct brokers, count < 0, from < 0); callers check rf first.
func Assign(brokers []metadata.BrokerInfo, from, count, rf int) [][]int32 {
	ordered := placementOrder(brokers)
	n := len(ordered)
	if rf < 1 || rf > n || count < 0 || from < 0 {
		return nil
	}
	racks := map[string]bool{}
	for _, b := range ordered {
		racks[b.Rack] = true
	}
	rackAware := len(racks) > 1
	out := make([][]int32, count)
	for i := range out {
		p := from + i
		if rackAware {
			out[i] = placeRackAware(ordered, len(racks), p, rf)
		} else {
			out[i] = placePlain(ordered, p, rf)
		}
	}
	return out
}

// placementOrder: distinct brokers by node id, rack-alternated when racks
// are set.
func placementOrder(brokers []metadata.BrokerInfo) []metadata.BrokerInfo {
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b metadata.BrokerInfo) int { return cmp.Compare(a.NodeID, b.NodeID) })
	sorted = slices.CompactFunc(sorted, func(a, b metadata.BrokerInfo) bool { return a.NodeID == b.NodeID })
	byRack := map[string][]metadata.BrokerInfo{}
	var rackNames []string
	for _, b := range sorted {
		if _, ok := byRack[b.Rack]; !ok {
			rackNames = append(rackNames, b.Rack)
		}
		byRack[b.Rack] = append(byRack[b.Rack], b)
	}
	if len(rackNames) <= 1 {
		return sorted
	}
	slices.Sort(rackNames)
	out := make([]metadata.BrokerInfo, 0, len(sorted))
	for round := 0; len(out) < len(sorted); round++ {
		for _, rack := range rackNames {
			if round < len(byRack[rack]) {
				out = append(out, byRack[rack][round])
			}
		}
	}
	return out
}

// followerIndex is Kafka's replicaIndex: the j-th follower candidate of a
// partition led by index first, with shift growing every n partitions.
// REQUIRES: n > 1.
func followerIndex(first, shift, j, n int) int {
	return (first + 1 + (shift+j)%(n-1)) % n
}

func placePlain(ordered []metadata.BrokerInfo, p, rf int) []int32 {
	n := len(ordered)
	first, shift := p%n, p/n
	replicas := []int32{ordered[first].NodeID}
	for j := 0; j < rf-1; j++ {
		replicas = append(replicas, ordered[followerIndex(first, shift, j, n)].NodeID)
	}
	return replicas
}

// placeRackAware walks the follower candidates in order, taking one when
// its broker is unused and its rack is unused or every rack is used.
// REQUIRES: 1 <= rf <= len(ordered).
func placeRackAware(ordered []metadata.BrokerInfo, numRacks, p, rf int) []int32 {
	n := len(ordered)
	first, shift := p%n, p/n
	leader := ordered[first]
	replicas := []int32{leader.NodeID}
	usedRacks := map[string]bool{leader.Rack: true}
	// Each candidate index repeats every n-1 steps; 2n rounds see every
	// broker at least twice, more than the loop can need.
	for k := 0; len(replicas) < rf && k < 2*n*rf; k++ {
		b := ordered[followerIndex(first, shift*numRacks, k, n)]
		if slices.Contains(replicas, b.NodeID) || (usedRacks[b.Rack] && len(usedRacks) < numRacks) {
			continue
		}
		replicas = append(replicas, b.NodeID)
		usedRacks[b.Rack] = true
	}
	return replicas
}
