package hotlog

// The cleaned-segment writer: the compaction cleaner writes the
// rewritten batches of a run of sealed segments into new segment files
// named <base>.log.cleaned (+ .index/.timeindex/.txnindex .cleaned), which
// ReplaceSegments then swaps in (clean_replace.go; doc.go, "Compaction").

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"

	"github.com/strata-log/strata/recordbatch"
)

// Suffixes of the cleaner's files. Part of the on-disk format; never change.
const (
	cleanedSuffix = ".cleaned" // written by a CleanedSegment, not yet committed
	swapSuffix    = ".swap"    // committed new segment file, not yet renamed to its final name
	deletedSuffix = ".deleted" // replaced old segment file, about to be unlinked
)

// cleanedWriteBuffer is the write buffer of a CleanedSegment.
const cleanedWriteBuffer = 256 << 10

// segmentSuffixes are the files of one segment. The .log comes last: the
// swap renames it last, so while <base>.log.swap exists none of the new
// segment's files is known to be in place (clean_recovery.go).
var segmentSuffixes = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}

// Errors of the cleaner API.
var (
	// ErrSegmentsChanged: ReplaceSegments found the old segments gone or
	// changed (retention, DeleteRecords, Truncate, ResetTo or another
	// replace ran meanwhile). Nothing was changed; abort the cleaned
	// segments and plan again.
	ErrSegmentsChanged = errors.New("hotlog: segments changed during cleaning")
	// ErrInvalidCleaning: a CleanedSegment or ReplaceSegments call broke the
	// rules (offsets not increasing, outside the replaced range, a writer
	// reused or of another log). A caller bug; nothing was changed.
	ErrInvalidCleaning = errors.New("hotlog: invalid cleaned segment")
)

// cleanedState is the life cycle of a CleanedSegment.
type cleanedState int

const (
	cleanedOpen      cleanedState = iota // accepting Append
	cleanedPrepared                      // flushed, index files written and fsynced
	cleanedCommitted                     // named in a committed swap: its files belong to the log
	cleanedAborted                       // files removed
)

// CleanedSegment writes one cleaned segment. It is owned by one goroutine
// (the cleaner's) until ReplaceSegments consumes it or Abort removes it;
// its methods are not safe for concurrent use.
type CleanedSegment struct {
	l        *Log
	seg      *segment // unpublished: built by Append exactly as recovery would
	w        *bufio.Writer
	state    cleanedState
	interval int    // index interval (the log's IndexIntervalBytes at creation)
	idx      []byte // offset index bytes (written at prepare)
	tidx     []byte // time index bytes (written at prepare)
}

// NewCleanedSegment starts a cleaned segment whose name is base: the first
// one of a replacement must have the first replaced segment's base, later
// ones any base inside the replaced range. It creates <base>.log.cleaned
// (truncating a leftover of an earlier, crashed attempt); only one writer
// per base may be open at a time.
func (l *Log) NewCleanedSegment(base int64) (*CleanedSegment, error) {
	if base < 0 || base > maxOffset {
		return nil, fmt.Errorf("%w: base %d", ErrInvalidCleaning, base)
	}
	l.mu.RLock()
	err := l.usableLocked()
	interval := l.mu.cfg.IndexIntervalBytes
	l.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	if !l.cleaner.claim(base) {
		return nil, fmt.Errorf("%w: a cleaned segment at %d is already open", ErrInvalidCleaning, base)
	}
	path := segmentFileName(l.dir, base, logSuffix+cleanedSuffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_RDWR, 0o644)
	if err != nil {
		l.cleaner.release(base)
		return nil, fmt.Errorf("hotlog: create cleaned segment %d: %w", base, err)
	}
	return &CleanedSegment{l: l, seg: newSegmentState(base, f), w: bufio.NewWriterSize(f, cleanedWriteBuffer),
		interval: interval}, nil
}

// Base is the segment's name (its base offset).
func (c *CleanedSegment) Base() int64 { return c.seg.base }

// Size is the bytes appended so far.
func (c *CleanedSegment) Size() int64 { return c.seg.size }

// NextOffset is one past the last offset of the last appended batch (Base
// when empty).
func (c *CleanedSegment) NextOffset() int64 { return c.seg.next }

// Append adds one whole, CRC-valid batch (stored format: it may hold fewer
// records than lastOffsetDelta+1, even none). Its base offset must be >= Base
// and > the last offset of the previous batch, and the segment must stay
// within the index limits (relative offsets and positions fit 32 bits).
func (c *CleanedSegment) Append(batch []byte) error {
	if c.state != cleanedOpen {
		return fmt.Errorf("%w: append to a finished cleaned segment %d", ErrInvalidCleaning, c.seg.base)
	}
	h, err := recordbatch.CheckStored(batch)
	if err != nil {
		return err
	}
	if h.Size() != len(batch) {
		return fmt.Errorf("%w: %d bytes after the batch", ErrInvalidCleaning, len(batch)-h.Size())
	}
	s := c.seg
	switch {
	case h.BaseOffset < s.next || h.LastOffset() > maxOffset:
		return fmt.Errorf("%w: batch at %d below %d in segment %d", ErrInvalidCleaning, h.BaseOffset, s.next, s.base)
	case h.LastOffset()-s.base > math.MaxUint32 || s.size+int64(h.Size()) > math.MaxUint32:
		return fmt.Errorf("%w: batch at %d does not fit segment %d", ErrInvalidCleaning, h.BaseOffset, s.base)
	}
	if _, err := c.w.Write(batch); err != nil {
		return fmt.Errorf("hotlog: write cleaned segment %d: %w", s.base, err)
	}
	c.idx, c.tidx = s.track(h, s.size, c.interval, h.MaxTimestamp, c.idx, c.tidx)
	return nil
}

// Abort removes the segment's files. Safe to call more than once, and a
// no-op once ReplaceSegments committed the segment (its files are then the
// log's), so a cleaner may always defer it.
func (c *CleanedSegment) Abort() error {
	if c.state == cleanedCommitted || c.state == cleanedAborted {
		return nil
	}
	c.state = cleanedAborted
	defer c.l.cleaner.release(c.seg.base)
	err := c.seg.file.Close()
	for _, sfx := range segmentSuffixes {
		if rerr := os.Remove(segmentFileName(c.l.dir, c.seg.base, sfx+cleanedSuffix)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// prepare flushes the log, writes the index files and the given
// aborted-transaction entries, and fsyncs all four .cleaned files. The
// segment state then describes the files exactly.
func (c *CleanedSegment) prepare(aborted []AbortedTxn) error {
	if err := c.w.Flush(); err != nil {
		return err
	}
	if err := c.seg.file.Sync(); err != nil {
		return err
	}
	dir, base := c.l.dir, c.seg.base
	for _, f := range []struct {
		suffix string
		data   []byte
	}{{indexSuffix, c.idx}, {timeIndexSuffix, c.tidx}, {txnIndexSuffix, EncodeAbortedTxns(aborted)}} {
		if err := writeFileSynced(segmentFileName(dir, base, f.suffix+cleanedSuffix), f.data); err != nil {
			return err
		}
	}
	c.seg.aborted = aborted
	c.state = cleanedPrepared
	return nil
}
