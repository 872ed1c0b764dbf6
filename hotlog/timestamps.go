package hotlog

import (
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// maxDecodeBytes bounds the decompressed size of one batch decoded for a
// timestamp look-up (Kafka's default max.message.bytes is 1 MiB; topics may
// raise it, compression ratios rarely pass 50x).
const maxDecodeBytes = 256 << 20

// OffsetForTimestamp finds the first offset whose record timestamp is >= ts,
// looking in batches below upTo. ok is false if there is none.
// LogAppendTime batches count every record at the batch's maxTimestamp.
func (l *Log) OffsetForTimestamp(ts int64, upTo int64) (res OffsetTime, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return res, false, ErrClosed
	}
	for _, s := range l.mu.segments {
		if s.base >= upTo {
			break
		}
		if s.next <= l.mu.logStartOffset || s.maxTimestamp < ts {
			continue
		}
		res, ok, err = l.searchSegmentLocked(s, ts, upTo)
		if ok || err != nil {
			return res, ok, err
		}
	}
	return res, false, nil
}

// searchSegmentLocked looks for the first record >= ts in s, starting where
// the time index allows. REQUIRES: mu held.
func (l *Log) searchSegmentLocked(s *segment, ts, upTo int64) (res OffsetTime, ok bool, err error) {
	from := max(lookupTime(s.timeIndex, s.base, ts), l.mu.logStartOffset)
	pos := lookupOffset(s.offsetIndex, s.base, from)
	var scanErr error
	herr := s.forEachHeader(pos, func(p int64, h recordbatch.Header) bool {
		if h.LastOffset() >= upTo {
			return false
		}
		if h.LastOffset() < from || h.MaxTimestamp < ts || h.RecordCount == 0 {
			// (A batch emptied by compaction keeps its header, not a record.)
			return true
		}
		res, ok, scanErr = l.searchBatchLocked(s, p, h, ts, from)
		return !ok && scanErr == nil
	})
	if scanErr != nil {
		return res, false, scanErr
	}
	if herr != nil {
		return res, false, l.corruptReadLocked(s, pos, herr)
	}
	return res, ok, nil
}

// searchBatchLocked decodes the batch at pos and returns its first record at
// or after offset from with timestamp >= ts.
func (l *Log) searchBatchLocked(s *segment, pos int64, h recordbatch.Header, ts, from int64) (OffsetTime, bool, error) {
	if h.LogAppendTime() {
		return OffsetTime{Offset: max(h.BaseOffset, from), Timestamp: h.MaxTimestamp}, true, nil
	}
	records, err := l.decodeBatchLocked(s, pos, h)
	if err != nil {
		return OffsetTime{}, false, err
	}
	for _, r := range records {
		offset, rts := h.BaseOffset+int64(r.OffsetDelta), h.FirstTimestamp+r.TimestampDelta64
		if offset >= from && rts >= ts {
			return OffsetTime{Offset: offset, Timestamp: rts}, true, nil
		}
	}
	return OffsetTime{}, false, nil
}

func (l *Log) decodeBatchLocked(s *segment, pos int64, h recordbatch.Header) ([]kmsg.Record, error) {
	b, err := s.readBatch(pos, h)
	if err != nil {
		return nil, l.corruptReadLocked(s, pos, err)
	}
	records, err := recordbatch.DecodeRecords(b, maxDecodeBytes)
	if err != nil {
		return nil, fmt.Errorf("hotlog: decode batch at offset %d: %w", h.BaseOffset, err)
	}
	return records, nil
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp below upTo (ListOffsets -3). ok false if empty. Of equal
// timestamps the first wins.
func (l *Log) MaxTimestamp(upTo int64) (res OffsetTime, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return res, false, ErrClosed
	}
	best, bestPos, bestSeg := recordbatch.Header{MaxTimestamp: math.MinInt64}, int64(-1), (*segment)(nil)
	for _, s := range l.mu.segments {
		if s.base >= upTo || s.next <= l.mu.logStartOffset || s.maxTimestamp <= best.MaxTimestamp {
			continue
		}
		if s.next <= upTo {
			// The whole segment counts: its cached maximum names the batch.
			pos, h, found, err := s.findBatch(s.maxTimestampOffset)
			if err != nil || !found {
				return res, false, l.corruptReadLocked(s, pos, fmt.Errorf("max timestamp batch: %v", err))
			}
			best, bestPos, bestSeg = h, pos, s
			continue
		}
		herr := s.forEachHeader(0, func(p int64, h recordbatch.Header) bool {
			if h.LastOffset() >= upTo {
				return false
			}
			if h.MaxTimestamp > best.MaxTimestamp {
				best, bestPos, bestSeg = h, p, s
			}
			return true
		})
		if herr != nil {
			return res, false, l.corruptReadLocked(s, 0, herr)
		}
	}
	if bestSeg == nil {
		return res, false, nil
	}
	res, ok, err = l.searchBatchLocked(bestSeg, bestPos, best, best.MaxTimestamp, l.mu.logStartOffset)
	if err == nil && !ok {
		// The header's maxTimestamp matches no record: answer with the batch.
		res, ok = OffsetTime{Offset: max(best.BaseOffset, l.mu.logStartOffset), Timestamp: best.MaxTimestamp}, true
	}
	return res, ok, err
}
