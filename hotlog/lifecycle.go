package hotlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Truncate drops every batch at or above offset (follower truncation,
// KIP-101). Truncation is by whole batches: the batch holding offset goes too,
// so the new LogEndOffset is that batch's base offset (== offset when offset
// is a batch boundary, as it is for OffsetForLeaderEpoch answers). The
// truncated segment becomes the active one; later segments are deleted.
// Readers are blocked for the duration (the truncated segment is rescanned).
func (l *Log) Truncate(offset int64) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.leoLocked() {
		return nil
	}
	if err := l.truncateLocked(offset); err != nil {
		return l.failLocked(fmt.Errorf("truncate to %d: %w", offset, err))
	}
	l.notifyLocked()
	return nil
}

// truncateLocked does Truncate's work. REQUIRES: appendMu, flushMu, mu held.
func (l *Log) truncateLocked(offset int64) error {
	i := l.segmentForLocked(offset)
	s := l.mu.segments[i]
	pos, _, found, err := s.findBatch(offset)
	if err != nil {
		return err
	}
	if !found {
		pos = s.size
	}
	doomed := l.mu.segments[i+1:]
	l.mu.segments = l.mu.segments[:i+1]
	l.mu.unsynced = without(l.mu.unsynced, append(append([]*segment(nil), doomed...), s))
	for _, d := range doomed {
		d.closeFiles()
		if err := removeSegmentFiles(l.dir, d.base); err != nil {
			return err
		}
	}
	if err := s.closeIndexFiles(); err != nil {
		return err
	}
	if err := s.file.Truncate(pos); err != nil {
		return err
	}
	if _, err := l.scanSegment(s, l.mu.cfg.IndexIntervalBytes, false); err != nil {
		return err
	}
	if err := l.reopenActiveIndexes(); err != nil {
		return err
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	return l.checkpointAfterTruncateLocked()
}

// checkpointAfterTruncateLocked pulls every offset down to the new LEO and
// persists them at once: a stale recovery point above the LEO would let
// recovery trust bytes appended later without an fsync.
func (l *Log) checkpointAfterTruncateLocked() error {
	leo := l.leoLocked()
	l.mu.epochs.truncateFromEnd(leo)
	l.mu.flushedOffset = min(l.mu.flushedOffset, leo)
	l.mu.recoveryPoint = min(l.mu.recoveryPoint, leo)
	l.mu.logStartOffset = min(l.mu.logStartOffset, leo)
	if err := writeOffsetCheckpoint(l.dir, recoveryPointFile, l.mu.recoveryPoint); err != nil {
		return err
	}
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, l.mu.logStartOffset); err != nil {
		return err
	}
	return writeFileAtomic(l.dir, leaderEpochFile, encodeEpochCheckpoint(l.mu.epochs.entries))
}

// Close flushes and closes all files. Further calls return ErrClosed. After
// a clean Close (no storage failure) it leaves the clean-shutdown marker.
func (l *Log) Close() error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.closed = true
	l.notifyLocked()
	l.mu.Unlock()
	l.flusher.stop()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.mu.err
	if err == nil {
		if err = l.shutdownCleanlyLocked(); err != nil {
			err = fmt.Errorf("%w: close: %w", ErrStorage, err)
		}
	}
	for _, s := range l.mu.segments {
		if cerr := s.closeFiles(); err == nil && cerr != nil {
			err = fmt.Errorf("%w: close: %w", ErrStorage, cerr)
		}
	}
	return err
}

// shutdownCleanlyLocked syncs everything, writes the checkpoints, then the
// clean-shutdown marker. REQUIRES: appendMu, flushMu, mu held; flusher stopped.
func (l *Log) shutdownCleanlyLocked() error {
	plan := flushPlan{sealed: l.mu.unsynced, active: l.activeLocked()}
	l.mu.unsynced = nil
	if _, err := l.syncPlan(plan); err != nil {
		return err
	}
	leo := l.leoLocked()
	l.mu.flushedOffset, l.mu.recoveryPoint = leo, leo
	if err := writeOffsetCheckpoint(l.dir, recoveryPointFile, leo); err != nil {
		return err
	}
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, l.mu.logStartOffset); err != nil {
		return err
	}
	if err := writeFileAtomic(l.dir, leaderEpochFile, encodeEpochCheckpoint(l.mu.epochs.entries)); err != nil {
		return err
	}
	return writeFileAtomic(l.dir, cleanShutdownFile, nil)
}

// Remove closes the log and deletes its directory.
func (l *Log) Remove() error {
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrStorage) {
		return err
	}
	return os.RemoveAll(filepath.Clean(l.dir))
}
