package hotlog

import (
	"fmt"
	"math"

	"github.com/strata-log/strata/recordbatch"
)

// maxOffset bounds every offset the log stores, so that offset arithmetic
// (base + lastOffsetDelta + 1) can never overflow int64.
const maxOffset = math.MaxInt64 / 2

// splitBatches parses the headers of the batches laid end to end in b.
// REQUIRES (of the caller): each batch passed recordbatch.Validate; here only the
// framing and magic are re-checked, so a bad caller cannot corrupt the log's
// offset arithmetic.
func splitBatches(b []byte) ([]recordbatch.Header, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: no batches", ErrCorruptBatch)
	}
	if len(b) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: %d bytes in one append", ErrCorruptBatch, len(b))
	}
	var hdrs []recordbatch.Header
	for pos := 0; pos < len(b); {
		h, err := recordbatch.ParseHeader(b[pos:])
		if err != nil {
			return nil, err
		}
		if h.Magic != 2 {
			return nil, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, h.Magic)
		}
		if h.LastOffsetDelta < 0 {
			return nil, fmt.Errorf("%w: lastOffsetDelta %d", ErrCorruptBatch, h.LastOffsetDelta)
		}
		hdrs = append(hdrs, h)
		pos += h.Size()
	}
	return hdrs, nil
}

// Append assigns offsets to one or more validated RecordBatches (v2) laid end
// to end in batches, rewriting baseOffset and partitionLeaderEpoch in place
// (the caller hands over ownership of the slice), and writes them to the
// active segment, rolling first if needed. It does not wait for fsync.
//
// Idempotent batches (producerId >= 0) are checked against the producer
// state first (doc.go, "Producer state"): a retry of one of a producer's
// last five batches writes nothing and returns the original offsets with
// Duplicate set; ErrInvalidProducerEpoch and ErrOutOfOrderSequence reject
// the whole append.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) {
	return l.append(batches, true, func(leo int64, hdrs []recordbatch.Header) error {
		next := leo
		for i := range hdrs {
			hdrs[i].BaseOffset, hdrs[i].PartitionLeaderEpoch = next, leaderEpoch
			next = hdrs[i].LastOffset() + 1
		}
		return nil
	})
}

// AppendReplicated appends batches fetched from the leader as they are:
// their offsets and leader epochs are kept (for the replication fetcher). The
// first batch must start at or after LogEndOffset and offsets must increase;
// otherwise ErrOffsetOutOfRange. The epoch cache learns each batch's epoch
// and the producer state each batch's producer, without any check.
func (l *Log) AppendReplicated(batches []byte) (AppendResult, error) {
	return l.append(batches, false, func(leo int64, hdrs []recordbatch.Header) error {
		next := leo
		for _, h := range hdrs {
			if h.BaseOffset < next || h.BaseOffset > maxOffset {
				return fmt.Errorf("%w: replicated batch at %d, expected >= %d", ErrOffsetOutOfRange, h.BaseOffset, next)
			}
			next = h.LastOffset() + 1
		}
		return nil
	})
}

// append writes batches whose offsets assign sets (given the LEO). client
// says the batches come from a producer (leader path): the producer state
// checks them before any offset is assigned.
func (l *Log) append(batches []byte, client bool, assign func(leo int64, hdrs []recordbatch.Header) error) (AppendResult, error) {
	hdrs, err := splitBatches(batches)
	if err != nil {
		return AppendResult{}, err
	}
	markers, err := parseMarkers(batches, hdrs)
	if err != nil {
		return AppendResult{}, err
	}
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err = l.usableLocked()
	leo := l.leoLocked()
	l.mu.RUnlock()
	if err != nil {
		return AppendResult{}, err
	}
	// At most MaxInt32/61 batches of 2^31 offsets each follow: no overflow.
	if leo > maxOffset {
		return AppendResult{}, fmt.Errorf("%w: log end offset %d near overflow", ErrOffsetOutOfRange, leo)
	}
	if client {
		if b, dup := l.producers.duplicateOf(hdrs); dup {
			return AppendResult{BaseOffset: b.baseOffset, LastOffset: b.lastOffset, Duplicate: true}, nil
		}
		if err := l.producers.checkClient(hdrs); err != nil {
			return AppendResult{}, err
		}
		if err := l.producers.checkMarkers(hdrs, markers); err != nil {
			return AppendResult{}, err
		}
	}
	if err := assign(leo, hdrs); err != nil {
		return AppendResult{}, err
	}
	last := hdrs[len(hdrs)-1].LastOffset()
	if err := l.maybeRoll(int64(len(batches)), last); err != nil {
		return AppendResult{}, err
	}
	pos := 0
	for _, h := range hdrs {
		recordbatch.SetBaseOffsetAndEpoch(batches[pos:], h.BaseOffset, h.PartitionLeaderEpoch)
		pos += h.Size()
	}
	// The producer state moves first so that the first unstable offset is
	// published together with the LEO (a failed write fences the log).
	if err := l.writeBatches(batches, hdrs, l.applyAppend(hdrs, markers)); err != nil {
		return AppendResult{}, err
	}
	l.producers.touch(hdrs, l.now().UnixMilli())
	if l.durability == DurabilityFsync {
		l.flusher.schedule()
	}
	return AppendResult{BaseOffset: hdrs[0].BaseOffset, LastOffset: last}, nil
}

// maybeRoll seals the active segment if n more bytes ending at lastOffset
// should not go into it. REQUIRES: appendMu held.
func (l *Log) maybeRoll(n, lastOffset int64) error {
	l.mu.RLock()
	active, cfg := l.activeLocked(), l.mu.cfg
	nowMs := l.now().UnixMilli()
	roll := active.size > 0 && (active.size+n > cfg.SegmentBytes ||
		nowMs-active.rollBaseMs >= cfg.SegmentMs.Milliseconds() ||
		!active.fits(n, lastOffset))
	l.mu.RUnlock()
	if !roll {
		return nil
	}
	return l.roll()
}

// roll seals the active segment and starts a new one at the LEO, with a
// producer-state snapshot as of the LEO.
// REQUIRES: appendMu held; the active segment is not empty.
func (l *Log) roll() error {
	l.mu.RLock()
	leo := l.leoLocked()
	l.mu.RUnlock()
	s, err := createSegment(l.dir, leo)
	if err != nil {
		return l.fail(fmt.Errorf("roll to %d: %w", leo, err))
	}
	l.writeProducerSnapshot(leo)
	l.mu.Lock()
	l.mu.unsynced = append(l.mu.unsynced, l.activeLocked())
	l.mu.segments = append(l.mu.segments, s)
	if n := len(l.mu.segments); n >= 3 {
		l.mu.segments[n-3].arrivals = arrivals{} // arrivals.go: only the newest two keep them
	}
	l.mu.stats.Rolls++
	l.mu.Unlock()
	l.flusher.schedule()
	return nil
}

// writeBatches writes the offset-assigned batches at the end of the active
// segment, then publishes them. REQUIRES: appendMu held.
func (l *Log) writeBatches(batches []byte, hdrs []recordbatch.Header, txn txnUpdate) error {
	l.mu.RLock()
	active, interval := l.activeLocked(), l.mu.cfg.IndexIntervalBytes
	l.mu.RUnlock()
	// Bytes past active.size are invisible to readers until published below.
	if _, err := active.file.WriteAt(batches, active.size); err != nil {
		return l.fail(fmt.Errorf("write segment %d: %w", active.base, err))
	}
	nowMs := l.now().UnixMilli()
	var idx, tidx []byte
	l.mu.Lock()
	pos := active.size
	for _, h := range hdrs {
		idx, tidx = active.track(h, pos, interval, nowMs, idx, tidx)
		pos += int64(h.Size())
	}
	epochChanged := false
	for _, h := range hdrs {
		epochChanged = l.mu.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset) || epochChanged
	}
	epochs := l.mu.epochs.clone()
	active.aborted = append(active.aborted, txn.aborted...)
	l.mu.firstUnstable = txn.firstUnstable
	l.mu.stats.Appends++
	l.mu.stats.AppendedBytes += int64(len(batches))
	l.notifyLocked()
	l.mu.Unlock()
	if err := l.writeIndexEntries(active, idx, tidx); err != nil {
		return err
	}
	if len(txn.aborted) > 0 {
		if err := l.writeTxnEntries(active, txn.aborted); err != nil {
			return err
		}
	}
	if epochChanged {
		if err := writeFileAtomic(l.dir, leaderEpochFile, encodeEpochCheckpoint(epochs)); err != nil {
			return l.fail(fmt.Errorf("leader-epoch checkpoint: %w", err))
		}
	}
	return nil
}

// writeIndexEntries appends new entries to the active segment's index files.
func (l *Log) writeIndexEntries(s *segment, idx, tidx []byte) error {
	if len(idx) > 0 {
		if _, err := s.indexFile.Write(idx); err != nil {
			return l.fail(fmt.Errorf("write index %d: %w", s.base, err))
		}
	}
	if len(tidx) > 0 {
		if _, err := s.timeFile.Write(tidx); err != nil {
			return l.fail(fmt.Errorf("write time index %d: %w", s.base, err))
		}
	}
	return nil
}
