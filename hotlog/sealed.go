package hotlog

// Additions for the tier uploader: listing sealed segments,
// opening one for reading, and retention that never deletes a segment the
// caller has not released (one not yet in the tier manifest).

import (
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// SegmentInfo describes one sealed segment.
type SegmentInfo struct {
	BaseOffset   int64 // the segment's name: offset of its first batch
	NextOffset   int64 // one past the last offset of its last batch
	Size         int64 // bytes of whole batches in the .log
	MaxTimestamp int64 // largest batch maxTimestamp (math.MinInt64 if empty)
	// RangeEnd is the next segment's base: the end of the offset range
	// this segment stands for. It equals NextOffset unless compaction
	// dropped the segment's last batches (a gap up to the next segment).
	// ProducerSnapshotAt(RangeEnd) finds the producer state when RangeEnd
	// is a roll point: always, unless a cleaner split its output elsewhere
	// than at the replaced segments' bases.
	RangeEnd int64
	// AbortedTxns is the segment's aborted-transaction index: the aborts
	// whose marker lies in it (a copy; doc.go, "Transactions").
	AbortedTxns []AbortedTxn
}

// SealedSegments lists every segment but the active one, oldest first.
// Sealed segments never change (Truncate aside, which followers do and
// leaders do not), so the list is a stable picture of what may be uploaded.
func (l *Log) SealedSegments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed || len(l.mu.segments) == 0 {
		return nil
	}
	segs := l.mu.segments[:len(l.mu.segments)-1]
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = segmentInfoLocked(s, l.mu.segments[i+1].base)
	}
	return out
}

// OpenSealedSegment opens a sealed segment's .log for reading and returns
// it with the segment's size (bytes of whole batches). The caller owns and
// closes the file; it stays readable even if retention deletes the segment
// meanwhile (the name goes, the open file does not).
func (l *Log) OpenSealedSegment(base int64) (*os.File, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, 0, err
	}
	for _, s := range l.mu.segments[:len(l.mu.segments)-1] {
		if s.base != base {
			continue
		}
		// A duplicate of the segment's own descriptor, taken under mu: the
		// file is the segment's whatever happens to the names (retention
		// unlinks them; a ReplaceSegments renames them before it publishes
		// the new segment list).
		f, err := dupFile(s.file, segmentFileName(l.dir, s.base, logSuffix))
		if err != nil {
			return nil, 0, fmt.Errorf("hotlog: open sealed segment %d: %w", base, err)
		}
		return f, s.size, nil
	}
	return nil, 0, fmt.Errorf("%w: no sealed segment at %d", ErrOffsetOutOfRange, base)
}

// ApplyRetentionBelow is ApplyRetention except that the time and size
// rules delete only segments that end at or below limit (NextOffset <=
// limit): the tier passes the end of what the manifest holds, so a segment
// is never deleted locally before its upload is committed. Segments wholly
// below the log start offset (DeleteRecords) go regardless of limit.
func (l *Log) ApplyRetentionBelow(now time.Time, limit int64) (int, error) {
	return l.applyRetention(now, limit)
}

// dupFile returns a new *os.File on a duplicate of f's descriptor
// (close-on-exec), named name. REQUIRES: f stays open during the call.
func dupFile(f *os.File, name string) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var dupErr error
	if err := rc.Control(func(fd uintptr) { nfd, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	return os.NewFile(uintptr(nfd), name), nil
}

// capAtLimitLocked returns how many of the n oldest segments end at or
// below limit, never fewer than keep. REQUIRES: mu held.
func (l *Log) capAtLimitLocked(n, keep int, limit int64) int {
	if limit == math.MaxInt64 {
		return n
	}
	capped := 0
	for capped < n && l.mu.segments[capped].next <= limit {
		capped++
	}
	return max(capped, keep)
}

// SealedPosition is the byte position, in the sealed segment at base, of
// the first batch whose last offset is at or above offset (the segment's
// size when none is): where an upload of the segment's part from offset
// on starts. Replicas hold the same batches at the same offsets, so the
// part starts at offset exactly when offset is a batch boundary of any
// replica's log.
func (l *Log) SealedPosition(base, offset int64) (int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return 0, err
	}
	for _, s := range l.mu.segments[:len(l.mu.segments)-1] {
		if s.base == base {
			pos, _, _, err := s.findBatch(offset)
			return pos, err
		}
	}
	return 0, fmt.Errorf("%w: no sealed segment at %d", ErrOffsetOutOfRange, base)
}
