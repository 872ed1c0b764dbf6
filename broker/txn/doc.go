// Package txn is Strata's transaction coordinator (DESIGN.md §6, Kafka's
// KIP-98 with the KIP-890 part 2 epoch bump): the state of every
// transactional.id, persisted in the internal compacted topic
// __transaction_state.
//
// # Structure
//
//   - Machine (machine*.go) is the protocol as a pure state machine: no
//     clock, no I/O, no allocation. Inputs are requests (InitProducerID,
//     AddPartitions, EndTxn), completions (WriteDone: a record is durable
//     or failed; MarkersDone: every partition took its marker), new
//     producer ids (SupplyProducerID, ProducerIDUnavailable) and logical
//     time (Tick, milliseconds). Outputs, drained with Ready, are records
//     to persist and marker jobs to send. Golden scripts (testdata/*.txt,
//     script_test.go) test it.
//   - Coordinator (coordinator.go) is the shell: it owns one Machine, the
//     __transaction_state partitions this broker leads
//     (coordinator.Partitions of coordinator.Log, shared with the group
//     coordinator in package broker/coordinator), a producer id allocator,
//     and a MarkerSender. It appends the machine's records, waits until
//     they are durable, and only then answers; it retries marker jobs
//     until every partition answered.
//   - Router (router.go, verify.go) carries the inter-broker messages of
//     transactions, through two interfaces the broker implements: Cluster
//     (partition leaders, the coordinator node of an id) and Peers (a
//     client per broker). It is the Coordinator's MarkerSender
//     (WriteTxnMarkers to each partition's leader, one request per
//     leader), and it asks a transaction's coordinator, in process or on
//     a peer, about a partition before a transactional append: KIP-890
//     verification (AddPartitionsToTxn v4 VerifyOnly) and part 2's
//     implicit add (Produce v12+, TxnOffsetCommit v5+). Its in-memory
//     twins are in router_test.go.
//
// # Producer ids
//
// A transition that needs a producer id never used before (a new
// transactional id, or an epoch bump that exhausts the epoch) takes the
// one handed in. When none was, the step stops without a change and
// NeedsProducerID reports it; the shell allocates one (a metadata round
// trip when its block is used up), hands it in, or reports that the
// allocation failed (the transition then answers
// COORDINATOR_NOT_AVAILABLE), and runs the same step again
// (StepWithProducerIDs). The rerun continues where the step stopped (a
// Tick resumes at the id it stopped at), so ids are allocated exactly when
// a transition uses them, one at a time, in the machine's order.
//
// # Which coordinator
//
// A transactional id T belongs to partition abs(javaStringHashCode(T)) % N
// of __transaction_state (N = transaction.state.log.num.partitions, 50),
// Kafka's rule, as for groups (coordinator.PartitionFor). Its coordinator is that partition's leader;
// the coordinator epoch written in markers is that partition's leader epoch.
//
// # Records in __transaction_state (Kafka's own, kmsg types)
//
//	key   TxnMetadataKey{Version: 0, TransactionalID}
//	value TxnMetadataValue{Version: 1, ProducerID, ProducerEpoch,
//	      TimeoutMillis, State, Topics[{Topic, Partitions}],
//	      LastUpdateTimestamp, StartTimestamp,
//	      PreviousProducerID}                              (nil: tombstone)
//
// PreviousProducerID is the producer id before the last epoch bump (-1:
// none): the same id unless the epoch was exhausted and the id rotated.
// The epoch before the bump follows from it (epoch-1 on the same id, else
// 32766), so KIP-360/KIP-890 retries are recognised after a failover.
//
// Keys of other versions are skipped on load. Compaction keeps the latest
// record of each transactional id; an expired id is a tombstone.
//
// # States (Kafka's)
//
//	Empty ──AddPartitions──▶ Ongoing ──EndTxn(commit)──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                        │ EndTxn(abort), timeout,   PrepareAbort  ──markers──▶ CompleteAbort
//	  │                        └─ InitProducerID (fence) ─▶ PrepareAbort
//	  └── InitProducerID from Empty/Complete* (epoch bump); Complete* ──AddPartitions──▶ Ongoing
//
// PrepareEpochFence and Dead are Kafka's transient states; Strata never
// persists them (a fence writes PrepareAbort with the bumped epoch, an
// expiry writes a tombstone) but loads them if found.
//
// Every transition writes one record and marks the id pending until the
// record is durable: requests for a pending id get CONCURRENT_TRANSACTIONS
// (retriable), as do requests while markers are in flight (Prepare*). A
// failed write restores the previous state. Markers are sent only once
// the Prepare* record is durable, with the transaction's producer id and
// epoch: EndTxn v5+ (KIP-890) bumps the epoch before PrepareCommit/Abort,
// so markers carry the bumped epoch and a late produce or EndTxn of the
// old epoch is fenced. An epoch reaching 32767 rotates to a new producer
// id (epoch 0).
//
// # Loading
//
// When the broker becomes leader of a partition of __transaction_state it
// replays it to the log end (as groups do), answering
// COORDINATOR_LOAD_IN_PROGRESS meanwhile, then resumes the markers of
// transactions found in PrepareCommit/PrepareAbort. Ids of partitions not
// led here get NOT_COORDINATOR.
//
// # Time
//
// Tick aborts Ongoing transactions older than their transaction.timeout.ms
// (epoch bump, so the abandoned producer is fenced) and expires ids idle in
// Empty/Complete* for transactional.id.expiration.ms (tombstone).
package txn
