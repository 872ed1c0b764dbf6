// Package follower carries out the follower side of replication (DESIGN.md
// §4): it fetches a partition's records from its leader and feeds the
// answers to the partition's replication.Replica, the pure state machine
// that decides what a follower does.
//
// The shell that drives each Replica (the broker) carries out a Ready's
// fetch outputs by calling the Manager:
//
//	Follow(p, FetchStart)  fetch p from FetchStart.Leader at Offset, CurrentLeaderEpoch = Epoch
//	Query(p, EpochQuery)   ask the leader OffsetForLeaderEpoch, feed HandleEpochEndOffset
//	Stop(p)                forget p (not a follower any more, or the log is going away)
//
// A partition has at most one task, held by the leaderFollower of its
// leader: one goroutine and one peer.Client per leader node id, sending one
// FetchRequest for all of that leader's partitions (replica id = this
// node) and OffsetForLeaderEpoch for the partitions that truncate. The
// peer's address comes from Peers.Address. A leaderFollower with no tasks
// left stops and closes its client.
//
// # What the package needs (consumer-owned interfaces)
//
//   - Partition: a followed partition's name, id, index and Log. The
//     interface value is the task's key: the shell hands the same value
//     for a partition's whole life.
//   - Log: the part of hotlog.Log a follower writes (AppendReplicated,
//     flush waits, ResetTo).
//   - Replicas: runs a function on a partition's Replica under the
//     partition's replica mutex and carries out the Ready it leaves
//     (which calls Follow/Query/Stop back, under that mutex).
//   - Peers: where a leader listens and how to dial it.
//   - ProducerSnapshots (optional): the tiered producer state at an offset,
//     for a log restarted at the leader's local log start.
//
// # Applying an answer
//
// Under the partition's replica mutex, the task must still be the one the
// request was built from (same generation: every Follow/Query makes a new
// one, and they run under that same mutex), ValidateFetch must accept it
// and the log must end at the fetch offset; then AppendReplicated. With
// fsync durability the log is flushed before Fetched(epoch, LEO, leader
// HW) reports it, and before any fetch at an offset is sent, so a fetch
// offset counts only flushed data.
//
// # Errors
//
// FENCED_LEADER_EPOCH pauses the partition until the next Follow/Query
// (this node's state is stale; the controller's next state brings it).
// NOT_LEADER_OR_FOLLOWER and UNKNOWN_LEADER_EPOCH mean the leader has not
// applied the state yet: retried with back-off (100ms..1s) rather than
// paused, because no new state may ever come for a leader that is merely
// slow. OFFSET_MOVED_TO_TIERED_STORAGE (109) and OFFSET_OUT_OF_RANGE:
// ListOffsets(-4, earliest local) on the leader; if its local log starts
// above the fetch offset, the log is reset there (Log.ResetTo, under the
// replica mutex) and fetching continues; the history below stays in the
// bucket. The producer state at the new start comes from the tiered object
// ending exactly there when there is one (restart.go), else it is empty.
// Connection errors back off the whole leaderFollower (100ms..1s).
//
// # Locking
//
// Lock order: a partition's replica mutex, then Manager.mu. A
// leaderFollower holds no Manager lock while it calls Replicas.WithReplica,
// the log or the network; Follow/Query/Stop only take Manager.mu, so they
// never block (they run under the replica mutex).
//
// # Names kept for compatibility
//
// The broker names this package's log component "replica-fetcher" (the
// logger it passes in carries it), and the peer client id is
// "strata-replica-fetcher-<node>" (operators and brokers' logs see them).
package follower
