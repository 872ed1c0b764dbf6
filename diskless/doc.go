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
//	              Behind tells a fetch past its log end that only it lags
//	              (etcd's heads reach further) from one past the real end;
//	              MergedEnd bounds what the cleaner may rewrite.
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
// # Shared-object format (part of the in-bucket format; never change)
//
// All integers are big-endian. EncodeObject writes it, ParseFooter and
// ReadBatch read it (object.go).
//
//	+------------------------------+ 0
//	| batches                      |  RecordBatch v2 batches, back to back
//	+------------------------------+ size - TrailerSize - footerLength
//	| footer                       |  EntrySize (40) bytes per batch
//	+------------------------------+ size - TrailerSize
//	| trailer                      |  TrailerSize (24) bytes
//	+------------------------------+ size
//
// The batches are stored as produced (see "Offsets inside the object"),
// grouped by partition: partitions in the order of their topic id's bytes,
// then partition number; the batches of one partition in the order the
// appender was given them, so in the order their offsets are assigned.
// Footer entry i describes batch i:
//
//	offset  size  field
//	     0    16  topicId
//	    16     4  partition     int32 >= 0
//	    20     8  position      int64: the batch's first byte in the object
//	    28     4  length        int32: the whole batch, 12 + batchLength
//	    32     4  records       int32: lastOffsetDelta + 1, the offsets it takes
//	    36     4  crc           the batch header's CRC field (bytes 17-20)
//
// Trailer:
//
//	offset  size  field
//	     0     4  entryCount    u32 >= 1
//	     4     4  footerLength  u32 = entryCount × EntrySize
//	     8     2  version       u16 = ObjectVersion (1)
//	    10     2  flags         u16 = 0
//	    12     4  footerCRC     CRC-32C of the footer entries, then trailer bytes 0-11
//	    16     8  magic         "STRATAsh"
//
// Invariants, all checked by ParseFooter (a failure wraps ErrCorrupt):
// magic, version and flags as above; every footer byte but the magic is
// under footerCRC; entries are in (topicId, partition) order, with a
// non-zero topicId, a partition >= 0 and records >= 1; batch i starts
// where batch i-1 ends (batch 0 at 0), is at least the 61-byte batch
// header long, and the last one ends where the footer starts. So the
// entries tile the batch area exactly and no two overlap. entryCount ×
// (EntrySize + 61) <= size - TrailerSize bounds the count, so no trailer
// can make a reader allocate more than the object's own size.
//
// Each batch passed recordbatch.Validate when the object was written (magic
// 2, CRC-32C, recordCount == lastOffsetDelta+1 >= 1, a known codec).
// ReadBatch checks it again, and that its header's length, lastOffsetDelta+1
// and CRC field equal the entry's, before it is served; a batch that fails
// is never served.
//
// A reader needs only the tail: ParseFooter takes the object's last n bytes
// and its size, and when n < TrailerSize + footerLength says how many to
// read (FooterIncompleteError). A 64 KiB tail holds the footer of an object
// of up to 1,637 batches.
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
// transaction, guarded by the head's mod revision, the runs before the
// heads. The watch delivers a transaction's events in that order, so an
// Index never holds a head ahead of the runs it covers (a fetch woken by
// the head finds them).
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
//     run, then every new head. A lost race (another broker committed to one of the
//     partitions) re-reads the heads and decides again; nothing was written.
//  4. Only then is each producer answered. An etcd failure fails the
//     batches of the chunks not committed with a retriable error
//     (REQUEST_TIMED_OUT); the object stays in the bucket, referenced by the
//     chunks that did commit, or garbage if none did.
//
// Back-pressure: while a PUT or a commit is slow or failing, new batches
// wait in the appender up to Config.MaxPending bytes (8 objects' worth);
// beyond that Submit refuses at once (THROTTLING_QUOTA_EXCEEDED, which
// clients retry), so a stalled bucket or etcd costs bounded memory.
//
// Failure cases: a crash after the PUT and before a commit leaves garbage
// only; a commit whose answer was lost (etcd applied it, the broker saw an
// error) fails the producer, whose idempotent retry is then answered from
// the head with the original offsets, so nothing is duplicated. A
// non-idempotent producer's retry may duplicate, as on classic topics.
//
// # Merge and retention
//
// Each broker runs a Merger for the partitions it would be advertised for
// without a zone (so one broker each, two for a moment while brokers come
// and go). Every MergeConfig.Interval, per partition:
//
//  1. Merge: the oldest contiguous runs committed at least Age ago are
//     rewritten, base offsets patched, as one ordinary per-partition
//     segment object with a tier manifest entry (and the topic's
//     topic.json), exactly as tiered classic topics store history; then
//     the runs are deleted. A crash between the entry's commit and the
//     runs' delete leaves both; readers prefer the runs, and the next pass
//     finds the entry committed and deletes the runs.
//  2. Retention (retention.go): retention.ms and retention.bytes, with the
//     rule of classic remote retention (tier.RetentionDoomed), remove the
//     oldest merged objects: those wholly below the head's start
//     (DeleteRecords), those whose newest record is older than
//     retention.ms, then the oldest while the partition's bytes without
//     them (merged objects plus runs) are still at least retention.bytes.
//     Only merged objects wholly below the first run go: a run is never
//     removed before it is merged, so retention acts no sooner than the
//     merge age. The head's start moves past them first (RaiseStart, a
//     compare-and-swap on the head), so no read is served from them; then
//     their manifest entries are deleted (guarded by their versions); the
//     objects are deleted ObjectDeleter's delay later (the broker's
//     tier.Service, the same queue as classic remote retention), once
//     reads in flight are done. A crash between steps leaves entries below
//     the start, which the next pass removes. Retention holds
//     (retention.hold.*) do not apply to diskless topics.
//  3. Compaction (cleanup.policy with compact): the broker's log cleaner
//     (package compaction) lists the compacted partitions this broker
//     merges beside its local replicas, with no local log, and cleans
//     their merged objects with its tiered pass, as a tiered leader's:
//     runs of objects rewritten with each key's latest record and swapped
//     into the manifest in one compare-and-swap. Only objects below
//     Index.MergedEnd (the first run's base) are touched, so an object
//     whose merge is still deleting its runs is never rewritten; a swap
//     keeps its run's offset range, so the merge's coverage check
//     (coveredBy) still holds. Unmerged runs are never compacted (like
//     Kafka's active segment): the newest merge age of records is read
//     uncompacted.
//
// The sweep (one broker) deletes the shared objects no run has referenced
// for SweepGrace and that are older than that.
//
// # Restore
//
// The merge turns runs into the ordinary segment objects and manifest
// entries of classic tiered topics, and writes the topic's topic.json
// (configs with diskless.enable=true) before its first object, so the
// bucket holds a diskless topic's merged history in the form `strata
// replay` and `strata restore` read. Restore rebuilds such a topic as a
// diskless topic: its record with empty replica lists, the manifest
// entries of its segment objects, no partition states, and per partition
// the head RestoredHead makes: start = the restored log start, next = one
// past the last restored offset, no producers (an idempotent producer's
// next batch is then accepted at any sequence, as for an unknown
// producer). Produces go on at next; reads below the first run go to the
// restored objects as to any merged ones.
//
// What was only in runs not yet merged at the disaster is not restorable:
// the shared objects hold the bytes, but the offsets they were given lived
// only in the runs in etcd. A new cluster's sweeper deletes those objects
// once unreferenced for its grace. A topic none of whose runs was ever
// merged has nothing in the bucket's topics/ and is not restored.
//
// # Offsets inside the object
//
// Batches are stored as produced: their baseOffset is whatever the producer
// sent (0) and partitionLeaderEpoch is unset. The reader patches baseOffset
// (bytes 0-7) from the run and partitionLeaderEpoch (bytes 12-15) to 0 in
// the copy it serves (AppendPatched); neither field is covered by the batch
// CRC, which the reader checks before serving (ReadBatch).
package diskless
