// Package reassign plans partition reassignments (Kafka KIP-455): which
// partitions should move to which brokers so that load is even, replicas
// are spread over racks, or a broker holds nothing and can be stopped.
//
// It is pure: a Cluster (brokers with racks, partitions with replicas and
// leaders) goes in, a list of Moves comes out. No I/O, no clock, no
// randomness; the same input gives the same plan. The operator commands
// read the Cluster from Metadata and submit the Moves with
// AlterPartitionReassignments; the controller carries them out.
//
// # Terms
//
//   - replica count of a broker: how many partitions list it in Replicas.
//   - preferred leader: a partition's first replica. Balance evens out
//     preferred leaderships; a preferred leader election then makes them
//     the actual leaders.
//   - even share: total replicas (or partitions, for leaderships) divided
//     by the number of brokers. A broker is balanced when its count is
//     within ±1 of the even share: in [lo, hi] with lo = ceil(share-1),
//     hi = floor(share+1). The band, not the exact share, is the goal, so a
//     cluster that is nearly even is left alone (fewest moves).
//   - rack: Broker.Rack; a broker without one is its own rack, so a
//     cluster without racks is spread over distinct brokers, which is the
//     rule anyway. A partition is rack-spread when no rack holds more than
//     ceil(RF / racks) of its replicas: one per rack when there are at
//     least RF racks.
//
// # Invariants of every plan
//
//   - a Move keeps the replication factor: len(To) == len(From).
//   - To never names a broker twice, and names only brokers in the Cluster
//     (a replica on an unknown broker is kept in place by Balance; Drain
//     moves replicas off the drained node whether it is listed or not).
//   - a Move never makes a partition's rack spread worse.
//   - From is the partition's Replicas as given; Moves are sorted by topic
//     then partition, one per partition at most.
//
// # How Balance decides
//
// Three greedy passes over sorted brokers and partitions, each step
// taken from the most loaded broker to the least loaded one first:
//
//  1. racks: a partition whose replicas crowd a rack moves the crowding
//     replica to the least loaded broker of a rack with room.
//  2. replicas: while a broker is above hi or below lo, move one replica
//     from the most loaded broker to the least loaded one that may take
//     it (not in the partition, rack rule kept), preferring a replica that
//     is not the preferred leader so leaders stay where they are.
//  3. leaderships: while a broker's preferred leaderships are outside the
//     band, reorder a partition it leads so that another of its replicas,
//     on a broker with fewer leaderships, comes first; when no partition
//     holds both, a chain of such swaps through other brokers does it.
//     Reordering moves no data; partitions the plan already moves, and
//     then the partition's current leader, are preferred, so the
//     election changes as little as it can. Only when no reordering can
//     help (single-replica partitions) does a leading replica move, with
//     a replica moved back the other way to keep the replica counts.
//
// Drain moves each of the node's replicas to the least loaded broker that
// keeps the partition's rack spread (a distinct broker if no rack has
// room), hands the node's preferred leaderships to replicas that were
// already in the partition, and evens out leaderships among the moved
// partitions only: partitions without a replica on the node stay put.
//
// The passes are best effort under constraints: with too few brokers in a
// rack, say, a count may stay outside the band; the plan then does what
// the constraints allow and never breaks them.
package reassign
