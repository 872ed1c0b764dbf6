package hotlog

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-log/strata/recordbatch"
)

// Open opens (creating if needed) and recovers the log in cfg.Dir.
// See doc.go, "Recovery".
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	l := &Log{dir: cfg.Dir, logger: cfg.Logger, now: cfg.Now, durability: cfg.Durability, syncFile: fdatasync}
	l.mu.cfg = cfg
	l.mu.changed = make(chan struct{})
	l.mu.firstUnstable = noOffset
	if err := l.recover(); err != nil {
		for _, s := range l.mu.segments {
			s.closeFiles()
		}
		return nil, fmt.Errorf("%w: open %s: %w", ErrStorage, cfg.Dir, err)
	}
	l.mu.lastCheckpoint = l.now()
	l.flusher = startGroupFlusher(l.flushRound, cfg.FlushInterval)
	return l, nil
}

// recover runs the recovery of doc.go and leaves the log ready to append.
func (l *Log) recover() error {
	// An interrupted segment swap (compaction) is finished first: until
	// then the directory may hold both old and new segment files.
	if err := recoverSwap(l.dir, l.logger); err != nil {
		return err
	}
	bases, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	if bases, err = l.finishInterruptedReset(bases); err != nil {
		return err
	}
	markerPath := filepath.Join(l.dir, cleanShutdownFile)
	_, statErr := os.Stat(markerPath)
	clean := statErr == nil
	recoveryPoint, _ := readOffsetCheckpoint(l.dir, recoveryPointFile)
	logStart, _ := readOffsetCheckpoint(l.dir, logStartOffsetFile)
	l.loadEpochs()
	if clean {
		if err := os.Remove(markerPath); err != nil {
			return err
		}
		if err := syncDir(l.dir); err != nil {
			return err
		}
	}
	if err := l.recoverSegments(bases, clean, recoveryPoint); err != nil {
		return err
	}
	if len(l.mu.segments) == 0 {
		s, err := createSegment(l.dir, logStart)
		if err != nil {
			return err
		}
		l.mu.segments = []*segment{s}
	} else if err := l.reopenActiveIndexes(); err != nil {
		return err
	}
	if err := l.finishRecovery(logStart); err != nil {
		return err
	}
	if err := l.loadCleanerCheckpoint(); err != nil {
		return err
	}
	return l.rebuildProducersLocked()
}

func (l *Log) loadEpochs() {
	data, err := readSmallFile(filepath.Join(l.dir, leaderEpochFile))
	if err != nil {
		return
	}
	entries, err := decodeEpochCheckpoint(data)
	if err != nil {
		l.logger.Warn("hotlog: ignoring bad leader-epoch checkpoint; rebuilding from batches", "dir", l.dir, "err", err)
		return
	}
	l.mu.epochs.entries = entries
}

// recoverSegments opens every segment, trusting those below the recovery
// point and scanning the rest (always the last). At the first damage the
// damaged segment is truncated and every later one deleted.
func (l *Log) recoverSegments(bases []int64, clean bool, recoveryPoint int64) error {
	interval := l.mu.cfg.IndexIntervalBytes
	for i, base := range bases {
		file, err := os.OpenFile(segmentFileName(l.dir, base, logSuffix), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		s := newSegmentState(base, file)
		l.mu.segments = append(l.mu.segments, s)
		last := i == len(bases)-1
		if !last && (clean || bases[i+1] <= recoveryPoint) {
			if err := s.loadTrusted(l.dir); err == nil && s.next <= bases[i+1] {
				continue
			} else if err != nil {
				l.logger.Warn("hotlog: rebuilding index", "dir", l.dir, "segment", base, "err", err)
			}
		}
		damaged, err := l.scanSegment(s, interval, i > 0 && base < l.mu.segments[i-1].next)
		if err != nil {
			return err
		}
		if damaged {
			return l.dropSegmentsAfter(i, bases)
		}
	}
	return nil
}

// scanSegment fully validates s, truncating it at damage. overlap says the
// segment starts below its predecessor's end (then all of it is damage).
func (l *Log) scanSegment(s *segment, interval int, overlap bool) (damaged bool, err error) {
	idx, tidx, damage, err := s.rebuild(interval, func(h recordbatch.Header) {
		l.mu.epochs.assign(h.PartitionLeaderEpoch, h.BaseOffset)
	})
	if err != nil {
		return false, err
	}
	if overlap {
		s.resetState()
		idx, tidx, damage = nil, nil, fmt.Errorf("%w: segment overlaps its predecessor", ErrCorruptBatch)
	}
	if damage != nil {
		st, err := s.file.Stat()
		if err != nil {
			return false, err
		}
		l.logger.Warn("hotlog: damaged segment truncated; nothing past this offset is kept",
			"dir", l.dir, "segment", s.base, "offset", s.next, "position", s.size, "bytes_dropped", st.Size()-s.size, "damage", damage)
		l.mu.stats.RecoveryTruncation += st.Size() - s.size
		if err := s.file.Truncate(s.size); err != nil {
			return false, err
		}
	}
	if err := writeIndexFiles(l.dir, s, idx, tidx); err != nil {
		return false, err
	}
	return damage != nil, s.file.Sync()
}

// writeIndexFiles replaces a segment's index files with rebuilt contents.
func writeIndexFiles(dir string, s *segment, idx, tidx []byte) error {
	for _, f := range []struct {
		suffix string
		data   []byte
	}{{indexSuffix, idx}, {timeIndexSuffix, tidx}} {
		if err := writeFileSynced(segmentFileName(dir, s.base, f.suffix), f.data); err != nil {
			return err
		}
	}
	return nil
}

func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// dropSegmentsAfter deletes every segment after index i (they follow damage).
func (l *Log) dropSegmentsAfter(i int, bases []int64) error {
	for _, base := range bases[i+1:] {
		l.logger.Warn("hotlog: deleting segment after damage", "dir", l.dir, "segment", base)
		if err := removeSegmentFiles(l.dir, base); err != nil {
			return err
		}
	}
	return syncDir(l.dir)
}

// reopenActiveIndexes opens the last segment's index files for appending
// (the scan just rewrote them).
func (l *Log) reopenActiveIndexes() error {
	return l.activeLocked().openIndexFiles(l.dir, os.O_CREATE|os.O_WRONLY|os.O_APPEND)
}

// finishRecovery fixes the offsets and epochs to the recovered log and
// checkpoints them: everything on disk now is synced (the scan fsynced what
// it touched), so the recovery point and flushed offset are the LEO.
func (l *Log) finishRecovery(logStart int64) error {
	leo := l.leoLocked()
	logStart = min(max(logStart, l.mu.segments[0].base), leo)
	l.mu.logStartOffset = logStart
	l.mu.epochs.truncateFromEnd(leo)
	l.mu.epochs.truncateFromStart(logStart)
	if err := l.syncAllSegments(); err != nil {
		return err
	}
	l.mu.flushedOffset, l.mu.recoveryPoint = leo, leo
	if err := writeOffsetCheckpoint(l.dir, recoveryPointFile, leo); err != nil {
		return err
	}
	if err := writeOffsetCheckpoint(l.dir, logStartOffsetFile, logStart); err != nil {
		return err
	}
	return writeFileAtomic(l.dir, leaderEpochFile, encodeEpochCheckpoint(l.mu.epochs.entries))
}

// syncAllSegments fsyncs the active segment and the directory: after an
// unclean stop, data the old process wrote may still be only in the page cache.
func (l *Log) syncAllSegments() error {
	if err := l.activeLocked().file.Sync(); err != nil {
		return err
	}
	return syncDir(l.dir)
}
