package compaction

import (
	"errors"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// BuildMap puts into m the key of every keyed, non-control record of the
// non-aborted batches of batches with offsets in [from, to), and returns the
// map end: the first offset not covered. It stops early, at a batch boundary,
// when the next batch's records might not fit (Len + RecordCount >
// Capacity); mapEnd == to when everything fit. Batches wholly below from are
// skipped; reading stops at the first batch at or above to.
//
// aborted lists the aborted transactions overlapping [from, to) (see
// Policy.Aborted); their data must not enter the map, or a live older value
// would be dropped for an aborted newer one. maxDecompressed bounds each
// batch's decompressed records.
//
// REQUIRES: m holds nothing from a different range (Reset it between passes).
// Errors: ErrCorrupt (CRC, framing, record encoding, order), ErrMapTooSmall
// when not even the first keyed batch fits, and the source's own errors.
func BuildMap(m *OffsetMap, batches tier.BatchSource, from, to int64, aborted []hotlog.AbortedTxn, maxDecompressed int) (int64, error) {
	s := scan{m: m, from: from, to: to, aborts: newAbortIndex(aborted), maxDecompressed: maxDecompressed, last: -1}
	defer s.decoder.Close()
	for {
		batch, err := batches.Next()
		if errors.Is(err, io.EOF) {
			return to, nil
		}
		if err != nil {
			return 0, err
		}
		end, done, err := s.batch(batch)
		if err != nil || done {
			return end, err
		}
	}
}

// scan is BuildMap's state over one source.
type scan struct {
	m               *OffsetMap
	from, to        int64
	aborts          abortIndex
	maxDecompressed int
	last            int64 // last offset of the previous batch, for order checks
	put             bool  // some key was put by this scan
	decoder         recordbatch.Decompressor
}

// batch adds one batch's keys; done reports the map end was reached.
func (s *scan) batch(batch []byte) (end int64, done bool, err error) {
	h, err := validate(batch, s.last)
	if err != nil {
		return 0, true, err
	}
	s.last = h.LastOffset()
	switch {
	case h.LastOffset() < s.from:
		return 0, false, nil
	case h.BaseOffset >= s.to:
		return s.to, true, nil
	case h.Control() || s.aborts.aborted(h) || h.RecordCount == 0:
		return 0, false, nil
	}
	if s.m.Len()+int(h.RecordCount) > s.m.Capacity() {
		if !s.put && s.m.Len() == 0 {
			return 0, true, fmt.Errorf("%w: batch at %d has %d records, map capacity %d",
				ErrMapTooSmall, h.BaseOffset, h.RecordCount, s.m.Capacity())
		}
		return max(h.BaseOffset, s.from), true, nil
	}
	records, err := decode(&s.decoder, batch, h, s.maxDecompressed)
	if err != nil {
		return 0, true, err
	}
	return 0, false, s.putRecords(h, records)
}

// putRecords puts the keys of the records inside [from, to).
func (s *scan) putRecords(h recordbatch.Header, records []kmsg.Record) error {
	for i := range records {
		offset := h.BaseOffset + int64(records[i].OffsetDelta)
		if records[i].Key == nil || offset < s.from || offset >= s.to {
			continue
		}
		// Cannot fail: the capacity check admitted every record as a new key.
		if !s.m.Put(records[i].Key, offset) {
			return fmt.Errorf("compaction: offset map refused offset %d", offset)
		}
		s.put = true
	}
	return nil
}

// validate checks a stored batch and that it follows the previous one
// (prevLast, -1 for none).
func validate(batch []byte, prevLast int64) (recordbatch.Header, error) {
	h, err := recordbatch.ValidateStored(batch)
	if err != nil {
		return h, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if h.Size() != len(batch) {
		return h, fmt.Errorf("%w: batch at %d is %d bytes, source gave %d", ErrCorrupt, h.BaseOffset, h.Size(), len(batch))
	}
	if h.BaseOffset <= prevLast || h.BaseOffset < 0 || h.LastOffset() < h.BaseOffset {
		return h, fmt.Errorf("%w: batch at %d (last %d) after offset %d", ErrCorrupt, h.BaseOffset, h.LastOffset(), prevLast)
	}
	return h, nil
}

// decode decompresses and parses a validated batch's records, checking that
// each record's offset lies inside the batch. The records alias decoder's
// buffer until its next use.
func decode(decoder *recordbatch.Decompressor, batch []byte, h recordbatch.Header, maxDecompressed int) ([]kmsg.Record, error) {
	records, err := decoder.DecodeRecords(batch, maxDecompressed)
	if err != nil {
		return nil, fmt.Errorf("%w: batch at %d: %w", ErrCorrupt, h.BaseOffset, err)
	}
	for i := range records {
		if d := records[i].OffsetDelta; d < 0 || d > h.LastOffsetDelta {
			return nil, fmt.Errorf("%w: batch at %d: record offset delta %d outside [0, %d]",
				ErrCorrupt, h.BaseOffset, d, h.LastOffsetDelta)
		}
	}
	return records, nil
}
