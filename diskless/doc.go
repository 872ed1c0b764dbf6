// Package diskless serves diskless topics (diskless.enable=true, KIP-1150's
// name): a produced batch is acknowledged once a shared object holding it is
// in the bucket and its coordinates are committed in etcd. No broker disk and
// no inter-broker replication are involved, and any broker serves any
// partition.
//
// # Pieces
//
//	Object        the shared-object format (object.go): batches of many
//	              partitions in one bucket object, with a footer naming each
//	              batch's partition, position, length and CRC.
//	Appender      one per broker: buffers diskless batches across partitions
//	              for at most Config.Linger or Config.MaxBytes, PUTs one
//	              shared object, commits it, then answers every producer.
//	Committer     the commit protocol (commit.go): reads the partitions'
//	              heads, assigns offsets and checks idempotent sequences
//	              (Decide, pure), and writes heads and runs in one
//	              compare-and-swap transaction per chunk of partitions.
//	Index         the committed coordinates of every diskless partition,
//	              mirrored from etcd (snapshot + watch); wakes long polls.
//	Reader        serves Fetch: coordinates from the Index, bytes from a
//	              bounded cache of whole shared objects (one GET feeds every
//	              partition in the object), base offsets patched in.
//
// The package sees etcd through Store and the bucket through
// objstore.ObjectStore; `broker` wires both and routes the Kafka APIs of
// diskless topics here.
//
// # Shared-object key (part of the in-bucket format; never change)
//
//	<cluster>/diskless/<objectId>.shared
//
// <objectId> is a random UUID in its 36-character text form, so a retried
// PUT never overwrites another object. An object that no committed run
// references is garbage once it is older than the sweeper's grace (a PUT
// whose commit failed, or a broker that died between the two).
//
// # etcd layout (values are JSON; see metadata/doc.go for the key rules)
//
//	/strata/<cluster>/diskless/heads/<topicId>/<partition:05>
//	    {"next": N, "start": S, "producers": {"<pid>": {"epoch": E,
//	     "batches": [{"firstSeq": a, "lastSeq": b, "base": o, "last": l}, ...]}}}
//	/strata/<cluster>/diskless/runs/<topicId>/<partition:05>/<baseOffset:020>
//	    {"object": "<objectId>", "batches": [[position, length, records], ...],
//	     "maxTimestamp": ms}
//
// A head is the partition's log end (next offset to assign), its log start
// (raised by DeleteRecords and retention), and the idempotent producers'
// last five batches (as a partition leader keeps them in Kafka). A run is
// the batches of one partition committed from one shared object: offsets
// baseOffset, baseOffset+records of the first batch, ... in the order
// listed, so a run covers [baseOffset, baseOffset+Σrecords). Runs of a
// partition never overlap and leave no gaps between `start`'s run and
// `next`: the commit writes a partition's run and its head in the same
// transaction, guarded by the head's mod revision.
//
// # Commit protocol
//
//  1. The appender PUTs the shared object (with retries for transient
//     errors). A failed PUT fails every batch in it with a retriable error
//     (KAFKA_STORAGE_ERROR); nothing was committed.
//  2. It reads the heads of the object's partitions, and Decide assigns each
//     accepted batch its offsets: a retry of one of a producer's last five
//     batches is answered with the original offsets and not committed again;
//     a sequence gap or a stale epoch is refused (OUT_OF_ORDER_SEQUENCE_NUMBER,
//     INVALID_PRODUCER_EPOCH), as on classic topics.
//  3. One etcd transaction per chunk of at most MaxPartitionsPerTxn
//     partitions: if every head's mod revision is as read, put every new
//     head and run. A lost race (another broker committed to one of the
//     partitions) re-reads the heads and decides again; nothing was written.
//  4. Only then is each producer answered. An etcd failure fails the
//     batches of the chunks not committed with a retriable error
//     (REQUEST_TIMED_OUT); the object stays in the bucket, referenced by the
//     chunks that did commit, or garbage if none did.
//
// Failure cases: a crash after the PUT and before a commit leaves garbage
// only; a commit whose answer was lost (etcd applied it, the broker saw an
// error) fails the producer, whose idempotent retry is then answered from
// the head with the original offsets, so nothing is duplicated. A
// non-idempotent producer's retry may duplicate, as on classic topics.
//
// # Offsets inside the object
//
// Batches are stored as produced: their baseOffset is whatever the producer
// sent (0) and partitionLeaderEpoch is unset. The reader patches baseOffset
// (bytes 0-7) from the run and partitionLeaderEpoch (bytes 12-15) to 0 in
// the copy it serves; neither field is covered by the batch CRC, which the
// reader checks before serving.
package diskless
