package hotlog

// Transactions (doc.go, "Transactions"): transaction markers (control
// batches), the ongoing transactions that hold back the last stable
// offset, and the aborted transactions read_committed consumers skip.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// ErrTransactionCoordinatorFenced: a marker carries a coordinator epoch
// older than the last marker's for that producer
// (TRANSACTION_COORDINATOR_FENCED).
var ErrTransactionCoordinatorFenced = errors.New("hotlog: transaction coordinator fenced")

// maxMarkerBytes bounds the decompressed records of a control batch: one
// record with a 4-byte key and a 6-byte value is a few dozen bytes.
const maxMarkerBytes = 4 << 10

// Control record key types (Kafka's ControlRecordType).
const (
	controlTypeAbort  = 0
	controlTypeCommit = 1
)

// AbortedTxn is one entry of a segment's aborted-transaction index
// (Kafka's AbortedTxn): the producer's data from FirstOffset to LastOffset
// (the abort marker) is to be skipped by read_committed consumers.
// LastStableOffset is the partition's last stable offset right after the
// abort (the first offset of the earliest other ongoing transaction, else
// LastOffset+1): once an entry with LastStableOffset >= to has been seen,
// no later abort can overlap offsets below to.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnMarker is the content of a control batch's single record.
type txnMarker struct {
	commit           bool
	coordinatorEpoch int32
}

// parseTxnMarker decodes the marker of a control batch: exactly one record
// whose key is a ControlRecordKey of type abort (0) or commit (1) and whose
// value is an EndTxnMarker.
func parseTxnMarker(batch []byte) (txnMarker, error) {
	recs, err := recordbatch.DecodeRecords(batch, maxMarkerBytes)
	if err != nil {
		return txnMarker{}, err
	}
	if len(recs) != 1 {
		return txnMarker{}, fmt.Errorf("%w: control batch with %d records, want 1", ErrCorruptBatch, len(recs))
	}
	var key kmsg.ControlRecordKey
	if err := key.ReadFrom(recs[0].Key); err != nil || key.Version < 0 {
		return txnMarker{}, fmt.Errorf("%w: bad control record key", ErrCorruptBatch)
	}
	if key.Type != controlTypeAbort && key.Type != controlTypeCommit {
		return txnMarker{}, fmt.Errorf("%w: control record type %d is not a transaction marker", ErrCorruptBatch, key.Type)
	}
	var val kmsg.EndTxnMarker
	if err := val.ReadFrom(recs[0].Value); err != nil || val.Version < 0 {
		return txnMarker{}, fmt.Errorf("%w: bad end-transaction marker value", ErrCorruptBatch)
	}
	return txnMarker{commit: key.Type == controlTypeCommit, coordinatorEpoch: val.CoordinatorEpoch}, nil
}

// parseMarkers decodes the marker of every control batch of an append,
// indexed like hdrs (zero for data batches). Any bad marker rejects the
// append: a control batch must be a transaction marker from a producer.
func parseMarkers(batches []byte, hdrs []recordbatch.Header) ([]txnMarker, error) {
	var out []txnMarker
	pos := 0
	for i, h := range hdrs {
		if h.Control() {
			if !idempotent(h) {
				return nil, fmt.Errorf("%w: control batch without a producer id", ErrCorruptBatch)
			}
			m, err := parseTxnMarker(batches[pos : pos+h.Size()])
			if err != nil {
				return nil, err
			}
			if out == nil {
				out = make([]txnMarker, len(hdrs))
			}
			out[i] = m
		}
		pos += h.Size()
	}
	return out, nil
}

// checkMarkers applies Kafka's marker checks on the leader: the marker's
// producer epoch may not be older than the partition's, nor its
// coordinator epoch older than the last marker's.
func (t *producerTable) checkMarkers(hdrs []recordbatch.Header, markers []txnMarker) error {
	for i, h := range hdrs {
		if !h.Control() {
			continue
		}
		e, ok := t.entries[h.ProducerID]
		if !ok {
			continue
		}
		if h.ProducerEpoch < e.epoch {
			return fmt.Errorf("%w: marker of producer %d epoch %d, partition knows epoch %d",
				ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
		}
		if markers[i].coordinatorEpoch < e.coordinatorEpoch {
			return fmt.Errorf("%w: marker of producer %d with coordinator epoch %d, last was %d",
				ErrTransactionCoordinatorFenced, h.ProducerID, markers[i].coordinatorEpoch, e.coordinatorEpoch)
		}
	}
	return nil
}

// ongoingTxns returns producer id -> first offset of its open transaction,
// building the map from the entries when the table was just loaded.
func (t *producerTable) ongoingTxns() map[int64]int64 {
	if t.ongoing == nil {
		t.ongoing = map[int64]int64{}
		for id, e := range t.entries {
			if e.currentTxnFirstOffset != noOffset {
				t.ongoing[id] = e.currentTxnFirstOffset
			}
		}
	}
	return t.ongoing
}

// firstUnstable is the first offset of the earliest open transaction, or
// noOffset when none is open; except is left out (noOffset: none).
func (t *producerTable) firstUnstable(except int64) int64 {
	first := int64(noOffset)
	for id, off := range t.ongoingTxns() {
		if id != except && (first == noOffset || off < first) {
			first = off
		}
	}
	return first
}

// applyBatch applies one batch at its final offset, completing the
// transaction when it is a marker. It returns the aborted-transaction
// entry an abort marker produces (Kafka's CompletedTxn with its last
// stable offset); a marker with no open transaction starts and ends at
// itself, as in Kafka.
func (t *producerTable) applyBatch(h recordbatch.Header, m txnMarker) (AbortedTxn, bool) {
	if !h.Control() || !idempotent(h) {
		t.apply(h)
		return AbortedTxn{}, false
	}
	first := h.BaseOffset
	if e, ok := t.entries[h.ProducerID]; ok && e.currentTxnFirstOffset != noOffset {
		first = e.currentTxnFirstOffset
	}
	t.apply(h)
	t.entries[h.ProducerID].coordinatorEpoch = m.coordinatorEpoch
	if m.commit {
		return AbortedTxn{}, false
	}
	lso := t.firstUnstable(h.ProducerID)
	if lso == noOffset {
		lso = h.LastOffset() + 1
	}
	return AbortedTxn{ProducerID: h.ProducerID, FirstOffset: first, LastOffset: h.LastOffset(), LastStableOffset: lso}, true
}

// txnUpdate is what an append changes in the published transaction state.
type txnUpdate struct {
	aborted       []AbortedTxn // entries for the active segment's index
	firstUnstable int64
}

// applyAppend applies an append's batches (offsets assigned) to the table.
// REQUIRES: appendMu held.
func (l *Log) applyAppend(hdrs []recordbatch.Header, markers []txnMarker) txnUpdate {
	var upd txnUpdate
	for i, h := range hdrs {
		var m txnMarker
		if markers != nil {
			m = markers[i]
		}
		if a, ok := l.producers.applyBatch(h, m); ok {
			upd.aborted = append(upd.aborted, a)
		}
	}
	upd.firstUnstable = l.producers.firstUnstable(noOffset)
	return upd
}

// FirstUnstableOffset returns the first offset of the earliest open
// transaction; false when no transaction is open. The last stable offset
// is min(this, high watermark); the high watermark is the caller's.
func (l *Log) FirstUnstableOffset() (int64, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.mu.firstUnstable, l.mu.firstUnstable != noOffset
}

// AbortedTxns returns every aborted transaction whose range
// [FirstOffset, LastOffset] overlaps [from, to), ordered by LastOffset
// (Kafka's collectAbortedTxns). Entries live in the segment holding their
// marker, so the search starts at the segment holding from and stops at
// an entry whose LastStableOffset >= to: every later abort began after it.
func (l *Log) AbortedTxns(from, to int64) []AbortedTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed || from >= to || len(l.mu.segments) == 0 {
		return nil
	}
	var out []AbortedTxn
	for _, s := range l.mu.segments[l.segmentForLocked(from):] {
		got, complete := CollectAbortedTxns(s.aborted, from, to)
		out = append(out, got...)
		if complete {
			break
		}
	}
	return out
}

// CollectAbortedTxns filters entries (of any source: a segment's index, a
// tiered object's section) as AbortedTxns does. complete reports that an
// entry with LastStableOffset >= to was met: no later entry can overlap.
func CollectAbortedTxns(entries []AbortedTxn, from, to int64) (out []AbortedTxn, complete bool) {
	for _, a := range entries {
		if a.LastOffset >= from && a.FirstOffset < to {
			out = append(out, a)
		}
		if a.LastStableOffset >= to {
			return out, true
		}
	}
	return out, false
}

// MarkerBatch builds the control batch that ends a transaction (Kafka's
// EndTransactionMarker batch): attributes transactional and control, the
// producer's id and epoch, base sequence -1, and one record whose key is a
// ControlRecordKey (0 abort, 1 commit) and whose value an EndTxnMarker
// with the coordinator epoch. Offsets and leader epoch are Append's.
func MarkerBatch(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, timestampMs int64) []byte {
	key := kmsg.ControlRecordKey{Type: controlTypeAbort}
	if commit {
		key.Type = controlTypeCommit
	}
	val := kmsg.EndTxnMarker{CoordinatorEpoch: coordinatorEpoch}
	rec := kmsg.Record{Key: key.AppendTo(nil), Value: val.AppendTo(nil)}
	h := recordbatch.Header{PartitionLeaderEpoch: -1, Attributes: recordbatch.AttrControl | recordbatch.AttrTransactional,
		FirstTimestamp: timestampMs, MaxTimestamp: timestampMs, ProducerID: producerID,
		ProducerEpoch: producerEpoch, BaseSequence: -1}
	return recordbatch.Encode(nil, h, 1, recordbatch.AppendRecord(nil, rec))
}
