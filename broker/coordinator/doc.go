// Package coordinator is the I/O shell that the consumer-group coordinator
// (broker/group) and the transaction coordinator (broker/txn) share. Each
// of them keeps its protocol in a pure machine; this package holds what is
// the same around both machines: the partitions of the internal topic the
// coordinator leads (__consumer_offsets, __transaction_state), which
// partition a key belongs to, appending a step's records and waiting until
// they are durable, replaying a partition when its leadership arrives, and
// the background goroutines.
//
// # Which partition
//
// A key K (a group id, a transactional id) belongs to partition
// abs(javaStringHashCode(K)) % N of the coordinator's topic, Kafka's rule
// (Utils.abs(key.hashCode()) % partitions, where Utils.abs maps MinInt32
// to 0), so that Kafka clients, tools and Strata agree on the coordinator.
// N is the topic's partition count; it is only changed while no partition
// is led, so a loaded key never moves under its machine.
//
// # The loop
//
//	request ──▶ machine step (owner's lock held)
//	              │ records
//	              ▼
//	        SplitByPartition ──▶ Partitions.AppendLocked, one batch per
//	              │               partition, in machine order
//	              ▼ (lock released)
//	        Appended.Wait: the high watermark passes the batch
//	              │
//	              ▼
//	        the machine learns the outcome; responses are delivered
//
// A response never leaves before the records of its step are durable.
// Appends happen under the owner's lock, so each partition's log holds the
// records in the order the machine produced them; waits happen outside
// it.
//
// # Leadership and loading
//
// When the broker becomes leader of a partition (LeadLocked), the owner
// replays the partition's log (Replay) into its machine in the
// background; until that ends, keys of the partition get
// COORDINATOR_LOAD_IN_PROGRESS, keys of partitions not led here
// NOT_COORDINATOR (StatusLocked). A partition led again at a newer leader
// epoch is replaced and loaded anew: another leader may have written
// meanwhile.
//
// # Locking
//
// Partitions has no lock of its own: its led set is guarded by the lock of
// the coordinator that owns it (methods ending in Locked require it); only
// the partition count is atomic, since keys are mapped without the lock.
// Log implementations must not call back into the coordinator.
package coordinator
