package hotlog

// Cleaner bookkeeping: the cleaner checkpoint (the first dirty
// offset), the cleanable segments and the dirty-ratio numbers.

import (
	"fmt"
	"sync"
)

// cleanerCheckpointFile holds the first dirty offset (offset-checkpoint
// format). Part of the on-disk format; never change.
const cleanerCheckpointFile = "cleaner-offset-checkpoint"

// cleanerState is the compaction state of a Log.
//
// Lock order: replaceMu, then the Log's appendMu, flushMu, mu, then mu
// here (innermost: held only to read or write the fields below).
type cleanerState struct {
	// replaceMu serializes ReplaceSegments calls. crashAfter is read under it.
	replaceMu sync.Mutex
	// crashAfter, when set (tests), is consulted after each step of a
	// replace; true stops it there as a crash would (errSimulatedCrash).
	crashAfter func(step int) bool

	mu sync.Mutex
	// checkpoint is the stored first dirty offset (0: none stored). It is
	// written with appendMu held (SetCleanerCheckpoint, Truncate, ResetTo)
	// so the file and this value change together; <= LEO at all times.
	checkpoint int64
	// live are the bases of the CleanedSegments not yet aborted or
	// committed: one writer per base, so two never share a file.
	live map[int64]bool
}

// claim registers a writer at base; false if one is already open there.
func (c *cleanerState) claim(base int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live[base] {
		return false
	}
	if c.live == nil {
		c.live = map[int64]bool{}
	}
	c.live[base] = true
	return true
}

func (c *cleanerState) release(base int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.live, base)
}

func (c *cleanerState) stored() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checkpoint
}

func (c *cleanerState) setStored(offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checkpoint = offset
}

// loadCleanerCheckpoint reads the checkpoint at Open (missing or bad: 0,
// i.e. everything is dirty; the cost is one needless cleaning pass). One
// above the recovered LEO (a truncation or recovery cut the log) is
// lowered to it, durably: the offsets above will be new data.
func (l *Log) loadCleanerCheckpoint() error {
	offset, _ := readOffsetCheckpoint(l.dir, cleanerCheckpointFile)
	l.cleaner.setStored(offset)
	return l.lowerCleanerCheckpointLocked(l.leoLocked())
}

// CleanerCheckpoint is the first dirty offset: every offset below it was
// covered by a completed cleaning pass (the cleaner's offset map held its
// key). Never below the log start offset nor above the LEO.
func (l *Log) CleanerCheckpoint() int64 {
	stored := l.cleaner.stored()
	l.mu.RLock()
	defer l.mu.RUnlock()
	return min(max(stored, l.mu.logStartOffset), l.leoLocked())
}

// SetCleanerCheckpoint records offset as the first dirty offset, durably
// (written atomically before it returns). Call it after the pass that
// cleaned up to offset was replaced in. offset must be in [0, LEO]
// (ErrOffsetOutOfRange otherwise: a truncation may have intervened).
func (l *Log) SetCleanerCheckpoint(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.RLock()
	err, leo := l.usableLocked(), l.leoLocked()
	l.mu.RUnlock()
	switch {
	case err != nil:
		return err
	case offset < 0 || offset > leo:
		return fmt.Errorf("%w: cleaner checkpoint %d, log end %d", ErrOffsetOutOfRange, offset, leo)
	}
	if err := writeOffsetCheckpoint(l.dir, cleanerCheckpointFile, offset); err != nil {
		return l.fail(fmt.Errorf("cleaner checkpoint: %w", err))
	}
	l.cleaner.setStored(offset)
	return nil
}

// lowerCleanerCheckpointLocked pulls the checkpoint down to offset
// (Truncate, ResetTo, Open: what follows offset will be new, dirty data).
// REQUIRES: appendMu held (or the log unpublished, during Open).
func (l *Log) lowerCleanerCheckpointLocked(offset int64) error {
	if l.cleaner.stored() <= offset {
		return nil
	}
	l.cleaner.setStored(offset)
	return writeOffsetCheckpoint(l.dir, cleanerCheckpointFile, offset)
}

// CleanableSegments lists the sealed segments that end at or below
// firstUncleanable (the caller's min of LSO, high watermark, the start of
// the segments newer than min.compaction.lag.ms) and above the log start
// offset, oldest first. The active segment is never cleanable.
func (l *Log) CleanableSegments(firstUncleanable int64) []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.usableLocked() != nil {
		return nil
	}
	var out []SegmentInfo
	for i, s := range l.mu.segments[:len(l.mu.segments)-1] {
		if s.next > firstUncleanable {
			break
		}
		if s.next > l.mu.logStartOffset {
			out = append(out, segmentInfoLocked(s, l.mu.segments[i+1].base))
		}
	}
	return out
}

// CleanableBytes returns the dirty-ratio inputs over CleanableSegments:
// clean is the bytes of those that end at or below CleanerCheckpoint,
// dirty the bytes of the others (a segment straddling the checkpoint is
// dirty). The dirty ratio is dirty / (clean + dirty).
func (l *Log) CleanableBytes(firstUncleanable int64) (clean, dirty int64) {
	checkpoint := l.CleanerCheckpoint()
	for _, s := range l.CleanableSegments(firstUncleanable) {
		if s.NextOffset <= checkpoint {
			clean += s.Size
		} else {
			dirty += s.Size
		}
	}
	return clean, dirty
}

// segmentInfoLocked describes the sealed segment s, followed by a segment
// at rangeEnd. REQUIRES: mu held.
func segmentInfoLocked(s *segment, rangeEnd int64) SegmentInfo {
	return SegmentInfo{BaseOffset: s.base, NextOffset: s.next, Size: s.size, MaxTimestamp: s.maxTimestamp,
		RangeEnd: rangeEnd, AbortedTxns: append([]AbortedTxn(nil), s.aborted...)}
}
