package hotlog

import (
	"fmt"
	"math"
	"time"
)

// ApplyRetention deletes sealed segments past RetentionMs/RetentionBytes and
// rolls a segment older than SegmentMs. Returns the number of segments deleted.
//
// As in Kafka, three passes each delete from the oldest segment while their
// rule holds: segments wholly below the log start offset, segments whose
// largest timestamp is older than now-RetentionMs, and segments while
// size-segmentSize >= RetentionBytes. The active segment is never deleted.
func (l *Log) ApplyRetention(now time.Time) (int, error) {
	return l.applyRetention(now, math.MaxInt64)
}

// applyRetention is ApplyRetention with the time and size rules limited to
// segments ending at or below limit (see ApplyRetentionBelow).
func (l *Log) applyRetention(now time.Time, limit int64) (int, error) {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err := l.usableLocked()
	active, cfg := l.activeLocked(), l.mu.cfg
	l.mu.RUnlock()
	if err != nil {
		return 0, err
	}
	if active.size > 0 && now.UnixMilli()-active.rollBaseMs >= cfg.SegmentMs.Milliseconds() {
		if err := l.roll(); err != nil {
			return 0, err
		}
	}
	l.mu.RLock()
	n := l.countDeletableLocked(now.UnixMilli(), limit)
	l.mu.RUnlock()
	// The periodic expiry of producer state rides on retention's schedule.
	l.producers.expire(now.UnixMilli(), cfg.producerIDExpiration())
	return n, l.deleteOldestSegments(n)
}

// countDeletableLocked applies the three retention passes; the time and
// size passes stop at segments ending above limit. REQUIRES: mu held.
func (l *Log) countDeletableLocked(nowMs int64, limit int64) int {
	segs, cfg := l.mu.segments[:len(l.mu.segments)-1], l.mu.cfg
	n := 0
	// A segment is wholly below the log start when the next one starts at
	// or below it (Kafka's rule): with compaction a segment may end in a
	// gap, or be empty, and its own end would understate its range.
	for n < len(segs) && l.mu.segments[n+1].base <= l.mu.logStartOffset {
		n++
	}
	belowStart := n
	if cfg.RetentionMs >= 0 {
		limit := nowMs - cfg.RetentionMs.Milliseconds()
		for n < len(segs) && segs[n].maxTimestamp < limit {
			n++
		}
	}
	if cfg.RetentionBytes >= 0 {
		size := l.sizeLocked()
		for i := 0; i < n; i++ {
			size -= segs[i].size
		}
		for n < len(segs) && size-segs[n].size >= cfg.RetentionBytes {
			size -= segs[n].size
			n++
		}
	}
	return l.capAtLimitLocked(n, belowStart, limit)
}

// deleteOldestSegments deletes the n oldest segments (never the active one),
// moving the log start offset to the first remaining segment's base and
// checkpointing it before the files go. REQUIRES: appendMu held.
func (l *Log) deleteOldestSegments(n int) error {
	if n == 0 {
		return nil
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	n = min(n, len(l.mu.segments)-1)
	doomed := l.mu.segments[:n]
	newStart := max(l.mu.logStartOffset, l.mu.segments[n].base)
	l.mu.Unlock()
	if err := l.setLogStart(newStart); err != nil {
		return err
	}
	l.mu.Lock()
	l.mu.segments = append([]*segment(nil), l.mu.segments[n:]...)
	l.mu.unsynced = without(l.mu.unsynced, doomed)
	var err error
	for _, s := range doomed {
		if cerr := s.closeFiles(); err == nil {
			err = cerr
		}
	}
	l.mu.stats.SegmentsDeleted += int64(n)
	l.mu.Unlock()
	for _, s := range doomed {
		l.logger.Info("hotlog: deleting segment", "dir", l.dir, "segment", s.base, "next_offset", s.next)
		if rerr := removeSegmentFiles(l.dir, s.base); err == nil {
			err = rerr
		}
	}
	if err != nil {
		return l.fail(fmt.Errorf("delete segments: %w", err))
	}
	if err := l.dropSnapshotsBelowLogStart(); err != nil {
		// Stale snapshots only cost disk; the next deletion retries.
		l.logger.Warn("hotlog: old producer snapshots not deleted", "dir", l.dir, "err", err)
	}
	return nil
}

func without(list, drop []*segment) []*segment {
	out := list[:0]
	for _, s := range list {
		keep := true
		for _, d := range drop {
			keep = keep && s != d
		}
		if keep {
			out = append(out, s)
		}
	}
	return out
}

// setLogStart raises the log start offset, trims the epoch cache and
// checkpoints both. REQUIRES: appendMu held.
func (l *Log) setLogStart(offset int64) error {
	l.mu.Lock()
	if offset <= l.mu.logStartOffset {
		l.mu.Unlock()
		return nil
	}
	l.mu.logStartOffset = offset
	epochsChanged := l.mu.epochs.truncateFromStart(offset)
	epochs := l.mu.epochs.clone()
	l.notifyLocked()
	l.mu.Unlock()
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, offset); err != nil {
		return l.fail(fmt.Errorf("log-start checkpoint: %w", err))
	}
	if epochsChanged {
		if err := writeFileAtomic(l.dir, leaderEpochFile, encodeEpochCheckpoint(epochs)); err != nil {
			return l.fail(fmt.Errorf("leader-epoch checkpoint: %w", err))
		}
	}
	return nil
}

// DeleteRecordsBefore moves LogStartOffset up to offset (never down; offset
// > LogEndOffset gives ErrOffsetOutOfRange; the caller enforces the HW bound)
// and deletes whole segments below it. The new start offset is checkpointed
// before returning. If offset == LogEndOffset the active segment is rolled so
// that it too can go.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err := l.usableLocked()
	leo, start, active := l.leoLocked(), l.mu.logStartOffset, l.activeLocked()
	l.mu.RUnlock()
	switch {
	case err != nil:
		return err
	case offset > leo || offset < 0:
		return fmt.Errorf("%w: delete before %d, log end %d", ErrOffsetOutOfRange, offset, leo)
	case offset <= start:
		return nil
	}
	if err := l.setLogStart(offset); err != nil {
		return err
	}
	if offset == leo && active.size > 0 {
		if err := l.roll(); err != nil {
			return err
		}
	}
	l.mu.RLock()
	n := 0
	for n < len(l.mu.segments)-1 && l.mu.segments[n+1].base <= offset {
		n++
	}
	l.mu.RUnlock()
	return l.deleteOldestSegments(n)
}

// Reconfigure applies changed topic configs (segment and retention settings).
// Dir and Durability cannot change on an open log; Logger and Now are kept.
func (l *Log) Reconfigure(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if cfg.Dir != l.dir || cfg.Durability != l.durability {
		return fmt.Errorf("%w: Dir and Durability cannot change on an open log", ErrInvalidConfig)
	}
	cfg.Logger, cfg.Now = l.logger, l.now
	l.mu.cfg = cfg
	return nil
}
