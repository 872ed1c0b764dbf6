// Package tier is Strata's history tier (DESIGN.md §5): the object store that
// holds sealed segments, and the self-describing segment-object format.
//
// This file fixes the in-bucket format. Everything marked "part of the
// in-bucket format; never change" is read back by every later version of
// Strata, by `strata restore` and by `strata replay`, from buckets written
// years earlier.
//
// # Object store
//
// tier/objstore defines ObjectStore, a small interface (read a range, put,
// list a prefix, delete, stat, is-not-found), its key rules and error
// classes, an in-memory store and the Counting, Latency, Faulty and Retrying
// wrappers. Backends:
//
//	tier/file     a directory (default of `strata serve`; a NAS mount works)
//	tier/s3       AWS S3 and S3-compatible stores (MinIO) through aws-sdk-go-v2
//
// OpenURL maps the --object-store flag to Retrying(Counting(backend)):
//
//	file:///var/lib/strata/objects
//	s3://bucket/prefix?endpoint=http://127.0.0.1:9000&region=us-east-1
//
// Keys are slash-separated relative names (no leading '/', no "." or ".."
// element, no empty element, no NUL byte or backslash, at most MaxKeyLen
// bytes); every backend rejects other keys with ErrInvalidKey. A Put is atomic: a reader
// sees the old object, the new object whole, or nothing, never a part
// (S3 gives this; the file backend writes a temp file, fsyncs, renames).
// Objects are immutable once written: Strata never overwrites a key with
// different bytes (keys carry a random uuid).
//
// # Transient errors and retries
//
// objstore.Retrying wraps a store and retries, with capped exponential
// backoff and full jitter, the errors IsTransient reports: S3 503 SlowDown / 500 / 502 /
// 504 / RequestTimeout / throttling codes, network timeouts, connection
// resets and refused connections (the store restarting), unexpected EOF of
// a body, and anything wrapping ErrTransient (the fault-injecting wrapper's
// errors). Not-found, invalid keys, access denied, cancelled contexts and
// corrupt data are permanent. A Put is retried only when its body can be
// replayed (it implements io.Seeker or io.ReaderAt); re-putting the same key
// with the same bytes is harmless, so a retry never duplicates a segment.
//
// # Key layout (DESIGN.md §5)
//
//	<prefix>/<cluster>/topics/<topic>-<topicId>/<partition:05>/<baseOffset:020>-<epoch>-<uuid>.seg
//	<prefix>/<cluster>/topics/<topic>-<topicId>/topic.json
//	<prefix>/<cluster>/probe/<node>-<random>        (ProbeBucket; deleted at once)
//
// <prefix> is the s3 URL's path (may be empty); the backend prepends it, so
// keys given to an ObjectStore start at <cluster> (SegmentKey, TopicDir).
// <topicId> is the 22-character Kafka string form of the topic UUID; <epoch> is the decimal leader epoch of the uploader; <uuid> is a
// random UUID in its 36-character text form, so that two uploads of the same
// segment (a retry after a crash, two leaders in a race) never overwrite each
// other: the manifest decides which one is live, the sweeper deletes the rest.
// Zero padding makes listing order offset order. SegmentKey builds a key and
// ParseSegmentKey reads one back (restore lists the bucket and parses keys).
// topic.json (TopicFile, at TopicConfigKey) is JSON with the topic's name,
// id, partition count and config overrides; see TopicFile for the schema.
//
// # Segment object
//
// One object per sealed hotlog segment. All integers are big-endian.
//
//	+------------------------------+ 0
//	| batches                      |  the segment's .log bytes, unchanged
//	+------------------------------+ Sections[SectionOffsetIndex].Offset
//	| offset index                 |  8 bytes per entry
//	+------------------------------+
//	| time index                   |  12 bytes per entry
//	+------------------------------+
//	| leader-epoch ranges          |  12 bytes per entry
//	+------------------------------+
//	| producer snapshot            |  hotlog snapshot file bytes, or empty
//	+------------------------------+
//	| aborted-transaction index    |  32 bytes per entry
//	+------------------------------+
//	| chunk CRCs                   |  4 bytes per ChunkSize (1 MiB) of batches
//	+------------------------------+ size - FooterSize
//	| footer                       |  FooterSize (512) bytes
//	+------------------------------+ size
//
// The sections are contiguous, in this order, and exactly fill the object
// before the footer. Reading the last TailReadSize (256 KiB) bytes of an
// object finds the footer and, for segments up to several hundred MiB at the
// default index interval (64 KiB), every index section too; otherwise the
// footer tells which one more range to read.
//
// Offset index entry (one per IndexIntervalBytes of batches; the first batch
// always has one, at position 0):
//
//	+-----------------------+-----------------------+
//	| relativeOffset u32    | position u32          |
//	+-----------------------+-----------------------+
//
// relativeOffset = batch baseOffset - footer baseOffset; position = byte
// position of the batch in the object. Both increase strictly. The batch
// holding offset o starts at or after the position of the last entry with
// relativeOffset <= o and before the position of the entry after it.
//
// Time index entry (made at the same batches as offset-index entries, when
// the running maximum timestamp has grown since the previous time entry; the
// first batch always has one):
//
//	+-----------------------------------------------+-----------------------+
//	| maxTimestampSoFar i64                         | relativeOffset u32    |
//	+-----------------------------------------------+-----------------------+
//
// maxTimestampSoFar is the largest batch maxTimestamp of all batches up to
// and including the batch at relativeOffset. Every relativeOffset of the
// time index also appears in the offset index. Both columns increase
// strictly. The first batch with maxTimestamp >= t lies after the entry's
// batch of the last entry with maxTimestampSoFar < t (or from position 0)
// and at or before the batch of the first entry with maxTimestampSoFar >= t.
//
// Leader-epoch range entry (one per leader epoch that appended batches of
// this segment, taken from the batches' partitionLeaderEpoch):
//
//	+-----------------------+-----------------------------------------------+
//	| epoch i32             | startOffset i64                               |
//	+-----------------------+-----------------------------------------------+
//
// Both columns increase strictly; the first startOffset is the base offset;
// epoch e covers [startOffset, next startOffset) (the last one up to and
// including lastOffset).
//
// Chunk CRCs: CRC-32C (u32) of each footer-chunkSize piece of the batches
// section, the last piece possibly shorter; ceil(batches length / chunk
// size) entries. The batch CRC does not cover a batch's baseOffset, length
// and leader epoch; the chunk CRCs do, so a reader that fetches aligned
// chunks (the cold reader's 8 MiB GETs, ObjectReader) checks every byte it
// serves without reading the whole object.
//
// Producer snapshot: empty, or the bytes of the hotlog producer-state
// snapshot file (hotlog/doc.go, "Producer-state snapshots": version, CRC-32C,
// offset, producers) as of the object's end, i.e. its offset field equals
// lastOffset+1. The uploader takes the snapshot hotlog wrote when it rolled
// past the segment (hotlog.(*Log).ProducerSnapshotAt of the next segment's
// base) and leaves the section empty when there is none. Decoders check it
// with hotlog.CheckProducerSnapshot (which bounds every count by the bytes
// present) and the offset; a follower that restarts its log at a leader's
// local log start S installs the snapshot of the object ending exactly at
// S (replication/follower/restart.go), so it still recognises retried batches
// written before S.
//
// Aborted-transaction entry (Kafka's .txnindex without its version field):
// the segment's hotlog .txnindex at upload, i.e. the aborts whose marker
// lies in the object; entries ordered by lastOffset (strictly increasing,
// within [baseOffset, lastOffset] of the object), 0 <= firstOffset <=
// lastOffset (firstOffset may lie in an earlier object), producerId >= 0,
// lastStableOffset <= lastOffset+1. A read_committed cold read collects
// the entries of the object it reads and of the following ones (see
// tier.ColdSource), as Kafka's remote fetch does.
//
//	+------------------+------------------+------------------+------------------+
//	| producerId i64   | firstOffset i64  | lastOffset i64   | lastStableOffset |
//	+------------------+------------------+------------------+------------------+
//
// # Footer (FooterSize = 512 bytes, the last bytes of the object)
//
//	offset size field
//	     0    8 magic "STRATAsg"
//	     8    2 version (1)
//	    10    2 footer size (512)
//	    12    4 flags (0; readers reject unknown bits)
//	    16   16 topic id (UUID bytes)
//	    32    4 partition i32
//	    36    4 upload leader epoch i32 (the <epoch> of the key)
//	    40    8 base offset
//	    48    8 last offset (of the last record of the last batch)
//	    56    8 first timestamp (firstTimestamp of the first batch)
//	    64    8 max timestamp (largest batch maxTimestamp)
//	    72    8 offset of max timestamp (last offset of the first batch that has it)
//	    80    4 batch count u32
//	    84    4 chunk size u32 (a power of two in [64 KiB, 64 MiB]; 1 MiB written)
//	    88  140 7 sections x { offset u64, length u64, crc32c u32 }:
//	            batches, offset index, time index, leader epochs,
//	            producer snapshot, aborted transactions, chunk CRCs
//	   228    2 topic name length (1..MaxTopicNameLen = 249)
//	   230  249 topic name, zero-padded
//	   479   29 reserved (0)
//	   508    4 CRC-32C (Castagnoli) of footer bytes 0..507
//
// CRC-32C of an empty section is 0. The decoder (DecodeFooter,
// DecodeIndexSections) checks the magic, version, size, flags, the footer
// CRC, that the sections are contiguous from 0 and end at the footer, that
// each index length is a multiple of its entry size and at most
// MaxIndexSectionBytes, every section CRC, and the index invariants above.
// Any violation is ErrCorruptObject: nothing from the bucket may panic or be
// served unchecked. A reader of batches (ObjectReader) additionally checks
// the CRC of every chunk it reads and each batch's own CRC-32C before
// returning it. Decoders allocate at most MaxIndexSectionBytes per object
// index, whatever the footer says.
//
// # Writing an object (EncodeSegmentObject)
//
// The encoder reads the segment's .log once, validating every batch (framing,
// magic 2, CRC, increasing offsets, non-decreasing leader epochs) and
// building the indexes, epoch ranges, chunk CRCs and the batches CRC; it then
// returns an EncodedObject whose NewReader streams batches+sections+footer
// from the .log file without copying it into memory. The tail it built is
// decoded again before it is returned, so the encoder never emits an object
// its own reader would reject.
//
// # Plugging in the uploader and the cold reader
//
// Uploader, per sealed segment wholly below the HW:
//
//	obj, err := tier.EncodeSegmentObject(logFile, logSize, tier.SegmentMeta{...})
//	key, err := tier.SegmentKey(tier.SegmentKeyParts{Cluster, Topic, TopicID, Partition,
//	        BaseOffset: obj.Footer().BaseOffset, Epoch: leaderEpoch})
//	err = bucket.Put(ctx, key, obj.NewReader(), obj.Size())   // multipart + retries below
//	err = tier.Verify(ctx, bucket, key, obj.Footer(), false)   // then the manifest CAS
//
// A manifest entry should carry key, size, base/last offset, max timestamp
// and the upload epoch (all in the Footer), so that a reader opens an object
// with OpenObject(ctx, store, key, size) without a Stat.
//
// Cold reader: OpenObject once per object (cache the ObjectIndex, about
// 0.03% of the object); OffsetSpan / TimestampStart give a batch boundary;
// fetch aligned chunks of k*Footer.ChunkSize bytes (8 MiB = 8 chunks) with
// ReadRange, check each 1 MiB piece with ObjectIndex.VerifyChunk before
// caching it, and cut batches with CheckStoredBatch. ObjectReader.ReadBatches
// is the simple uncached version of the same (restore, replay, tests).
//
// # Cold cache memory (block_arena.go, cold_cache.go)
//
// Blocks live in a blockArena: anonymous mappings outside the Go heap, in
// power-of-two slots (64 KiB up) reused through free lists. CacheBytes is
// the arena's budget and bounds every block: cached, in flight, and
// evicted while a reader still holds it. A GET takes a slot inside its
// worker slot, evicting least recently used blocks that only the cache
// holds; when every slot is held it reads into heap memory and the block
// is served but not cached. Invariants, all under ColdReader.mu:
//
//	refs = (1 if cached) + waiters handed the block by its flight
//	       + cursors holding it
//	refs == 0  =>  the slot is back in the arena; no view of it remains
//
// A cursor releases its blocks when its read ends, so Read copies its
// answer out first: the caller keeps a heap slice, never a view of a slot.
// A waiter that gives up before its flight finishes leaves the flight's
// waiter count; after, it releases the reference the flight gave it.
//
// # Cold-read governor (governor.go, run_delay.go)
//
// A flat-out backfill must not take the CPU the hot tail needs. The cold
// reader's governor (ColdConfig.Governor, on by default) limits the byte
// rate of cold GETs, and with it the CRC, copying and sending that follow
// each byte, by an AIMD law stepped every Interval (100 ms):
//
//	signal  w = seconds per second the broker's threads waited in the
//	            kernel's run queues for a CPU over the interval
//	            (/proc/self/task/*/schedstat; run_delay.go says why not
//	            the Go scheduler's latency)
//	hot     = some produce, or a fetch read from a local log (consumer
//	          or follower), ran during the interval (ColdReader.NoteHot)
//	no hot:             limit = unlimited (nothing to protect)
//	hot and w > Target: limit = max(Floor, limit/2), starting from the
//	                    interval's observed cold rate (unlimited stays
//	                    unlimited if the cold path was idle: not its fault)
//	hot and w <= Target: limit += Step; past Ceiling, unlimited again
//
// Target 0.3 thread-seconds per second: on the 2-core benchmark machine a
// hot tail alone waits about 0.45 on average (every interval counts, most
// below 0.3 when the client is quiet), a flat-out backfill beside it about
// 0.95. test/bench/cold.sh with targets off / 0.3 / 0.6 / 1.0 gave the hot
// tail's p99 121.6 / 3.1 / 5.3 / 11.0 ms (alone: 2.4-4.1 ms) and the
// backfill 653 / 144 / 167 / 241 MB/s. Floor 4 MiB/s keeps a backfill
// moving; Step 8 MiB/s per interval (80 MiB/s per second) recovers a
// halved rate within seconds; Ceiling 1 GiB/s is more than the cold path
// reaches here. The limit is a token bucket (burst one block) checked by
// each block GET inside its worker slot, so a throttled backfill also holds
// fewer workers. Stats.Governor reports the limit, the signal and the time
// GETs waited (/metrics: strata_cold_governor_*). Where the kernel does not
// report run-queue wait the governor is off (logged at start).
//
// # Tiered compaction
//
// Compactor.Compact takes a contiguous run of one partition's manifest
// entries (at most MaxRunObjects; the etcd transaction holds olds plus
// news) and a RewriteFunc from package compaction:
//
//  1. Download: each old object is opened (footer and index CRCs), its
//     batches streamed through whole verified CRC chunks and each batch's
//     CRC; a footer that does not match its entry is ErrCorruptObject.
//     The rewrite sees all the run's batches as one BatchSource (the "last
//     batch of each producer" rule needs the whole run) and must read it
//     to the end.
//  2. Rewrite into a temp file; every output batch is checked (CRC,
//     strictly increasing offsets inside the run).
//  3. Cut and merge: the output is cut at batch boundaries into
//     k = min(#olds, max(1, ceil(out/segment.bytes))) objects of about
//     equal size, so small outputs merge and the object count never grows.
//     Objects are written with EncodeSegmentObject: indexes and epochs are
//     rebuilt, the aborted-transaction section carries the old entries
//     whose abort marker (the control batch at LastOffset) was kept, and
//     the last object carries the last old object's producer snapshot when
//     it still ends at the same offset (else none: the snapshot must be as
//     of the object's end). Each object is put and verified.
//  4. Swap: metadata.SwapTierEntriesRev replaces the olds by the news in
//     one etcd transaction guarded by the olds' versions. The new entries
//     claim exactly the run's offsets, gap-free: the first starts at the
//     run's base, each next one at the previous LastOffset+1, the last ends
//     at the run's LastOffset. An entry may therefore claim offsets before
//     its object's first batch or after its last one (compacted away);
//     ColdReader.Read answers an offset past an object's last batch with no
//     batches, and the caller moves on to the next entry. New keys use the
//     entry's base offset.
//  5. Delete: the old objects are queued and deleted by DeleteDue once
//     DeleteGrace (default 5m) has passed, so cold reads in flight finish.
//     PendingDeletes lists them for the orphan sweeper to spare.
//
// Failures: a failed guard (the run changed) deletes the new objects at
// once, nothing else changed. An etcd error leaves the outcome unknown: the
// new objects are left, and if the swap did not happen the orphan sweeper
// removes them (they are absent from the manifest). A crash before the
// swap leaves only orphans; after it, the delete queue is lost and the old
// objects, absent from the manifest and older than OrphanGrace, are the
// sweeper's. A cold read whose object was deleted (its broker's manifest
// lagged, or the sweeper removed it) fails with ErrObjectGone; the caller
// re-reads the manifest and retries (RetryGone), it never reaches a client.
//
// Manifest.Apply handles the swap's watch events (puts of the new entries
// first, then deletes of the old, at one revision) so that the run is
// covered after every single event; Manifest.Swapped applies a local swap
// in one step. See Manifest for the overlap and staleness rules.
//
// # Merging small objects (merge.go)
//
// A leader rolls a trickling partition's active segment every half
// tier.upload.max.lag.ms, so the bucket gets one small object per roll.
// The leader merges them back: PlanMerges picks runs, and each run goes
// through Compactor.Compact with CopyBatches as its RewriteFunc. A merged
// object is an ordinary segment object: nothing in the format marks it, and
// cold reads, replay, restore, retention and the sweeper treat it as one
// uploaded segment. Its invariants:
//
//   - Its batches are the old objects' batches, byte for byte and in order
//     (nothing decompressed; offsets, timestamps, producer fields and CRCs
//     as they were).
//   - Its entry claims exactly the run's offsets, from the first old
//     entry's BaseOffset to the last one's LastOffset; its key's base is
//     the run's base, its <epoch> the merging leader's.
//   - Offset and time indexes, epoch ranges and chunk CRCs are rebuilt by
//     EncodeSegmentObject; the aborted-transaction section is the union of
//     the old ones (every marker is kept); the producer snapshot is the last
//     old object's, as of the run's end.
//   - One object per run: the old objects' sizes add up to at most
//     segment.bytes, so the Compactor writes a single piece, and every
//     merged object ends where an uploaded object ended and carries the
//     producer state there (a cut between pieces would carry none).
//
// Runs (PlanMerges): 2 to MaxRunObjects consecutive entries, contiguous in
// offsets, none across a boundary the caller keeps (the leader's local log
// start, a compacted partition's tier checkpoint), each old enough, below
// the caller's limit and not full (5/6 of segment.bytes or more), at most
// segment.bytes and segment.ms in all. A run is merged when no member holds
// more than half of its bytes (a byte rewritten lands in an object at least
// twice as large, so it is copied at most log2(segment.bytes/first size)
// times) or when the merged object is full. Each merge removes at least one
// object, so merging never costs more requests than the uploads it follows.
//
// Age: a TierEntry has no upload time (the key's uuid is random, Version is
// an etcd revision), so an object's age is its newest record's:
// MaxTimestamp, the clock retention.ms and min.compaction.lag.ms already
// use. An early-rolled object's MaxTimestamp is within half the bound plus
// the upload of its upload time; a producer clock ahead delays a merge by at
// most message.timestamp.after.max.ms, one behind merges early, which costs
// a rewrite but no reader (old objects wait DeleteGrace).
//
// Swap, deletion and failures are tiered compaction's (above).
//
// # Restore (restore.go)
//
// `strata restore` rebuilds a topic's manifest from the bucket alone.
// ListBucketTopics lists <cluster>/topics/: every incarnation (topic id)
// of each name with its topic.json (FileErr when unusable), object count
// and newest ModTime, the latest incarnation of a name first.
// RestorePartitionPlan plans one partition from FindReplayTopic's listing:
//
//   - PlanReplay chooses the objects (ranking above); every object with a
//     piece becomes an entry as the uploader would have written it:
//     BaseOffset = key base, LastOffset, timestamps from the footer,
//     LeaderEpoch = its last batch's epoch (leader-epoch section), Key,
//     Size. Retried uploads of one range give one entry. LogStart is the
//     first piece's From; BucketEnd one past the last piece's To.
//   - Without AsOf the cut E is BucketEnd. With AsOf T (ms, truncated), E
//     is the offset of the first record in plan order whose timestamp is
//     after T (CreateTime: firstTimestamp+delta; LogAppendTime: the batch's
//     maxTimestamp; control records count: a marker after T ends its
//     transaction after T). Later records are dropped even when their
//     timestamp is <= T. A batch whose maxTimestamp is <= T is trusted to
//     hold no later record, as the time indexes and ListOffsets trust it.
//     The restored topic gets a new id: the old incarnation's objects stay
//     untouched, so a restore to another T stays possible.
//   - Objects with a piece below E that end below E are referenced as they
//     are. Of those reaching past E, the one with the lowest first batch
//     is rewritten into the tail object: its batches below E, the one
//     straddling E re-encoded with the same codec and header but only its
//     records below E (lastOffsetDelta = E-1-base, so the producer's last
//     sequence stays right; maxTimestamp of the kept records unless
//     LogAppendTime). Any object covering an offset holds the right record
//     there, so this one copy covers [its key base, E-1]; kept objects
//     inside that range are left out, the others reaching past E too.
//   - Producer state at E: the producer snapshot of an object ending at
//     the start of the rewritten object (or, with no cut, of an object
//     ending at E), then that object's batches below E applied with
//     hotlog.ProducerTable. Without such a snapshot the scan starts empty
//     (StateGuessed): a transaction seen only before that object is missed.
//   - Every transaction still open at E gets an ABORT marker (offsets E,
//     E+1, ... by first offset): the producer's id and epoch, coordinator
//     epoch 0, leader epoch MaxEpoch+1 (the restore epoch), timestamp T
//     (without AsOf the largest restored timestamp). Its aborted-
//     transaction entry (first offset, marker offset, LSO = first offset of
//     the next still open, else marker+1) joins the rewritten object's
//     entries whose marker lies below E. No one could ever end these
//     transactions (the transaction coordinator's state is not restored),
//     so markers are written without AsOf too, in a markers-only object
//     when no object is cut. End = E + markers.
//   - The tail object (rewritten batches, markers) is encoded with the
//     producer snapshot as of End, upload epoch = restore epoch, key base =
//     the rewritten object's key base (else E), under the restored id's
//     directory; it is put, then verified whole (deleted if that fails).
//
// MaxEpoch is the largest upload or batch epoch of the bucket objects
// restored; the restored partition's leader epoch is MaxEpoch+1, so new
// batches carry a larger epoch than any restored one. Dropped = BucketEnd
// - E offsets; Gaps lists unclaimed ranges below E. Everything read is
// bounded (sections by MaxIndexSectionBytes, decompression by
// MaxBatchBytes) and checked (footer, section and chunk CRCs, batch CRCs,
// snapshot invariants): damage is ErrCorruptObject, never a panic.
//
// # Tiering service (service.go, uploader.go, retention.go, hold.go, sweeper.go, merger.go, bound.go, status.go)
//
// Service runs tiering for one broker. It owns the upload bookkeeping,
// the delayed object deletes, the topic.json memory, the last retention
// hold of each led partition and the counters (Service.mu guards them;
// it is never held across I/O and nests inside nothing). Everything else
// it reads through consumer-owned interfaces: Partition (a local
// replica's hot log, configs, leadership, high watermark and last stable
// offset, upload lag), Registry (the local replicas and topics), Store
// (the metadata store's tier slice: CommitTierEntryRev, TierEntries,
// DeleteTierEntries, RaiseTierLogStart, TopicIDKnown, RetentionHolds)
// and Cleaning (the tiered cleaner's checkpoint and due-ness, and its
// delayed deletes). It never imports the broker.
//
// Run starts two goroutines. The uploader never does object-store I/O
// itself (uploads run in goroutines of their own, at most
// UploadConcurrency), so a hanging bucket cannot stop upload lags from
// being refreshed. The janitor runs the due object deletes, the orphan
// sweeper and the merge pass.
//
//   - Uploader (UploadRound, every UploadInterval or when an upload
//     finishes), for the partitions this broker leads: first the active
//     segments tier.upload.max.lag.ms says are due are rolled (bound.go:
//     once the first batch is half the bound old); then each sealed,
//     non-empty segment wholly below the HW and LSO that the manifest does
//     not cover, in offset order, is encoded (EncodeSegmentObject over an
//     open fd of the .log, so retention cannot pull it away), Put, verified
//     (HEAD + footer read back equal to what was encoded), then committed
//     with a create-if-absent CAS. A partition stops at its first failure,
//     so its manifest never has a gap, and retries later with exponential
//     backoff (RetryBackoff .. MaxRetryBackoff), re-putting the same key
//     for the same segment and epoch. A commit that reports
//     ErrTierEntryExists (an earlier attempt committed but its answer was
//     lost) adopts the committed entry when it covers the same offsets and
//     deletes the new object. Only the part of a segment the manifest does
//     not cover is uploaded (after a leader change the new leader's
//     segment may straddle the old leader's last object). topic.json is
//     written before a topic's first upload and after each config change.
//   - Local retention (ApplyRetention, from the broker's retention loop):
//     a tiered log never deletes by time or size a segment that ends above
//     the end of the manifest's gap-free run (or the tiered log start), so
//     a segment is deleted locally only after its manifest entry exists.
//   - Remote retention, on the leader: the oldest entries wholly below the
//     log start, older than retention.ms or over retention.bytes (tiered
//     bytes + local bytes above them) go: the tiered log start is raised in
//     etcd first, the entries deleted (CAS on their versions), and their
//     objects deleted ObjectDeleteDelay later, so cold readers in flight
//     finish — manifest entry first, then object. DeleteRecords raises the
//     log start the same way (etcd first, so a restart cannot resurrect
//     offsets from the bucket, then the hot log) and removes the entries
//     wholly below it at once.
//   - Retention hold (hold.go), on the leader, for a topic whose
//     effective retention.hold.ms or retention.hold.bytes is > 0 (-1
//     takes the broker's RetentionHold / RetentionHoldBytes, 0 turns a
//     bound off). Of the n entries remote retention would delete, the
//     ones wholly below the log start always go. need is the lowest
//     committed offset at or above the log start among the partition's
//     holds committed within HoldActiveWindow (the offsets retention;
//     older holds and holds below the log start hold nothing); from the
//     first doomed entry with LastOffset >= need on, entries are held, and
//     since deletion takes a prefix nothing after a held entry goes. Held
//     entries are released oldest first while the oldest is due by time
//     (hold.ms > 0 and now >= MaxTimestamp + max(retention.ms, 0) +
//     hold.ms) or the held bytes exceed hold.bytes (> 0). So an object a
//     group needs goes neither before retention.ms + hold.ms (unless the
//     byte bound releases it) nor later than the first pass after it. The
//     holds (metadata.RetentionHold, etcd's
//     retention-holds/, published by the group coordinators) are read at
//     most once per pass and only when a led partition with a hold has a
//     doomed entry at or above its log start; if the read fails, only
//     the entries below the log start go that pass
//     (Counters.RetentionHoldReadFailures). Local retention is never
//     held. Status reports the held objects, bytes and groups of the last
//     pass.
//   - Orphan sweeper (every SweepInterval; every broker sweeps): objects
//     under <cluster>/topics/ older than OrphanGrace that no manifest entry
//     names, checked again against etcd, are deleted, as are topic.json
//     files of deleted topics; but only objects of a topic id etcd has live
//     or records as deleted: an id etcd does not know is an index lost or
//     not yet rebuilt by `strata restore`, and its objects are kept.
//   - Merge pass (merger.go, every MergeInterval): see PlanMerges below.
//   - Upload lag: after each look at a partition the uploader stores the
//     bytes of its sealed segments not yet in the manifest
//     (Partition.UploadLag). While that exceeds MaxUploadLagBytes,
//     ThrottleUploadLag makes a Produce wait up to ThrottleWait for it to
//     fall, then fails with ErrUploadLag (the broker answers
//     THROTTLING_QUOTA_EXCEEDED), so a broker cut off from its bucket stops
//     taking data before its disk fills.
//
// ColdSource (coldsource.go) serves a partition's offsets below its local
// log start from the objects the manifest names, through the broker's
// ColdReader: a read looks its entry up again after ErrObjectGone (an
// object swapped out by cleaning or merging), walks at most 4 entries past
// compaction gaps, and collects read_committed aborts from at most 8
// objects' sections and then the local log. Failures other than
// cancellation wrap hotlog.ErrStorage.
package tier
