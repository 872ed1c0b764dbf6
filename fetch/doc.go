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
// Until transactions exist (issue 6) the broker reports LSO == HW, so
// read_committed behaves as read_uncommitted, and aborted transactions are
// always empty.
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
// # Later work that plugs in here
//
// Cold reads (issue 4) implement [Partition] over the tier for offsets below
// the local log start; follower fetches (issue 5) read up to the LEO instead
// of the HW and report their position; read_committed (issue 6) adds aborted
// transactions to [Result].
package fetch
