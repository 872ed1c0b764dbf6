// Package hotlog is one partition's local log: the hot tail of DESIGN.md §3.
//
// # Terms
//
//   - LEO (log end offset): the offset the next appended record gets.
//   - log start offset: the first offset still readable; moves up through
//     retention and DeleteRecords, never down.
//   - flushed offset: every offset below it is on stable storage
//     (DurabilityFsync) or, with DurabilityReplication, equal to the LEO.
//   - recovery point: every segment byte below it was fsynced; recovery after an
//     unclean stop starts scanning there.
//   - leader epoch: the epoch of the leader that appended a batch; stored in the
//     batch's partitionLeaderEpoch and in the leader-epoch checkpoint.
//
// # Directory
//
// One directory per partition, <data-dir>/<topic>-<partition>/:
//
//	00000000000000000000.log         batches, verbatim, end to end
//	00000000000000000000.index       sparse offset index of that segment
//	00000000000000000000.timeindex   sparse time index of that segment
//	00000000000000052340.log         next segment: base offset 52340
//	...
//	leader-epoch-checkpoint          epoch -> start offset
//	recovery-point-checkpoint        recovery point
//	log-start-offset-checkpoint      log start offset
//	clean-shutdown                   present only between a clean Close and the next Open
//	reset-offset-checkpoint          present only while a ResetTo is unfinished (see "ResetTo")
//	00000000000000052340.snapshot    producer state as of offset 52340 (see "Producer-state snapshots")
//	00000000000000052340.txnindex    aborted transactions whose marker is in that segment (see "Transactions")
//	*.tmp                            a checkpoint being written; deleted on Open
//	cleaner-offset-checkpoint        the cleaner's first dirty offset (see "Compaction")
//	cleaner-swap                     present only while a ReplaceSegments is unfinished (see "Compaction")
//	<base>.<suffix>.cleaned          a cleaned segment being written: .log, .index, .timeindex, .txnindex
//	<base>.<suffix>.swap             a committed cleaned segment not yet under its final name
//	<base>.<suffix>.deleted          a replaced segment's file, about to be unlinked
//
// A segment is named by its base offset, the offset of its first batch (or, for
// an empty segment, the LEO when it was created), zero-padded to 20 digits so
// that name order is offset order. The last segment is the active one: the
// only one appended to. The others are sealed and never change, except by
// Truncate (follower truncation) and deletion.
//
// The active segment rolls when the next append would pass segment.bytes,
// when it is segment.ms old at an append or a retention round, and when the
// owner asks (RollIfOlder: the tier's bound on how long committed records
// stay out of the bucket). Every roll writes a producer snapshot at the new
// segment's base.
//
// All integers on disk are big-endian.
//
// # .log: RecordBatch v2, stored exactly as the producer sent it
//
// Each batch is a Kafka RecordBatch v2, drawn byte by byte in package
// recordbatch's doc. The log rewrites only baseOffset and
// partitionLeaderEpoch (on Append), the two fields the CRC does not cover,
// and never decompresses a batch to store it.
//
// A batch occupies 12+batchLength bytes; the next batch follows directly.
// Offsets in a segment increase strictly: batch[i+1].baseOffset =
// batch[i].baseOffset + lastOffsetDelta + 1 when written by Append.
// Compaction leaves gaps between batches, between segments and before a
// segment's first batch, and batches with fewer records than
// lastOffsetDelta+1 (even none), so readers and recovery only require
// increasing offsets and recordCount <= lastOffsetDelta+1 (see "Compaction").
//
// Magic 0/1 message sets are rejected on produce (ErrUnsupportedMagic) and
// never stored. magic sits at byte 16 in every message format, which is how
// it is recognised.
//
// # .index: sparse offset index
//
//	+-----------------------+-----------------------+
//	| relativeOffset u32    | position u32          |   8 bytes per entry
//	+-----------------------+-----------------------+
//
// relativeOffset = batch baseOffset - segment base offset; position = byte
// position of that batch in the .log. An entry is added for a batch when at
// least IndexIntervalBytes of log have been appended since the previous entry
// (the first batch of a segment needs none: it is at position 0). Entries
// increase strictly in both fields. Lookup of offset o: the last entry with
// base+relativeOffset <= o gives a position at or before the batch holding o;
// a short header scan finds the batch.
//
// # .timeindex: sparse time index
//
//	+-----------------------------------------------+-----------------------+
//	| timestamp i64                                 | relativeOffset u32    |   12 bytes per entry
//	+-----------------------------------------------+-----------------------+
//
// Written at the same moments as .index entries, and only when the timestamp
// grows. timestamp is the largest maxTimestamp of the segment's batches so far;
// relativeOffset is the base offset (relative) of the first batch that reached
// it. Invariant: every record of the segment below that offset has a timestamp
// < timestamp. Lookup of the first record with timestamp >= t starts at the
// relativeOffset of the last entry whose timestamp <= t.
//
// Index files are derived data: an index that is missing, has a partial
// entry, is not increasing, or points past the end of the .log is rebuilt from
// the .log. The in-memory copy of the active segment's indexes is the truth;
// files are appended as entries are made and fsynced when the segment is sealed.
//
// # leader-epoch-checkpoint (Kafka's text format)
//
//	0                 version
//	2                 number of entries
//	0 0               epoch startOffset
//	3 52340
//
// Entries increase strictly in both columns; an entry (e, s) says the leader
// of epoch e appended from offset s on. Append with a leaderEpoch larger than
// the last entry's adds (leaderEpoch, baseOffset); AppendReplicated does the
// same for each batch's own partitionLeaderEpoch. Truncate drops entries with
// startOffset >= the new LEO; retention moves the first entry's startOffset up
// to the log start offset and drops entries wholly below it.
//
// # recovery-point-checkpoint and log-start-offset-checkpoint
//
//	0                 version
//	52340             the offset
//
// # Checkpoint writes
//
// Every checkpoint is replaced atomically: write <name>.tmp, fsync it, rename
// over <name>, fsync the directory. A reader therefore sees the old or the new
// file whole. A checkpoint that does not parse is treated as absent (recovery
// point 0: full scan; log start offset: the first segment's base; epochs:
// relearned from the batches recovery scans).
//
// # clean-shutdown
//
// An empty file written (atomically, as above) by Close after the final fsync
// and checkpoints, and removed by Open (with a directory fsync) before the first
// write. Its absence at Open means the last stop was unclean.
//
// # ResetTo
//
// ResetTo(offset) empties the log and restarts it at offset (a follower
// whose fetch offset fell below the leader's local log start). Its commit
// point is reset-offset-checkpoint (offset-checkpoint format, written
// atomically). Then, each step atomic: every segment's files are deleted,
// an empty segment <offset>.log is created, the log-start and
// recovery-point checkpoints become offset, the leader-epoch checkpoint
// empties, and the marker is removed. Open, before reading any checkpoint,
// redoes these steps if the marker is present (they are idempotent), so a
// crash at any point leaves the old log or the empty one at offset.
//
// # Recovery (Open)
//
//  0. Finish an interrupted segment swap, or discard an uncommitted one
//     (see "Compaction").
//  1. Delete *.tmp files and index files without a .log.
//  2. Read the checkpoints and the clean-shutdown marker, then remove the marker.
//  3. Segments wholly below the recovery point (next segment's base <=
//     recovery point), or all but the last after a clean shutdown, are trusted:
//     their index files are loaded (rebuilt if invalid) and only the batch
//     headers after the last index entry are read to learn the segment's end.
//  4. Every other segment, and ALWAYS the last one (so a flipped byte in the
//     tail is caught even after a clean shutdown), is scanned batch by batch,
//     checking framing, magic, CRC-32C and increasing offsets, and its indexes
//     are rebuilt. At the first torn or corrupt batch the segment is truncated
//     there, every later segment is deleted, and a warning with the offset of
//     the damage is logged. Nothing past the damage is ever served.
//  5. The leader-epoch cache drops entries at or past the LEO and learns the
//     epochs of the scanned batches; the log start offset is clamped to
//     [first segment base, LEO].
//  6. The producer state is rebuilt (see "Producer-state snapshots").
//
// # Durability
//
// Append writes to the active segment through the page cache and returns.
// With DurabilityFsync a flusher goroutine (group commit) wakes on appends,
// fdatasyncs the segments rolled since its last round and the active segment,
// then advances the flushed offset and wakes WaitFlushed callers: concurrent
// appenders share one fdatasync. The recovery point follows the flushed
// offset and is checkpointed at most every recoveryCheckpointInterval and on
// Close. With DurabilityReplication only rolled segments are fsynced (in the
// background, to advance the recovery point), as Kafka does.
//
// A failed write or fsync is sticky: the log answers ErrStorage (wrapping the
// cause) to every later write and wait until it is reopened, because after a
// failed fsync the page cache may have dropped data we cannot know about.
//
// # Tiering hooks (sealed.go)
//
// SealedSegments lists every segment but the active one (base, next offset,
// size, max timestamp); OpenSealedSegment opens one's .log read-only, and
// the open file stays readable if retention deletes the segment meanwhile.
// ApplyRetentionBelow(now, limit) is ApplyRetention whose time and size
// rules delete only segments ending at or below limit: the tier passes the
// end of what its manifest holds, so a segment not yet uploaded is never
// deleted by retention. Segments wholly below the log start offset
// (DeleteRecords) go regardless.
//
// # Producer state (producers.go)
//
// Per producer id (batches with producerId >= 0, Kafka's hasProducerId) the
// log keeps: the producer epoch; the last five data batches of that epoch
// (firstSeq, lastSeq, baseOffset, lastOffset, maxTimestamp), oldest first;
// the last timestamp (maxTimestamp of its last batch or marker); and, for
// transactions, the coordinator epoch and the first offset of
// the open transaction (-1: none). A batch's lastSeq is baseSequence +
// lastOffsetDelta, wrapping from MaxInt32 to 0; seq b follows seq a when
// b == a+1, or a == MaxInt32 and b == 0.
//
// Transaction verification (KIP-890 part 1; in memory only, as in Kafka):
// before a transactional batch may open a transaction, the broker asks the
// coordinator whether the partition is in it (StartTxnVerification, then
// ConfirmTxnVerification with the answer). Append rejects a transactional
// batch of a producer whose verification was started but not confirmed, or
// was invalidated by a marker since (ErrTxnNotVerified); producers never
// verified here (the broker's own group-coordinator writes) are not
// checked. Entries expire with the producer and are not snapshotted.
//
// Append (the leader path; Kafka's ProducerAppendInfo, origin CLIENT)
// checks each idempotent data batch under appendMu, before offsets are
// assigned, in this order:
//
//  1. duplicate: the producer's epoch equals the batch's and one of its
//     remembered batches has the same firstSeq and lastSeq: nothing is
//     written, the result holds the original offsets and Duplicate.
//  2. batch epoch < known epoch: ErrInvalidProducerEpoch.
//  3. batch epoch > known epoch (a new epoch): the first sequence must be 0,
//     else ErrOutOfOrderSequence.
//  4. same epoch: the first sequence must follow the last one remembered
//     (a new epoch with no batch yet expects 0), else ErrOutOfOrderSequence.
//  5. unknown producer (never seen, or expired): any sequence is accepted,
//     as Kafka does since KIP-360 (2.5); the broker therefore never answers
//     UNKNOWN_PRODUCER_ID to a produce. ErrUnknownProducerID is reserved.
//
// Batches of one append are checked against the state left by the ones
// before them; any failure rejects the whole append. Control batches
// (transaction markers) are checked as "Transactions" says. AppendReplicated (followers) and recovery apply batches
// without checks (origin REPLICATION): the leader already decided, and a
// follower mirrors its log. A control batch (transaction marker) sets the
// epoch and the coordinator epoch and ends the open transaction.
//
// Producers silent for at least ProducerIDExpiration
// (producer.id.expiration.ms, 24h) and with no open transaction are dropped
// by ApplyRetention and when the state is rebuilt. Silence counts from the
// later of the last batch's maxTimestamp (Kafka's rule) and the wall-clock
// time of its last append or of the state's load (in memory only): a
// producer writing old record timestamps would otherwise lose its state,
// and duplicate detection, at the next retention check. The log start
// moving does not drop producers (KIP-360): their state lives until expiry.
//
// # Producer-state snapshots
//
// <offset:020>.snapshot holds the state as of offset (every batch below it
// applied, none at or above). One is written at every roll (offset = the
// new segment's base) and at a clean Close (offset = LEO), atomically
// (temp file, fsync, rename, directory fsync). All integers big-endian:
//
//	offset  size  field
//	     0     2  version (= 1)
//	     2     4  crc             CRC-32C (Castagnoli) of bytes 6..end
//	     6     8  offset          == the file name
//	    14     4  producerCount
//	    18     …  producerCount entries, producer ids strictly increasing:
//	                8  producerId (>= 0)
//	                2  producerEpoch
//	                4  coordinatorEpoch       (-1: none)
//	                8  currentTxnFirstOffset  (-1: none; else < offset)
//	                8  lastTimestamp
//	                1  batchCount (0..5)
//	                batchCount x 36 bytes, oldest first, offsets increasing:
//	                  4 firstSeq, 4 lastSeq, 8 baseOffset, 8 lastOffset (< offset),
//	                  8 maxTimestamp
//
// Decoding bounds the file (256 MiB) and every count by the bytes present,
// and rejects trailing bytes. The state is rebuilt (Open after recovery,
// Truncate) thus: delete snapshots above the LEO; load the newest one at
// or below it, deleting (with a warning) any that fails to decode and
// trying the next older, or starting empty at offset 0; apply the headers
// of the batches from its offset to the LEO (header-only reads, plus the
// body of each control batch); expire. The aborted-transaction indexes are
// rebuilt with it (see "Transactions").
// Retention (deleteOldestSegments) deletes every snapshot older than the
// newest one at or below the log start offset. ResetTo deletes them all
// and empties the state; ResetToWithProducerSnapshot instead installs a
// given snapshot as of the reset offset (a follower restarting at its
// leader's local start takes it from the tiered object that ends there)
// and writes it as <offset>.snapshot.
//
// # Transactions (txn.go, txn_index.go)
//
// A transactional data batch (attribute bit 4) opens its producer's
// transaction at its base offset unless one is open. A control batch
// (bit 5; the broker writes them for WriteTxnMarkers) must hold exactly one
// record: key a ControlRecordKey (int16 version, int16 type: 0 abort,
// 1 commit), value an EndTxnMarker (int16 version, int32 coordinatorEpoch);
// anything else is ErrCorruptBatch, on Append and AppendReplicated alike.
// On the leader path a marker whose producer epoch is older than the
// partition's is ErrInvalidProducerEpoch, and one whose coordinator epoch
// is older than the producer's last marker's ErrTransactionCoordinatorFenced.
// A marker closes the transaction and records the coordinator epoch.
//
// FirstUnstableOffset is the smallest first offset of an open transaction,
// published together with the LEO; the last stable offset (LSO) is
// min(it, high watermark), the high watermark being the broker's.
//
// An abort marker appends an entry to the aborted-transaction index of the
// segment it is written to, <base:020>.txnindex (Kafka's format, no
// header), 34 bytes per entry, big-endian:
//
//	offset  size  field
//	     0     2  version (= 0)
//	     2     8  producerId
//	    10     8  firstOffset       the transaction's first offset (the marker's when it had no data)
//	    18     8  lastOffset        the abort marker's offset
//	    26     8  lastStableOffset  the LSO right after the abort: the first offset of the earliest
//	                                other open transaction, else lastOffset+1
//
// Entries are ordered by lastOffset (strictly increasing, within the
// segment). Decoding bounds the file (2^20 entries) and checks every entry
// (version, producerId >= 0, 0 <= firstOffset <= lastOffset, base <=
// lastOffset, lastStableOffset <= lastOffset+1). The file is appended and
// fsynced at each abort (aborts are rare). AbortedTxns(from, to) returns the
// entries overlapping [from, to), scanning from the segment holding from
// and stopping at an entry whose lastStableOffset >= to (no later abort can
// reach below to). The same bytes form the aborted-transaction section of a
// tiered segment object (EncodeAbortedTxns / DecodeAbortedTxns).
//
// The index is derived data, rebuilt with the producer state: every file
// is loaded (a bad one is deleted with a warning, and the snapshot used
// must then be at or below that segment's base); entries whose marker is
// at or after the snapshot's offset are dropped and re-derived while the
// batches after the snapshot are applied; changed files are rewritten
// atomically. Segment deletion (retention, Truncate, ResetTo) deletes the
// segment's .txnindex with its .log.
//
// # Compaction (clean_*.go)
//
// The cleaner (package compaction, driven by the broker) rewrites runs of
// sealed segments and swaps the results in; hotlog supplies the files,
// the swap and the bookkeeping.
//
// NewCleanedSegment(base) writes <base>.log.cleaned; Append takes whole,
// CRC-valid batches with increasing offsets and builds the offset and time
// indexes exactly as Append and recovery do (one entry per
// IndexIntervalBytes). A cleaned segment may be empty, and its first batch
// may start above its base; a segment's NextOffset is one past its last
// batch, so it may end below the next segment's base. Every look-up
// (Read, OffsetForTimestamp, the indexes, Truncate, the producer scan)
// finds "the first batch whose last offset is >= o", which is right across
// gaps: a read of an offset cleaned away returns the next batch, possibly
// from the next segment. Retention's "wholly below the log start" test is
// Kafka's: the next segment's base <= the log start (an emptied first
// segment does not move the log start). Batches with no record are skipped
// by OffsetForTimestamp.
//
// ReplaceSegments(old, cleaned) replaces a contiguous run of sealed
// segments; cleaned[0] has the first old base, the others' bases increase
// and every batch lies inside the old run. The steps:
//
//  1. (replace lock only) flush the cleaned .log; compute the aborted-txn
//     entries that carry over; write .index/.timeindex/.txnindex .cleaned;
//     fsync all four files.
//  2. (appendMu) check the old run is still in place, sealed and unchanged,
//     else ErrSegmentsChanged with nothing done.
//  3. Write the swap marker cleaner-swap atomically: THE COMMIT POINT.
//  4. Rename every new file .cleaned -> .swap; every old file -> .deleted;
//     every .swap file to its final name (.index, .timeindex, .txnindex,
//     then .log); fsync the directory.
//  5. Publish the new segment list (flushMu, mu: one critical section) and
//     close the old files (their generation moves, so reads in flight on
//     them start over on the new list; OpenSealedSegment hands out a dup of
//     a segment's descriptor, never a file opened by name).
//  6. Unlink the .deleted files, remove the marker, fsync the directory.
//
// The marker (offset-checkpoint style text) lists both runs:
//
//	0                 version
//	old 0 300 600     the replaced segments' bases, increasing
//	new 0 500         the new segments' bases, increasing; new[0] == old[0]
//
// Open, before listing segments: with a marker, steps 4 and 6 are redone;
// each is a rename or unlink of a file that is checked first, and the rule
// "while <base><suffix>.swap exists, the file at <base><suffix> is the old
// segment's" makes every prefix of them (in any persisted order) safe to
// redo. Without a marker, every .cleaned, .swap and .deleted file is
// removed (an uncommitted replace, or a finished one's leftovers). A crash
// anywhere thus leaves the old run (before step 3) or the new one (after),
// never a mix. A marker that does not parse fails Open rather than guess.
// A failure after step 3 fences the log (ErrStorage); Open finishes.
//
// Aborted-transaction entries of the old run carry over to the new segment
// whose range holds their LastOffset (the marker), when the transaction
// began before the run or some batch of its producer inside
// [FirstOffset, LastOffset] was kept (the marker or data); an entry whose
// marker and data were all cleaned away goes, as in Kafka. Producer
// snapshots are per offset and stay as they are. The leader-epoch cache is
// unchanged (batches keep their partitionLeaderEpoch).
//
// cleaner-offset-checkpoint (offset-checkpoint format) holds the first
// dirty offset: SetCleanerCheckpoint writes it atomically after a pass;
// CleanerCheckpoint reads it clamped to [log start, LEO]; Truncate, ResetTo
// and an Open that finds it above the LEO lower it (durably), since what
// follows will be new data. Missing or bad: 0 (all dirty). CleanableSegments
// (firstUncleanable) lists the sealed segments ending at or below it and
// above the log start; CleanableBytes splits their bytes into clean (ending
// at or below the checkpoint) and dirty, the dirty ratio's inputs.
//
// # Concurrency and lock order
//
// appendMu serializes writers (Append, Truncate, retention, Close);
// flushMu is held by a flush round and by whatever closes or truncates files;
// mu guards the segment list and every published value and is held only
// briefly (never across fsync). Reads capture a segment's file, committed
// end and generation under mu.RLock, pread without it, and discard the
// result if the generation moved (truncated or closed meanwhile; read.go).
// ReplaceSegments holds the cleaner's replace lock throughout and appendMu
// from step 2 on, so it is serialized with retention, DeleteRecords,
// Truncate, ResetTo, Close and other replaces.
// Lock order: cleaner replace lock, appendMu, flushMu, mu, cleaner state lock.
package hotlog
