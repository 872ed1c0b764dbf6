// Package fetch answers the data part of a Kafka Fetch request: for each
// requested partition it plans a read, enforces what a consumer may see, and
// long-polls until enough data is there.
//
// The package knows nothing about the wire: the broker decodes the request,
// resolves topics and partitions (by name or topic id), checks leader epochs,
// and hands the partitions it found to [Fetcher.Fetch] through the small
// [Partition] interface. Fetch returns one [Result] per requested partition,
// in request order, which the broker encodes. Kafka error codes are chosen
// by the broker from the sentinel errors here.
//
// # Visibility
//
// Offsets of a partition, all exclusive upper bounds except the log start:
//
//	logStart            LSO          HW                LEO
//	   |-----------------|------------|-----------------|
//	   [ readable under read_committed )
//	   [ readable under read_uncommitted )
//	                                  [ appended, not yet replicated/flushed )
//
//	LSO <= HW <= LEO; logStart <= HW.
//
// A consumer fetch at offset o gets:
//   - o < logStart or o > LEO: [ErrOffsetOutOfRange] (the client resets);
//   - HW <= o <= LEO (upper bound LSO under read_committed): no records and no
//     error: the data exists but is not committed yet, so the fetch waits;
//   - otherwise whole record batches, verbatim, starting with the batch that
//     holds o (which may begin before o: clients skip the leading records).
//
// read_committed: the broker reports LSO = min(first offset of
// the earliest open transaction, HW), and a read_committed read stops
// there. Its Result carries the aborted transactions overlapping the
// records returned, [o, end of the last batch), from the partition when it
// implements [TxnPartition] (hot reads) or from [ColdTxnPartition]'s
// ReadColdCommitted (cold reads, filtered the same way). The consumer
// drops the records of those producers between each abort's first offset
// and its marker.
//
// # Limits
//
// Request.MaxBytes bounds the bytes of the whole response (capped by
// Config.MaxResponseBytes, Kafka's fetch.max.bytes), PartitionRequest.MaxBytes
// bounds each partition. Both count whole batches. KIP-74: the first batch of
// the first partition that returns data is returned even if it is larger than
// either limit, so that a consumer always makes progress; any later partition
// whose first batch does not fit returns nothing this time.
//
// # Long poll
//
// A fetch is answered at once when the bytes read reach Request.MinBytes,
// when any partition has an error (including one the broker already found,
// marked by a nil Partition), or when MaxWait is zero. Otherwise it waits
// until one of the requested partitions reports a change (its Changed
// channel closes: the HW, LEO or log start moved), re-reads everything and
// checks again, until MaxWait passes or the context ends; then it answers
// with whatever is there. Changed channels are taken before positions are
// read, so a move between the read and the wait is never missed.
//
// # Cold reads
//
// A partition whose history is tiered implements [ColdPartition]: IsCold
// says an offset lies below the local log start, ReadCold reads it from
// the bucket (the broker backs it with tier.ColdReader). Fetch treats such
// reads as slow I/O that must not hold anything else up:
//
//   - when the fetch starts, a read_uncommitted cold partition that
//     implements [ColdCachedPartition] is first read in line from its
//     cache (the broker's cold cache); a hit is ready for the first pass;
//   - every other readable cold partition gets one background read
//     (budget: its partition max bytes, capped by the response's), under
//     a context that ends when Fetch answers;
//   - hot first: when every read still pending missed its cache (it waits
//     on the bucket), a first pass of what is there answers at once if it
//     completes the fetch. The bucket's bytes land in the cache and the
//     next fetch's in-line read finds them, so a consumer whose hot
//     partitions always have data still gets its cold ones;
//   - otherwise the first pass waits up to Config.ColdGrace (20 ms, capped
//     by MaxWait) for the cold reads: a read without a cache path
//     (read_committed) may be a cache hit that has not run yet, and the
//     grace keeps it from being outrun by hot data forever;
//   - each pass reads hot partitions as before and takes a cold
//     partition's result only if its read has finished; a pending one
//     contributes no bytes and no error to that pass;
//   - the long poll also wakes when a cold read finishes. So a fetch whose
//     hot partitions already reach MinBytes answers at once (cold data
//     rides along only if ready); a fetch of cold partitions only waits
//     for the bucket up to MaxWait, then answers without them;
//   - a finished cold result goes through the same trimming as hot data
//     (whole batches, partition and response budgets, KIP-74 first batch),
//     so the offset semantics are identical; a failed cold read (corrupt
//     object, bucket down after retries) is that partition's error and
//     answers the fetch at once, as any partition error does.
//
// A cold read abandoned by an answered fetch is cancelled, but the object
// GETs it started keep running under the cold reader and land in its
// cache, so the consumer's next fetch finds the data. The number of cold
// goroutines is bounded by the partitions of one request; the object-store
// concurrency by the cold reader's own worker pool.
//
// # Later work that plugs in here
//
// Follower fetches read up to the LEO instead of the HW and
// report their position.
package fetch
