package hotlog

// Producer state rebuilt outside a Log, for `strata restore` (package tier,
// restore.go): load the producer snapshot of a tiered object, apply the
// batches of the next object up to a cut, read the transactions still open
// there, apply the ABORT markers restore appends, and encode the snapshot
// that the restored tail object carries. The same table code as the log's
// (producers.go, txn.go) does the work, so the result is what a log that had
// appended those batches would hold.

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/strata-log/strata/recordbatch"
)

// OpenTxn is a transaction still open in a ProducerTable.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64 // first offset of the transaction's first batch
}

// ProducerTable is a producer table outside any Log. Owned by one
// goroutine; the zero value is not ready (use NewProducerTable).
type ProducerTable struct {
	table producerTable
	next  int64 // one past the last offset applied (or the snapshot's offset)
}

// NewProducerTable loads snapshot, the bytes of a producer snapshot (the
// format of doc.go, checked as CheckProducerSnapshot does: nothing in it
// can make this panic), or starts empty at offset 0 when snapshot is empty.
// It returns the offset the snapshot is as of. Errors wrap
// ErrBadProducerSnapshot.
func NewProducerTable(snapshot []byte) (*ProducerTable, int64, error) {
	if len(snapshot) == 0 {
		return &ProducerTable{table: newProducerTable()}, 0, nil
	}
	if len(snapshot) > maxSnapshotFileSize {
		return nil, 0, fmt.Errorf("%w: %d bytes", errBadSnapshot, len(snapshot))
	}
	offset, table, err := decodeProducerSnapshot(snapshot)
	if err != nil {
		return nil, 0, err
	}
	return &ProducerTable{table: table, next: offset}, offset, nil
}

// Apply applies one whole stored batch at its offsets, as a follower or
// recovery would: a data batch of a producer records its sequence and, if
// transactional, opens the producer's transaction when none is open; a
// control batch (its single record a ControlRecordKey and an EndTxnMarker)
// ends it. For an abort marker it returns the aborted-transaction entry
// the log's .txnindex would get. The batch must pass recordbatch.ValidateStored
// first (the caller's job); a bad marker wraps ErrCorruptBatch.
func (s *ProducerTable) Apply(batch []byte) (AbortedTxn, bool, error) {
	h, err := recordbatch.ParseHeader(batch)
	if err != nil {
		return AbortedTxn{}, false, err
	}
	var m txnMarker
	if h.Control() && idempotent(h) {
		if m, err = parseTxnMarker(batch[:h.Size()]); err != nil {
			return AbortedTxn{}, false, err
		}
	}
	a, aborted := s.table.applyBatch(h, m)
	s.next = max(s.next, h.LastOffset()+1)
	return a, aborted, nil
}

// OpenTxns returns the transactions open in the table, by first offset
// (then producer id).
func (s *ProducerTable) OpenTxns() []OpenTxn {
	var out []OpenTxn
	for id, e := range s.table.entries {
		if e.currentTxnFirstOffset != noOffset {
			out = append(out, OpenTxn{ProducerID: id, ProducerEpoch: e.epoch, FirstOffset: e.currentTxnFirstOffset})
		}
	}
	slices.SortFunc(out, func(a, b OpenTxn) int {
		if c := cmp.Compare(a.FirstOffset, b.FirstOffset); c != 0 {
			return c
		}
		return cmp.Compare(a.ProducerID, b.ProducerID)
	})
	return out
}

// Snapshot encodes the table as a producer snapshot as of offset, which
// must be at or past every offset applied (a snapshot holds only state
// below its offset; CheckProducerSnapshot would reject it otherwise).
func (s *ProducerTable) Snapshot(offset int64) ([]byte, error) {
	if offset < s.next || offset > maxOffset {
		return nil, fmt.Errorf("%w: snapshot as of %d, state reaches %d", errBadSnapshot, offset, s.next)
	}
	return encodeProducerSnapshot(offset, &s.table), nil
}

// MaxProducerID is the largest producer id the table holds, -1 if none: a
// restored cluster must hand out larger ones, or a new producer would
// inherit a restored producer's sequence state.
func (s *ProducerTable) MaxProducerID() int64 {
	out := int64(-1)
	for id := range s.table.entries {
		out = max(out, id)
	}
	return out
}
