// Package replica is the shell around the pure replication state machine
// (package replication) for the partitions a broker hosts, as etcd raft's
// RawNode is the shell of its pure raft: every hosted partition has one
// Core driving one replication.Replica and carrying out its outputs (the
// Ready of replication/doc.go, which is the spec of this shell). The
// broker-wide part (acks=all purgatory, background goroutines, counters,
// the etcd store for ISR changes) is the Shell.
//
// What a Core does by itself: apply partition states from metadata (lead,
// follow or step down; ApplyState), publish the HW, role and epoch; write ISR
// proposals to etcd (a compare-and-swap on the partition state's version,
// Kafka's AlterPartition) and feed the outcome back; answer acks=all
// waiters; under fsync durability, hold acks=1 answers until the leader's
// own flush (FlushWait), which it reports before returning so that the HW
// of a leader alone in the ISR covers the acknowledged batch; truncate the follower's log; report the leader's log progress
// (a watcher goroutine, and a safety net in Tick). What it hands to its
// consumer (Outputs): the follower's fetch and epoch query, and the news
// that it started or stopped leading.
//
// # What the package needs (consumer-owned interfaces)
//
//   - Log: the part of a partition's hotlog.Log the shell reads and
//     truncates (and the epochs the machine reads).
//   - ISRStore: the compare-and-swap of a partition state in etcd, and
//     its read-back (metadata.Store implements it).
//   - Outputs: per partition, where the fetch outputs and leadership
//     changes go (the broker: replication/follower and its coordinators).
//   - Leadership: while a state is applied, whether this broker leads it
//     (the consumer's rule, against its live registration), how to ready
//     the log before leading, and the HW a new leader inherits.
//
// # Ownership and lock order
//
// A Core holds two mutexes. applyMu serializes WithReplica: an input, and
// the carrying out of the Ready it produced, finish before the next input
// starts, so outputs are applied in the documented order (a truncation
// completes before the fetch that follows it starts, an HW is published
// before the acks it completes are answered). mu guards the Replica itself
// and is held only around calls into it, so queries (Status) never wait
// for the I/O done under applyMu (truncation). One exception, deliberate:
// a leader's local append (AppendAsLeader) runs under mu, as Kafka
// appends under its leaderIsrUpdateLock, so a batch is never stamped with
// an epoch this replica no longer leads; that is a page-cache write, never
// an fsync.
//
// Lock order: the consumer's locks taken before WithReplica (the broker's
// partition manager applyMu, then its mu) → Core.applyMu → Core.mu → the
// consumer's per-partition locks. Outputs are called under applyMu and
// must not take the consumer's locks that come before it (LeadershipChanged
// runs its work on its own goroutine for that reason).
//
// # Published values
//
// After every WithReplica the HW, role and epoch are stored in atomics the
// data path reads without locks; an HW change closes the HWChanged channel
// (fetch long polls and acks=all waits select on it).
package replica
