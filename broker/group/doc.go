// Package group is Strata's consumer-group coordinator (DESIGN.md §6): the
// classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), and
// committed offsets, persisted in the internal compacted topic
// __consumer_offsets so that replication and tiering carry them like any
// other data.
//
// # Structure
//
//   - Machine (machine*.go) is the protocol as a pure state machine: no
//     time source, no I/O, no goroutines. Inputs are requests (Join, Sync,
//     Heartbeat, Leave, CommitCheck, Delete...) and logical time (Tick, in
//     milliseconds). Outputs, drained with Ready, are responses to deliver
//     (possibly long after their request: a join response is released when
//     the rebalance completes) and records to persist. It is tested with
//     scripted golden tests (testdata/*.txt, see script_test.go).
//   - consumer.Group (package consumer) is one consumer-protocol group
//     (KIP-848, ConsumerGroupHeartbeat/ConsumerGroupDescribe), also pure;
//     the Coordinator keeps one per such group beside the Machine, persists
//     its records (types 3-8) the same way, and keeps a group id either
//     classic or consumer (coordinator_consumer.go).
//   - Coordinator (coordinator.go) is the shell: it owns one Machine, a
//     clock, and the offsets partitions this broker leads
//     (coordinator.Partitions of coordinator.Log, which the broker
//     implements on its partitions). It appends the Machine's records,
//     waits until they are durable (high watermark), and only then
//     delivers the responses of the same step. What it shares with the
//     transaction coordinator (the led partitions and their status, the
//     append/wait step, the replay on leadership, the background loops)
//     lives in package broker/coordinator. The classic APIs' views of
//     groups of either protocol (DescribeGroups, ListGroups by state
//     name) are in classic_view.go.
//
// # Which coordinator
//
// A group G belongs to partition abs(javaStringHashCode(G)) % N of
// __consumer_offsets (N = offsets.topic.num.partitions, default 50, or the
// topic's partition count once it exists), as in Kafka
// (coordinator.PartitionFor). Its coordinator is that partition's leader.
//
// # Record formats in __consumer_offsets (Kafka's own, kmsg types)
//
// Each record is one uncompressed RecordBatch v2 record; key and value are
// big-endian and start with an int16 version that selects the schema:
//
//	offset commit   key   OffsetCommitKey{Version: 1, Group, Topic, Partition}
//	                value OffsetCommitValue{Version: 3, Offset, LeaderEpoch,
//	                      Metadata, CommitTimestamp}            (nil: tombstone)
//	group metadata  key   GroupMetadataKey{Version: 2, Group}
//	                value GroupMetadataValue{Version: 3, ProtocolType,
//	                      Generation, Protocol, Leader,
//	                      CurrentStateTimestamp, Members[{MemberID,
//	                      InstanceID, ClientID, ClientHost,
//	                      RebalanceTimeoutMillis, SessionTimeoutMillis,
//	                      Subscription, Assignment}]}          (nil: tombstone)
//
// Key versions 0 and 1 are offset commits, 2 group metadata (Kafka's rule);
// 3-8 are the consumer-protocol (KIP-848) group records, encoded and
// decoded by package consumer (its doc.go) and replayed into the consumer
// groups (coordinator_consumer.go); other versions are skipped on load. Values of every version kmsg knows are read. Compaction keeps the
// latest record per key; tombstones delete.
//
// When records are written:
//
//   - an accepted OffsetCommit: one offset record per partition; the
//     response is sent once the batch is below the high watermark, and only
//     then does the commit become visible to OffsetFetch;
//   - a generation completes (the leader's SyncGroup moves the group to
//     Stable), a static member is replaced, or the group becomes Empty: the
//     group metadata record, before the sync responses are released;
//   - DeleteGroups, expired groups and offsets (offsets.retention.minutes),
//     offsets of deleted topics: tombstones.
//
// # Transactional offset commits (TxnOffsetCommit, KIP-98)
//
// The offset records of a TxnOffsetCommit are written as one transactional
// RecordBatch of the producer (producer id and epoch, the sequence the
// partition expects: TxnSequencer) and stay pending per producer, invisible
// to OffsetFetch (require_stable: UNSTABLE_OFFSET_COMMIT), until the
// producer's transaction marker reaches the offsets partition: the
// partition side then calls CompleteTxn, which applies them (commit, never
// over a newer commit) or drops them (abort). Loading does the same from
// the log: records of transactional batches are pending, control batches
// (ControlRecordKey type 0 abort, 1 commit) resolve them.
//
// # Loading
//
// When the broker becomes leader of an offsets partition (at start, or
// later when leadership moves to it), the Coordinator reads the partition
// from its log start offset to its high watermark and replays it into the
// Machine. Until that ends, requests for its groups get
// COORDINATOR_LOAD_IN_PROGRESS; requests for groups of partitions this
// broker does not lead get NOT_COORDINATOR. A loaded group with members
// resumes in Stable with its generation, leader and assignments; every
// member's session restarts at load time, so members that are gone expire
// and a rebalance follows, while live members simply keep heartbeating.
//
// # Group states (Kafka's classic protocol)
//
//	Empty ──join──▶ PreparingRebalance ──all joined / timeout──▶ CompletingRebalance
//	  ▲                 ▲      │ no members left                      │ leader's SyncGroup
//	  └─────────────────┼──────┘                                      ▼
//	                    └──── member joins/leaves/expires ────── Stable
//	Dead: deleted (DeleteGroups, expiry); the group is removed from the Machine.
//
// Timers (logical milliseconds): each member's session deadline
// (session.timeout.ms, reset by every heartbeat, join, sync and commit; not
// running while the member waits for its join response), the join phase's
// deadline (the largest rebalance.timeout.ms of the members; for a group
// that was Empty, group.initial.rebalance.delay.ms, extended by that delay
// on each new join up to the rebalance timeout), and the sync phase's
// deadline (rebalance timeout: members that did not sync are removed).
//
// Invariants: Generation only grows; in CompletingRebalance and Stable every
// member has joined the current generation and Protocol is supported by all
// of them; a group.instance.id maps to at most one member.
package group
