// Package replication is the per-partition replication protocol of
// DESIGN.md §4 as a pure state machine, one Replica per partition replica:
// Kafka's ISR / high-watermark rules, leader epochs and KIP-101/KIP-279
// truncation. It does no I/O, reads no clock and starts no goroutines
// (the structure of etcd raft's RawNode and tracker.Progress; not raft's
// majority rule). The shells built on it — the followers (replication/follower), the
// broker's produce/fetch paths and the etcd controller — feed it inputs and
// carry out its outputs.
//
// # Terms
//
//   - LEO (log end offset): the offset the next appended record gets. A
//     follower's LEO, as the leader sees it, is its last fetch offset.
//   - durable LEO: with --durability=fsync, the leader's flushed offset;
//     otherwise its LEO. A follower in fsync mode fsyncs before it fetches
//     again, so its fetch offset only ever counts flushed data.
//   - HW (high watermark): consumers read below it; acks=all completes when
//     it passes a batch. On the leader, HW = min(durable LEO, LEO of every
//     other member of the maximal ISR). On a follower, HW = min(the
//     leader's HW from the last fetch response, own LEO).
//   - ISR: the in-sync replicas, as committed in the partition state in
//     etcd. The leader is always a member.
//   - maximal ISR: the ISR united with the ISR of the proposal in flight
//     (Kafka's maximalIsr). The HW waits for it, so neither outcome of the
//     CAS leaves an ISR member below the HW.
//   - leader epoch: raised by the controller at every leader change; stamped
//     into every batch the leader appends. Version: the partition state's
//     etcd revision, on which ISR changes compare-and-swap.
//   - epoch start offset: the leader's LEO when its epoch began. Every
//     committed offset is below it.
//
// # Inputs (method calls) and outputs (Ready)
//
// Leader side:
//
//	BecomeLeader(LeaderState)         controller state naming this broker leader
//	Append(leo)                       after a local append
//	Flushed(offset)                   after an fsync (fsync durability only)
//	FollowerFetch(id, offset, epoch)  on each follower Fetch; the error is the answer
//	Tick(ms)                          logical time; drives ISR shrink and ack timeouts
//	ISRCommitted(version)             the proposal's CAS succeeded
//	ISRRejected()                     the proposal's CAS failed: deposed
//	CheckAcksAll()                    before appending an acks=all batch
//	WaitForAcks(AckWaiter)            after appending it
//	LeaderEpochEndOffset(epoch)       to answer OffsetForLeaderEpoch
//
// Follower side:
//
//	BecomeFollower(FollowerState)     controller state naming another leader
//	HandleEpochEndOffset(answer)      the leader's OffsetForLeaderEpoch answer
//	ValidateFetch(epoch, offset)      before appending a fetch response
//	Fetched(epoch, leo, leaderHW)     after appending (and, in fsync mode, flushing) it
//
// After any input the shell calls Ready (or HasReady) and carries out, in
// this order: publish HighWatermark if changed (wake fetch long-polls and
// tiering); CAS the Proposal into etcd (report the outcome with
// ISRCommitted/ISRRejected); answer each AckResult's produce request; if
// Fenced, stop leading now (answer NOT_LEADER_OR_FOLLOWER) and wait for
// the controller's next state; truncate the log to Truncate.Offset; send
// the EpochQuery, or start fetching at Fetch.Offset. Then Advance(rd).
// Outputs made after that Ready stay for the next one.
//
// Errors map to Kafka codes at the edge: ErrNotLeader, ErrNotFollower,
// ErrUnknownReplica → NOT_LEADER_OR_FOLLOWER; ErrStaleEpoch →
// FENCED_LEADER_EPOCH; ErrUnknownEpoch → UNKNOWN_LEADER_EPOCH;
// ErrOffsetOutOfRange → OFFSET_OUT_OF_RANGE; ErrNotEnoughReplicas →
// NOT_ENOUGH_REPLICAS; ErrNotEnoughReplicasAfterAppend →
// NOT_ENOUGH_REPLICAS_AFTER_APPEND; ErrTimedOut, ErrTooManyWaiters →
// REQUEST_TIMED_OUT. ErrNoProposal, ErrUnexpectedAnswer, ErrStaleFetch:
// a late message; ignore it. ErrInvalidState, ErrInvalidOffset,
// ErrInvalidAnswer: a bug or corrupt input; log it.
//
// # Rules
//
// HW. Raised, never lowered, while leading; never above the durable LEO. A
// new leader starts from the HW it had (clamped to its durable LEO), and
// followers' LEOs are unknown until they fetch in the new epoch, so the HW
// holds until every maximal-ISR member has fetched.
//
// Shrink (on Tick). A follower in the ISR is out of sync when it is not at
// the leader's LEO and was last caught up more than ReplicaLagTimeMaxMs
// ago. It was caught up at a fetch that reached the leader's LEO, or, as
// of the previous fetch, at a fetch that reached the LEO the leader had at
// that previous fetch (Kafka's lastCaughtUpTimeMs). All out-of-sync
// followers go in one proposal.
//
// Expand (on FollowerFetch). A replica outside the ISR is proposed once
// its fetch offset is >= the HW and >= the epoch start offset (KAFKA-7128:
// an inherited HW may lag the committed offset). When the expand commits
// it counts as caught up then, so it is not removed at the next tick.
//
// One proposal in flight at a time (Kafka's AlterPartition rule). It is
// resolved by ISRCommitted, ISRRejected, or a newer controller state of
// the same epoch (BecomeLeader with a higher Version), whichever first.
//
// acks=all. CheckAcksAll refuses when the committed ISR is below
// min.insync.replicas. A waiter completes when HW >= RequiredOffset: with
// success if the committed ISR then has min.insync.replicas members, else
// ErrNotEnoughReplicasAfterAppend; with ErrTimedOut at its deadline; with
// ErrNotLeader when leadership ends. Waiters survive a re-election of the
// same broker (the log is the same).
//
// Fencing. A rejected CAS moves the leader to RoleFenced: it serves
// nothing. A newer state decides: BecomeFollower, BecomeLeader of a newer
// epoch, or BecomeLeader of the same epoch with a Version above the one
// that failed (the controller kept it leader); it then resumes with its HW.
//
// Restart. A fresh Replica (RoleNone) refuses to lead an epoch its log
// already holds batches of: it led that epoch before the restart and may
// have lost unflushed batches that followers fetched, and two different
// batches at one (epoch, offset) cannot be told apart by KIP-101. The
// controller therefore must raise the epoch of every partition a broker
// led when that broker restarts (a new lease), before it leads again —
// even when its log no longer holds that epoch, which this package cannot
// detect.
//
// Truncation (follower). BecomeFollower asks (EpochQuery) for the end of
// the local log's latest epoch. With the answer (E, end): UNDEFINED keeps
// the log; if the local log has E, truncate to min(local end of E, end,
// LEO) and fetch; if its largest epoch <= E is older, truncate to that
// epoch's local end and ask again for it (each round asks a smaller
// epoch); if it has none <= E, truncate to min(end, LEO). The follower's
// HW never decides the offset; it only follows the LEO down. An empty log
// fetches at 0; a log with no epoch records (never written by Strata)
// falls back to its HW, as Kafka does.
//
// The leader's answer must count its current epoch as starting at the
// epoch start offset even before it writes a batch of it (Kafka writes that
// entry on becoming leader): LeaderEpochEndOffset does, and the broker's
// OffsetForLeaderEpoch handler must use it for followers. A leader that
// answered UNDEFINED from an empty epoch cache would let a follower keep a
// divergent suffix (found by the simulation test).
//
// # Ownership
//
// A Replica is not safe for concurrent use: the shell serializes every
// call for a partition (one mutex per partition, held only around calls,
// never across I/O). Queries (HighWatermark, ISR, Status, FetchOffset)
// return copies.
//
// # Tests
//
// testdata/*.txt are scripted golden tests in etcd raft's format
// (`go test -run TestScripts -rewrite` regenerates the output);
// TestSimulation runs seeded clusters with delayed and lost messages,
// late CAS results, elections, zombie leaders and crashes, checking the
// invariants after every step; FuzzReplica feeds arbitrary inputs.
package replication
