package fetch

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// batchLengthEnd is where a batch's length field ends: baseOffset (8) and
// batchLength (4) precede the length-counted bytes. Part of the Kafka
// RecordBatch format, never changes.
const batchLengthEnd = 12

// pass summarizes one read over all partitions.
type pass struct {
	bytes    int  // record bytes in the results
	hasError bool // some partition errored or was answered by the caller
}

// complete reports whether the fetch may be answered now.
func (p pass) complete(req Request) bool {
	return p.hasError || p.bytes >= req.MinBytes
}

// readAll reads every partition once, in request order, under the response
// budget req.MaxBytes. The first partition that returns data may exceed its
// limits by one batch (KIP-74); later ones may not. cold holds the cold
// reads started for this fetch (nil where the partition is read here); a
// cold read not finished yet contributes nothing to this pass.
func (f *Fetcher) readAll(req Request, cold []*coldRead) ([]Result, pass) {
	results := make([]Result, len(req.Partitions))
	var p pass
	for i, pr := range req.Partitions {
		if pr.Partition == nil {
			results[i] = Result{HighWatermark: -1, LastStableOffset: -1, LogStartOffset: -1, Records: []byte{}}
			p.hasError = true
			continue
		}
		limit := min(max(pr.MaxBytes, 0), req.MaxBytes-p.bytes)
		read := pr.Partition.Read
		var aborted abortedFunc
		if tp, ok := pr.Partition.(TxnPartition); ok {
			aborted = tp.AbortedTxns
		}
		if cold != nil && cold[i] != nil {
			read, aborted = cold[i].result, cold[i].abortedTxns
		}
		results[i] = f.readPartition(pr, req.Isolation, limit, p.bytes == 0, read)
		if req.Isolation == ReadCommitted && results[i].Err == nil {
			results[i].AbortedTxns = abortedFor(results[i].Records, pr.Offset, aborted)
		}
		if results[i].Err != nil {
			p.hasError = true
		}
		p.bytes += len(results[i].Records)
	}
	return results, p
}

// abortedFunc is TxnPartition.AbortedTxns's shape.
type abortedFunc func(from, to int64) []hotlog.AbortedTxn

// abortedFor returns the aborts overlapping the records read from offset:
// [offset, end of the last batch). Kafka bounds the search the same way.
func abortedFor(records []byte, offset int64, aborted abortedFunc) []hotlog.AbortedTxn {
	if aborted == nil || len(records) == 0 {
		return nil
	}
	end := offset
	for rest := records; len(rest) > 0; {
		h, err := recordbatch.ParseHeader(rest)
		if err != nil || h.Size() > len(rest) {
			break
		}
		end = max(end, h.LastOffset()+1)
		rest = rest[h.Size():]
	}
	return aborted(offset, end)
}

// visibleEnd is the exclusive bound of what iso may read.
func visibleEnd(pos Positions, iso IsolationLevel) int64 {
	if iso == ReadCommitted {
		return pos.LastStable
	}
	return pos.HighWatermark
}

// readPartition reads one partition through read. limit is its byte
// budget; minOne allows one batch over the budget (KIP-74).
func (f *Fetcher) readPartition(pr PartitionRequest, iso IsolationLevel, limit int, minOne bool, read readFunc) Result {
	pos := pr.Partition.Positions()
	res := Result{
		HighWatermark:    pos.HighWatermark,
		LastStableOffset: pos.LastStable,
		LogStartOffset:   pos.LogStart,
		Records:          []byte{},
	}
	upTo := visibleEnd(pos, iso)
	switch {
	case pr.Offset < pos.LogStart || pr.Offset > pos.LogEnd:
		res.Err = fmt.Errorf("%w: offset %d, log start %d, log end %d", ErrOffsetOutOfRange, pr.Offset, pos.LogStart, pos.LogEnd)
		return res
	case pr.Offset >= upTo:
		return res // not yet visible: empty, not an error
	case limit <= 0 && !minOne:
		return res
	}
	records, err := read(pr.Offset, max(limit, 1), upTo)
	if errors.Is(err, errColdPending) {
		return res // the bucket has not answered yet: nothing this pass
	}
	if err != nil {
		res.Err = f.readError(err, pr.Offset)
		return res
	}
	res.Records = trimBatches(records, limit, minOne)
	return res
}

// readError classifies a Read failure. The log start can move between
// Positions and Read (retention, DeleteRecords), so out-of-range from Read is
// an ordinary answer, not a failure.
func (f *Fetcher) readError(err error, offset int64) error {
	if errors.Is(err, hotlog.ErrOffsetOutOfRange) || errors.Is(err, ErrOffsetOutOfRange) {
		return fmt.Errorf("%w: %w", ErrOffsetOutOfRange, err)
	}
	return fmt.Errorf("%w: offset %d: %w", ErrRead, offset, err)
}

// trimBatches returns the longest prefix of whole batches in b that fits in
// limit bytes; if none fits and minOne is set, the first batch alone. A torn
// tail (a batch whose length runs past b) is dropped. It never allocates.
func trimBatches(b []byte, limit int, minOne bool) []byte {
	end := 0
	for end+batchLengthEnd <= len(b) {
		length := int64(int32(binary.BigEndian.Uint32(b[end+8 : end+batchLengthEnd])))
		size := batchLengthEnd + length
		if length < 0 || int64(end)+size > int64(len(b)) {
			break
		}
		next := end + int(size)
		if next > limit && !(end == 0 && minOne) {
			break
		}
		end = next
		if end >= limit {
			break
		}
	}
	return b[:end]
}
