package diskless

// Placement: which broker clients are told leads a diskless partition.
//
// Any broker accepts Produce and serves Fetch for any diskless partition,
// so the advertised leader is only where clients are pointed: it spreads
// the partitions' traffic over the brokers and keeps each client in its own
// zone when it can. Every broker computes it alone, from the same inputs
// (the topic id, the partition, the live brokers, the client's rack), so
// every broker advertises the same leader without any coordination.
//
// Rendezvous (highest-random-weight) hashing: each candidate broker gets a
// pseudo-random weight for the partition and the heaviest wins. A broker
// that leaves moves only the partitions it won (each to the runner-up), a
// broker that joins takes about 1/n of the partitions, and the rest stay
// put, so clients' metadata does not churn when the cluster changes.
//
// The weight function is part of the placement: brokers running different
// versions of it would advertise different leaders for the same partition
// (harmless, since every broker serves every partition, but it scatters
// clients), so it must not change without a reason worth that.

import (
	"encoding/binary"

	"github.com/strata-log/strata/metadata"
)

// Leader is the broker advertised as partition's leader: the rendezvous
// winner among the live brokers that are not draining (among the draining
// ones when every broker is draining: they still serve until they exit),
// restricted to the brokers whose rack is clientRack when clientRack is
// not empty and at least one candidate has it. brokers is the broker's
// current view of the live registrations, in any order. -1 when brokers
// is empty.
func Leader(topicID metadata.TopicID, partition int32, brokers []metadata.BrokerInfo, clientRack string) int32 {
	candidates := servingBrokers(brokers)
	if clientRack != "" {
		if inRack := brokersInRack(candidates, clientRack); len(inRack) > 0 {
			candidates = inRack
		}
	}
	key := partitionKey(topicID, partition)
	leader, best := int32(-1), uint64(0)
	for _, b := range candidates {
		w := weight(key, b.NodeID)
		if leader < 0 || w > best || (w == best && b.NodeID < leader) {
			leader, best = b.NodeID, w
		}
	}
	return leader
}

// servingBrokers are the brokers not draining, or all of them when every
// one is draining.
func servingBrokers(brokers []metadata.BrokerInfo) []metadata.BrokerInfo {
	var serving []metadata.BrokerInfo
	for _, b := range brokers {
		if !b.Draining {
			serving = append(serving, b)
		}
	}
	if len(serving) == 0 {
		return brokers
	}
	return serving
}

func brokersInRack(brokers []metadata.BrokerInfo, rack string) []metadata.BrokerInfo {
	var out []metadata.BrokerInfo
	for _, b := range brokers {
		if b.Rack == rack {
			out = append(out, b)
		}
	}
	return out
}

// partitionKey hashes a partition's identity to 64 bits.
func partitionKey(topicID metadata.TopicID, partition int32) uint64 {
	hi := binary.LittleEndian.Uint64(topicID[:8])
	lo := binary.LittleEndian.Uint64(topicID[8:])
	return mix64(hi ^ mix64(lo^uint64(uint32(partition))))
}

// weight is broker node's rendezvous weight for the partition with key.
func weight(key uint64, node int32) uint64 {
	const golden = 0x9e3779b97f4a7c15 // keeps node 0's input away from 0
	return mix64(key ^ mix64(uint64(uint32(node))+golden))
}

// mix64 is SplitMix64's finalizer: every input bit affects every output
// bit, so weights of neighbouring partitions and node ids are unrelated.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
