// Package compaction is the log cleaner for cleanup.policy=compact
// (DESIGN.md §7). It has two layers:
//
//   - The algorithm, pure apart from io.Reader and []byte: a bounded key ->
//     latest-offset map (OffsetMap), the scan that fills it (BuildMap), and
//     the rewrite of record batches (Rewriter), described below.
//   - The shell, Cleaner (cleaner*.go): one goroutine per broker that picks
//     the dirtiest compacted partition and runs a pass over its local
//     sealed segments (cleaner_local.go) or, on the leader of a tiered
//     partition, over the bucket's objects (cleaner_tier.go). A partition
//     whose local pass failed for good is skipped until restart
//     (PartitionState.Uncleanable). It sees the
//     broker only through interfaces it owns: Partitions/Partition (the
//     local replicas, their hotlog, topic config, HW, LSO, leadership),
//     Log (the slice of *hotlog.Log it drives), Manifest (*tier.Manifest)
//     and TierStore (tier.Compactor, verified object reads, the objects'
//     aborted transactions; BucketStore is the one over package tier). It
//     never imports the broker.
//
// The cleaner's memory of a partition is PartitionState, owned by the
// replica and written only by the goroutine running passes: the totals
// (status, metrics), the tombstones kept by the last pass (a pass runs
// again once they are past delete.retention.ms), and the tier checkpoint
// (in memory only: a new leader re-cleans the bucket once, which is
// idempotent and swaps nothing when nothing changes). The local checkpoint
// is the hot log's own (hotlog.Log.CleanerCheckpoint, durable).
//
// # Terms
//
//   - dirty range: offsets at or above the cleaner checkpoint, not yet cleaned.
//   - firstUncleanable: the first offset the cleaner may not touch: the active
//     segment's base, the LSO / high watermark, or the first batch younger than
//     min.compaction.lag.ms (by batch MaxTimestamp), whichever is lowest. The
//     caller computes it and never feeds batches at or above it.
//   - map end: the first offset not covered by the offset map (BuildMap's
//     result); equal to firstUncleanable when the whole dirty range fit.
//   - delete horizon: NowMs - delete.retention.ms.
//
// # A cleaning pass
//
//	m := NewOffsetMap(budget)
//	mapEnd, err := BuildMap(m, dirtyBatches, checkpoint, firstUncleanable, aborted, maxDecompressed)
//	rw := NewRewriter(Policy{Map: m, MapEnd: mapEnd, ...})
//	for each batch of the rewritten range: rw.Plan(batch)   // pass 1: headers only
//	for each batch of the rewritten range: out, kept, err := rw.Batch(batch)
//	new checkpoint = mapEnd
//
// The rewritten range is every sealed batch from the log start offset up to
// the end of the segment holding mapEnd-1 (batches past mapEnd pass through
// unchanged). Rewriting from the log start on every pass is what makes the
// tombstone and marker rules below safe: an older value of a key is always
// removed in the same pass as, or an earlier pass than, the tombstone that
// deleted it.
//
// # Rules (Kafka's, for the v2 batch format)
//
// A data record survives iff all of:
//
//   - its offset >= MapEnd (not yet covered by the map: always kept, the next
//     pass cleans it), or its key is not in the map, or its offset >= the
//     map's latest offset for its key (keys compare by bytes, see the map);
//   - its batch is not aborted transactional data: a batch with the
//     transactional attribute of producer P at base offset o is aborted iff
//     some hotlog.AbortedTxn of P has FirstOffset <= o <= LastOffset;
//   - it is not a tombstone (null value) past the delete horizon: a tombstone
//     is dropped only when its batch's MaxTimestamp < NowMs -
//     delete.retention.ms. (This is pre-KIP-534 Kafka's "segment last
//     modified" rule, with the batch's own max timestamp instead of the file's
//     mtime: consumers had delete.retention.ms after the delete was written to
//     see it.)
//   - it has a key: keyless records cannot be compacted; Kafka's cleaner drops
//     them and so do we (they can only predate a switch to compact, since the
//     produce path rejects them with INVALID_RECORD).
//
// Batches are rewritten, never merged. BaseOffset, LastOffsetDelta, producer
// id / epoch, base sequence, partition leader epoch, attributes (codec,
// transactional, control, timestamp type), FirstTimestamp and MaxTimestamp are
// preserved; only the records and RecordCount shrink. Kept records keep their
// bytes' meaning (offset and timestamp deltas unchanged) and are re-encoded
// with kmsg and recompressed with the batch's own codec; Length and CRC-32C are
// recomputed. A batch whose records all survive is passed through byte for
// byte. A stored batch may therefore have RecordCount < LastOffsetDelta+1
// (recordbatch.ValidateStored accepts that).
//
// A data batch left with no records is dropped, except the last data batch of
// each producer id (ProducerID >= 0) in the rewritten range, which is kept
// with zero records (and, when compressed, a valid empty frame, since some
// clients decompress before reading the count) so the producer's epoch and
// last sequence survive a rebuild of producer state from the log. "Last" is
// learned in a first pass (Plan); a caller that cannot make two passes sets
// Policy.LastDataOffsets from the log's producer state instead (then, as in
// Kafka, only the batch that is its producer's last in the whole log is
// protected).
//
// A control batch (commit/abort marker) of producer P is kept unless all of:
//
//   - it is past the delete horizon (MaxTimestamp < NowMs - delete.retention.ms);
//   - no data batch with the transactional attribute of P between P's previous
//     control batch and this one is kept in the output (an emptied but retained
//     batch counts: without its marker it would look like an open transaction);
//   - the start of that transaction lies inside the rewritten range: a previous
//     control batch of P was seen in this range, or Policy.FromLogStart says
//     the range starts at the log start offset. Otherwise the marker's data may
//     lie before the range and the marker is kept.
//
// # Offset map design and memory accounting
//
// OffsetMap is an open-addressing hash table of fixed size: one slot is 24
// bytes (a 128-bit key hash and an int64 offset+1, 0 meaning empty), the slot
// count is budgetBytes/24 and at most 90% of the slots are filled, so probe
// chains stay short and the map never allocates after NewOffsetMap. Keys are
// not stored. The 128-bit hash is two independent 64-bit hash/maphash values
// under two seeds drawn at random per map; an attacker who does not know the
// seeds cannot aim collisions. Two different keys match only if both 64-bit
// halves collide: for a map holding n keys, a lookup of a key not in it falsely
// matches with probability at most n/2^128 (n = 10^9 gives below 3*10^-30 per
// lookup; 10^15 lookups over a cluster's lifetime below 3*10^-15). A false
// match can only make a record look superseded, which would drop it, so the
// probability above is the probability of loss.
//
// BuildMap admits a batch only if the map can take all of its records as new
// keys (Len + RecordCount <= capacity), so the map always ends at a batch
// boundary and every recorded offset is below the map end.
//
// # Rewrite output
//
// Rewriter.Batch returns one output batch per input batch, or none. Output
// offsets are the input offsets, so output batches are strictly increasing
// and the caller can append them to a cleaned segment as they come. Stats
// counts records, bytes and batches in and out, and why records were dropped.
//
// # Concurrency
//
// An OffsetMap and a Rewriter are not safe for concurrent use: they belong
// to the one pass that created them. A Cleaner runs passes from one
// goroutine (Run; at most one per Cleaner); its exported single-pass
// methods (CleanPartition, CleanTiered, CleanOnce, CleanTierOnce) are for
// callers that drive passes themselves (benchmarks, tests) where Run is off
// or cannot pick the same partition: two passes on one partition at once
// would race on its checkpoints. FirstUncleanable, TierCleanableBytes, TierDue and
// PartitionState's readers are safe from any goroutine.
package compaction
