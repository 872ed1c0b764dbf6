package compaction

import (
	"encoding/binary"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// Rewriter rewrites the batches of one cleaning pass (doc.go, "Rules").
// Use: NewRewriter, then Plan (or PlanHeader) for every batch of the range in
// offset order, then Batch for the same batches in the same order, then
// Close. Owned by one goroutine.
type Rewriter struct {
	policy  Policy
	aborts  abortIndex
	horizon int64 // batches with MaxTimestamp below it are past the delete horizon

	planned  bool
	planLast int64           // last offset of the previous planned batch
	lastData map[int64]int64 // producer id -> base offset of its last data batch in the range

	txns map[int64]*producerTxn // marker rule state, per producer id
	last int64                  // last offset of the previous rewritten batch

	decoder recordbatch.Decompressor
	comp    recordbatch.Compressor
	raw     []byte // scratch: encoded kept records
	payload []byte // scratch: compressed records
	out     []byte // scratch: the rewritten batch; what Batch returns
	stats   Stats
}

// producerTxn tracks one producer's current transaction during Batch calls.
type producerTxn struct {
	markerSeen bool // a control batch of the producer came earlier in the range
	dataKept   bool // a transactional data batch was output since that marker
}

// NewRewriter returns a rewriter for p (zero fields take their defaults; call
// p.Validate first to reject bad values).
func NewRewriter(p Policy) *Rewriter {
	p = p.withDefaults()
	return &Rewriter{
		policy:   p,
		aborts:   newAbortIndex(p.Aborted),
		horizon:  p.deleteHorizon(),
		planLast: -1,
		lastData: make(map[int64]int64),
		txns:     make(map[int64]*producerTxn),
		last:     -1,
	}
}

// Plan records the header of the next batch of the range (pass 1). Only the
// first recordbatch.HeaderSize bytes of batch are read.
func (r *Rewriter) Plan(batch []byte) error {
	if len(batch) < recordbatch.HeaderSize {
		return fmt.Errorf("%w: %d bytes, header needs %d", ErrCorrupt, len(batch), recordbatch.HeaderSize)
	}
	var header [recordbatch.HeaderSize]byte
	copy(header[:], batch)
	// ParseBatchHeader wants the whole batch; give it a header claiming none.
	binary.BigEndian.PutUint32(header[8:], uint32(recordbatch.MinLength))
	h, err := recordbatch.ParseHeader(header[:])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return r.PlanHeader(h)
}

// PlanHeader is Plan for a caller that already parsed the header.
func (r *Rewriter) PlanHeader(h recordbatch.Header) error {
	if h.BaseOffset <= r.planLast || h.LastOffsetDelta < 0 {
		return fmt.Errorf("%w: planned batch at %d after offset %d", ErrCorrupt, h.BaseOffset, r.planLast)
	}
	r.planned = true
	r.planLast = h.LastOffset()
	if !h.Control() && h.ProducerID >= 0 {
		r.lastData[h.ProducerID] = h.BaseOffset
	}
	return nil
}

// Batch rewrites the next batch of the range. kept false means the batch is
// dropped; otherwise out is the batch to write: batch itself when nothing in
// it changed, else a rewritten copy valid until the next call to Batch.
func (r *Rewriter) Batch(batch []byte) (out []byte, kept bool, err error) {
	h, err := validate(batch, r.last)
	if err != nil {
		return nil, false, err
	}
	r.last = h.LastOffset()
	r.stats.BatchesIn++
	r.stats.BytesIn += int64(len(batch))
	r.stats.RecordsIn += int64(h.RecordCount)
	var count int32
	if h.Control() {
		out, kept, count = r.control(batch, h)
	} else {
		out, kept, count, err = r.data(batch, h)
	}
	if err != nil || !kept {
		return nil, false, err
	}
	if !h.Control() && h.Transactional() {
		r.txn(h.ProducerID).dataKept = true
	}
	r.stats.BatchesOut++
	r.stats.BytesOut += int64(len(out))
	r.stats.RecordsOut += int64(count)
	return out, true, nil
}

// Stats returns the counts so far.
func (r *Rewriter) Stats() Stats { return r.stats }

// Close releases the codecs' resources.
func (r *Rewriter) Close() {
	r.comp.Close()
	r.decoder.Close()
}

// control applies the marker rule to a control batch.
func (r *Rewriter) control(batch []byte, h recordbatch.Header) ([]byte, bool, int32) {
	if h.ProducerID < 0 {
		return batch, true, h.RecordCount
	}
	txn := r.txn(h.ProducerID)
	drop := h.BaseOffset < r.policy.MapEnd && h.MaxTimestamp < r.horizon &&
		!txn.dataKept && (txn.markerSeen || r.policy.FromLogStart)
	// The marker ends the producer's transaction either way.
	txn.markerSeen, txn.dataKept = true, false
	if drop {
		r.stats.MarkersDropped++
		return nil, false, 0
	}
	return batch, true, h.RecordCount
}

func (r *Rewriter) txn(producerID int64) *producerTxn {
	t, ok := r.txns[producerID]
	if !ok {
		t = &producerTxn{}
		r.txns[producerID] = t
	}
	return t
}

// data applies the record rules to a data batch.
func (r *Rewriter) data(batch []byte, h recordbatch.Header) ([]byte, bool, int32, error) {
	if h.BaseOffset >= r.policy.MapEnd {
		return batch, true, h.RecordCount, nil
	}
	if r.aborts.aborted(h) {
		r.stats.AbortedDropped += int64(h.RecordCount)
		return r.emptied(batch, h)
	}
	records, err := decode(&r.decoder, batch, h, r.policy.MaxDecompressed)
	if err != nil {
		return nil, false, 0, err
	}
	keep := r.filter(h, records)
	switch {
	case keep == 0: // also a batch emptied by an earlier pass
		return r.emptied(batch, h)
	case keep == len(records):
		return batch, true, h.RecordCount, nil
	}
	out, err := r.encode(h, records[:keep])
	return out, err == nil, int32(keep), err
}

// filter moves the surviving records to the front of records (order kept)
// and returns how many survive.
func (r *Rewriter) filter(h recordbatch.Header, records []kmsg.Record) int {
	pastHorizon := h.MaxTimestamp < r.horizon
	n := 0
	for i := range records {
		if r.keepRecord(h, &records[i], pastHorizon) {
			records[n] = records[i]
			n++
		}
	}
	return n
}

// keepRecord is the per-record rule (doc.go), counting why records go.
func (r *Rewriter) keepRecord(h recordbatch.Header, rec *kmsg.Record, pastHorizon bool) bool {
	offset := h.BaseOffset + int64(rec.OffsetDelta)
	switch {
	case offset >= r.policy.MapEnd:
		return true
	case rec.Key == nil:
		r.stats.KeylessDropped++
		return false
	}
	if latest, ok := r.policy.Map.Latest(rec.Key); ok && offset < latest {
		r.stats.SupersededDropped++
		return false
	}
	if rec.Value == nil && pastHorizon {
		r.stats.TombstonesDropped++
		return false
	}
	if rec.Value == nil {
		r.stats.TombstonesKept++
		r.stats.KeptTombstoneMaxTimestamp = max(r.stats.KeptTombstoneMaxTimestamp, h.MaxTimestamp)
	}
	return true
}

// emptied handles a data batch left with no records: dropped unless it is
// its producer's last data batch. One already empty is kept byte for byte.
func (r *Rewriter) emptied(batch []byte, h recordbatch.Header) ([]byte, bool, int32, error) {
	if h.ProducerID < 0 {
		return nil, false, 0, nil
	}
	last, err := r.isLastData(h)
	if err != nil || !last {
		return nil, false, 0, err
	}
	r.stats.EmptyBatchesKept++
	if h.RecordCount == 0 {
		return batch, true, 0, nil
	}
	out, err := r.encode(h, nil)
	if err != nil {
		return nil, false, 0, err
	}
	return out, true, 0, nil
}

// isLastData reports whether h is its producer's last data batch (doc.go).
func (r *Rewriter) isLastData(h recordbatch.Header) (bool, error) {
	if r.planned {
		return r.lastData[h.ProducerID] == h.BaseOffset, nil
	}
	if r.policy.LastDataOffsets != nil {
		last, ok := r.policy.LastDataOffsets[h.ProducerID]
		return ok && last == h.LastOffset(), nil
	}
	return false, fmt.Errorf("%w: batch at %d of producer %d", ErrNotPlanned, h.BaseOffset, h.ProducerID)
}

// encode builds the batch h with the given records, recompressed with h's
// codec, into r.out.
func (r *Rewriter) encode(h recordbatch.Header, records []kmsg.Record) ([]byte, error) {
	r.raw = r.raw[:0]
	for i := range records {
		r.raw = appendRecord(r.raw, &records[i])
	}
	payload, err := r.comp.Compress(r.payload[:0], h.Codec(), r.raw)
	if err != nil {
		return nil, fmt.Errorf("compaction: batch at %d: %w", h.BaseOffset, err)
	}
	r.payload = payload
	r.out = recordbatch.Encode(r.out[:0], h, int32(len(records)), payload)
	return r.out, nil
}

// appendRecord appends rec's encoding with kmsg. The Length parsed from the
// input is reused when it matches kmsg's encoding, else recomputed (an input
// with non-minimal varints or bytes after the headers would otherwise give a
// record whose length lies).
func appendRecord(dst []byte, rec *kmsg.Record) []byte {
	start := len(dst)
	dst = rec.AppendTo(dst)
	length, n := binary.Varint(dst[start:])
	if n > 0 && length == int64(len(dst)-start-n) {
		return dst
	}
	rec.Length = 0 // encodes as one byte
	rec.Length = int32(len(rec.AppendTo(dst[:start])) - start - 1)
	return rec.AppendTo(dst[:start])
}
