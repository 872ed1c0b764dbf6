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
	if err := l.checkpointAfterTruncateLocked(); err != nil {
		return err
	}
	if err := l.lowerCleanerCheckpointLocked(l.leoLocked()); err != nil {
		return err
	}
	return l.rebuildProducersLocked()
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
	l.writeProducerSnapshot(leo) // the next Open then reads no batch headers
	return writeFileAtomic(l.dir, cleanShutdownFile, nil)
}

// Remove closes the log and deletes its directory.
func (l *Log) Remove() error {
	if err := l.Close(); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrStorage) {
		return err
	}
	return os.RemoveAll(filepath.Clean(l.dir))
}

// resetFile marks a ResetTo in progress (see doc.go, "ResetTo"). Part of the
// on-disk format; never change.
const resetFile = "reset-offset-checkpoint"

// ResetTo empties the log and restarts it at offset (Kafka's
// truncateFullyAndStartAt): a follower whose fetch offset fell below the
// leader's local log start (history tiered or deleted) continues from there.
// Every segment is deleted; LogStartOffset, LogEndOffset, FlushedOffset and
// the recovery point become offset and the epoch cache empties.
//
// Crash safety: the reset-offset-checkpoint, written atomically first, is
// the commit point. A crash before it leaves the old log; after it, Open
// finishes the reset (completeReset is idempotent), so reopening yields the
// old log or the empty one at offset, never a mixture. Readers are blocked
// for the duration (a few fsyncs).
func (l *Log) ResetTo(offset int64) error {
	return l.resetTo(offset, nil)
}

// ResetToWithProducerSnapshot is ResetTo that installs snapshot (encoded
// as a snapshot file, doc.go "Producer-state snapshots"; e.g. the producer
// section of the tiered object ending at offset) as the producer state at
// offset, instead of starting empty, so duplicates of idempotent batches
// written before offset are still recognised. The snapshot is decoded and
// checked to be as of offset before anything changes: if it is bad, the log
// is untouched and the error wraps ErrBadProducerSnapshot.
//
// The snapshot is also written as <offset>.snapshot once the reset is
// committed, so a restart rebuilds from it. A crash before that file is
// durable leaves the reset log with empty producer state (as ResetTo);
// failing to write it is logged, not fatal (the state in memory is right).
func (l *Log) ResetToWithProducerSnapshot(offset int64, snapshot []byte) error {
	got, table, err := decodeProducerSnapshot(snapshot)
	if err != nil {
		return err
	}
	if got != offset {
		return fmt.Errorf("%w: snapshot is as of %d, reset to %d", errBadSnapshot, got, offset)
	}
	return l.resetTo(offset, &resetProducers{data: snapshot, table: table})
}

// resetProducers is the producer state a reset installs.
type resetProducers struct {
	data  []byte // the encoded snapshot, written as the snapshot file
	table producerTable
}

func (l *Log) resetTo(offset int64, producers *resetProducers) error {
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < 0 || offset > maxOffset {
		return fmt.Errorf("%w: reset to %d", ErrOffsetOutOfRange, offset)
	}
	if err := l.resetLocked(offset); err != nil {
		return l.failLocked(fmt.Errorf("reset to %d: %w", offset, err))
	}
	if producers != nil {
		l.installProducersLocked(offset, producers)
	}
	l.notifyLocked()
	return nil
}

// installProducersLocked makes p the producer state of the freshly reset
// log at offset and persists it as the snapshot file at offset.
// REQUIRES: appendMu and mu held; the log is empty at offset.
func (l *Log) installProducersLocked(offset int64, p *resetProducers) {
	name := filepath.Base(segmentFileName(l.dir, offset, snapshotSuffix))
	if err := writeFileAtomic(l.dir, name, p.data); err != nil {
		l.logger.Warn("hotlog: producer snapshot of a reset not written; a restart starts with empty producer state",
			"dir", l.dir, "offset", offset, "err", err)
	}
	l.producers = p.table
	l.producers.touchAll(l.now().UnixMilli())
	l.producers.expire(l.now().UnixMilli(), l.mu.cfg.producerIDExpiration())
	l.mu.firstUnstable = l.producers.firstUnstable(noOffset)
}

// resetLocked does ResetTo's work. REQUIRES: appendMu, flushMu, mu held.
func (l *Log) resetLocked(offset int64) error {
	if err := writeOffsetCheckpoint(l.dir, resetFile, offset); err != nil {
		return err
	}
	var closeErr error
	for _, s := range l.mu.segments {
		if err := s.closeFiles(); err != nil && closeErr == nil {
			closeErr = err
		}
	}
	// The old segments are gone from the log's view whatever happens next:
	// on failure the log is fenced and Open completes the reset.
	l.mu.segments, l.mu.unsynced = nil, nil
	if closeErr != nil {
		return closeErr
	}
	s, err := completeReset(l.dir, offset, nil)
	if err != nil {
		return err
	}
	if err := s.openIndexFiles(l.dir, os.O_CREATE|os.O_WRONLY|os.O_APPEND); err != nil {
		s.file.Close()
		return err
	}
	l.mu.segments = []*segment{s}
	l.mu.epochs.entries = nil
	l.producers = newProducerTable()
	l.mu.firstUnstable = noOffset
	l.mu.logStartOffset, l.mu.flushedOffset, l.mu.recoveryPoint = offset, offset, offset
	// Everything from offset on is new, dirty data.
	return l.lowerCleanerCheckpointLocked(offset)
}

// completeReset makes the directory hold only an empty segment at offset,
// with every checkpoint at offset and no epochs, then removes the reset
// marker. Each step is atomic and the whole is idempotent: it lists the
// directory itself, so a crash at any step is finished by running it again.
// It returns the new segment with its .log open (index files closed).
// crashAfter, when not nil, is consulted after each step (tests simulate a
// crash there by returning true: errSimulatedCrash).
func completeReset(dir string, offset int64, crashAfter func(step int) bool) (*segment, error) {
	step := 0
	stop := func() bool {
		step++
		return crashAfter != nil && crashAfter(step)
	}
	bases, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	for _, base := range bases {
		if err := removeSegmentFiles(dir, base); err != nil {
			return nil, err
		}
		if stop() {
			return nil, errSimulatedCrash
		}
	}
	// Producer snapshots describe the old log: all go (the state empties).
	if err := removeSnapshots(dir, func(int64) bool { return false }); err != nil {
		return nil, err
	}
	s, err := createSegment(dir, offset)
	if err != nil {
		return nil, err
	}
	if err := finishResetFiles(dir, offset, stop); err != nil {
		s.closeFiles()
		return nil, err
	}
	if err := s.closeIndexFiles(); err != nil {
		s.file.Close()
		return nil, err
	}
	return s, nil
}

// finishResetFiles makes the new segment's directory entry durable, writes
// the checkpoints of an empty log at offset, and removes the reset marker
// (last: it is what makes Open redo the reset).
func finishResetFiles(dir string, offset int64, stop func() bool) error {
	steps := []func() error{
		func() error { return syncDir(dir) },
		func() error { return writeOffsetCheckpoint(dir, logStartOffsetFile, offset) },
		func() error { return writeOffsetCheckpoint(dir, recoveryPointFile, offset) },
		func() error { return writeFileAtomic(dir, leaderEpochFile, encodeEpochCheckpoint(nil)) },
		func() error { return os.Remove(filepath.Join(dir, resetFile)) },
		func() error { return syncDir(dir) },
	}
	for _, run := range steps {
		if err := run(); err != nil {
			return err
		}
		if stop() {
			return errSimulatedCrash
		}
	}
	return nil
}

// errSimulatedCrash ends completeReset early in crash tests.
var errSimulatedCrash = errors.New("hotlog: simulated crash")

// finishInterruptedReset completes a ResetTo that a crash interrupted (the
// reset marker is present) before recovery reads the checkpoints; it
// returns the segment bases recovery should open.
func (l *Log) finishInterruptedReset(bases []int64) ([]int64, error) {
	marker := filepath.Join(l.dir, resetFile)
	if _, err := os.Stat(marker); err != nil {
		return bases, nil
	}
	offset, ok := readOffsetCheckpoint(l.dir, resetFile)
	if !ok || offset > maxOffset {
		// It is written atomically, so this is damage, not a torn write.
		// Keeping what is left of the old log is the safe side: at worst a
		// prefix is gone, which the follower refetches or resets again.
		l.logger.Error("hotlog: ignoring an unreadable reset marker", "dir", l.dir)
		if err := os.Remove(marker); err != nil {
			return nil, err
		}
		return bases, syncDir(l.dir)
	}
	l.logger.Warn("hotlog: finishing an interrupted reset", "dir", l.dir, "offset", offset)
	s, err := completeReset(l.dir, offset, nil)
	if err != nil {
		return nil, err
	}
	if err := s.file.Close(); err != nil {
		return nil, err
	}
	return []int64{offset}, nil
}
