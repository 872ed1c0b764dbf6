package hotlog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/strata-log/strata/recordbatch"
)

// segment is one .log file with its indexes.
//
// Ownership: file is opened at creation and closed only with Log.mu held
// exclusively (closeFiles, which bumps gen). Reads pread it without the lock
// (read.go) and check gen afterwards. indexFile and timeFile are used by the
// appender while the segment is active and closed by the flusher after the
// segment is sealed and synced. Every other field is published state:
// written with Log.mu held exclusively, read with Log.mu held.
type segment struct {
	base      int64
	file      *os.File
	indexFile *os.File // nil once sealed and synced
	timeFile  *os.File // nil once sealed and synced

	// gen changes whenever bytes below size may change or the file closes:
	// resetState (before a rescan: Truncate, recovery) and closeFiles bump
	// it, with Log.mu held exclusively (or the segment unpublished). A read
	// that saw the same gen before and after its unlocked pread read bytes
	// that were committed and unchanged throughout.
	gen uint64

	size        int64 // bytes of whole batches; the file may hold more (unpublished or torn)
	next        int64 // offset after the last batch; == base when empty
	offsetIndex []offsetIndexEntry
	timeIndex   []timeIndexEntry
	// maxTimestamp is the largest batch maxTimestamp (math.MinInt64 if empty);
	// maxTimestampOffset the base offset of the first batch that reached it.
	maxTimestamp       int64
	maxTimestampOffset int64
	// rollBaseMs is when segment.ms counts from: the wall clock at the first
	// append, or the first batch's maxTimestamp for a reloaded segment; -1 if empty.
	rollBaseMs int64
	// arrivals samples when batches were appended (arrivals.go): what
	// FirstAppendAt dates a record by. In memory only.
	arrivals arrivals
	// bytesSinceIndex counts log bytes since the last offset index entry.
	bytesSinceIndex int64
	// aborted is the segment's aborted-transaction index (txn_index.go):
	// the aborts whose marker lies in this segment, by LastOffset.
	aborted []AbortedTxn
}

func newSegmentState(base int64, file *os.File) *segment {
	return &segment{base: base, file: file, next: base, maxTimestamp: math.MinInt64, rollBaseMs: -1}
}

// createSegment creates the three files of a new, empty segment at base.
func createSegment(dir string, base int64) (*segment, error) {
	flags := os.O_CREATE | os.O_TRUNC | os.O_RDWR
	file, err := os.OpenFile(segmentFileName(dir, base, logSuffix), flags, 0o644)
	if err != nil {
		return nil, err
	}
	s := newSegmentState(base, file)
	if err := s.openIndexFiles(dir, flags); err != nil {
		file.Close()
		return nil, err
	}
	return s, nil
}

// openIndexFiles opens the index files for appending (flags decide truncation).
func (s *segment) openIndexFiles(dir string, flags int) error {
	var err error
	if s.indexFile, err = os.OpenFile(segmentFileName(dir, s.base, indexSuffix), flags, 0o644); err != nil {
		return err
	}
	if s.timeFile, err = os.OpenFile(segmentFileName(dir, s.base, timeIndexSuffix), flags, 0o644); err != nil {
		s.indexFile.Close()
		s.indexFile = nil
		return err
	}
	return nil
}

// track adds one batch written at pos to the in-memory state and returns the
// index file bytes it adds. Used by Append and by recovery so both build the
// same indexes. REQUIRES: Log.mu held exclusively (or the segment unpublished).
func (s *segment) track(h recordbatch.Header, pos int64, interval int, nowMs int64, idx, tidx []byte) ([]byte, []byte) {
	indexed := s.bytesSinceIndex >= int64(interval) && (pos > 0 || interval == 0)
	rel := uint32(h.BaseOffset - s.base)
	if indexed {
		e := offsetIndexEntry{rel: rel, pos: uint32(pos)}
		s.offsetIndex = append(s.offsetIndex, e)
		idx = appendOffsetEntry(idx, e)
		s.bytesSinceIndex = 0
	}
	if h.MaxTimestamp > s.maxTimestamp {
		s.maxTimestamp, s.maxTimestampOffset = h.MaxTimestamp, h.BaseOffset
	}
	if indexed && (len(s.timeIndex) == 0 || s.maxTimestamp > s.timeIndex[len(s.timeIndex)-1].ts) {
		e := timeIndexEntry{ts: s.maxTimestamp, rel: uint32(s.maxTimestampOffset - s.base)}
		s.timeIndex = append(s.timeIndex, e)
		tidx = appendTimeEntry(tidx, e)
	}
	if s.rollBaseMs < 0 {
		s.rollBaseMs = nowMs
	}
	s.arrivals.sample(h.BaseOffset, nowMs)
	s.bytesSinceIndex += int64(h.Size())
	s.size = pos + int64(h.Size())
	s.next = h.LastOffset() + 1
	return idx, tidx
}

// resetState forgets everything about the batches (before a rebuild) and
// bumps gen: the bytes below the old size are about to change (Truncate).
// REQUIRES: Log.mu held exclusively, or the segment unpublished.
func (s *segment) resetState() {
	s.gen++
	s.size, s.next = 0, s.base
	s.offsetIndex, s.timeIndex = nil, nil
	s.maxTimestamp, s.maxTimestampOffset = math.MinInt64, 0
	s.rollBaseMs, s.bytesSinceIndex = -1, 0
	s.arrivals = arrivals{}
}

// fits reports whether a batch run of n bytes ending at lastOffset can go in
// this segment without overflowing u32 index fields.
func (s *segment) fits(n int64, lastOffset int64) bool {
	return s.size+n <= math.MaxUint32 && lastOffset-s.base <= math.MaxUint32
}

// readHeader reads the batch header at pos (framing checked, CRC not).
func (s *segment) readHeader(pos int64, buf []byte) (recordbatch.Header, error) {
	if _, err := s.file.ReadAt(buf[:recordbatch.HeaderSize], pos); err != nil {
		if errors.Is(err, io.EOF) {
			return recordbatch.Header{}, fmt.Errorf("%w: torn header at position %d", ErrCorruptBatch, pos)
		}
		return recordbatch.Header{}, err
	}
	return recordbatch.PeekHeader(buf)
}

// findBatch returns the position and header of the first batch whose last
// offset is >= offset, scanning headers from the index position. found is
// false if no such batch lies below s.size. REQUIRES: Log.mu held.
func (s *segment) findBatch(offset int64) (pos int64, h recordbatch.Header, found bool, err error) {
	var buf [recordbatch.HeaderSize]byte
	for pos = lookupOffset(s.offsetIndex, s.base, offset); pos < s.size; pos += int64(h.Size()) {
		if h, err = s.readHeader(pos, buf[:]); err != nil {
			return pos, h, false, err
		}
		if h.LastOffset() >= offset {
			return pos, h, true, nil
		}
	}
	return pos, h, false, nil
}

// forEachHeader calls fn for each batch header from pos to s.size until fn
// returns false. REQUIRES: Log.mu held.
func (s *segment) forEachHeader(pos int64, fn func(pos int64, h recordbatch.Header) bool) error {
	var buf [recordbatch.HeaderSize]byte
	for pos < s.size {
		h, err := s.readHeader(pos, buf[:])
		if err != nil {
			return err
		}
		if !fn(pos, h) {
			return nil
		}
		pos += int64(h.Size())
	}
	return nil
}

// readBatch reads and CRC-checks the whole batch at pos.
func (s *segment) readBatch(pos int64, h recordbatch.Header) ([]byte, error) {
	b := make([]byte, h.Size())
	if _, err := s.file.ReadAt(b, pos); err != nil {
		return nil, err
	}
	if _, err := recordbatch.CheckStored(b); err != nil {
		return nil, err
	}
	return b, nil
}

// closeFiles closes every open file of the segment and bumps gen, so a
// read in progress discards what it read. REQUIRES: Log.mu held
// exclusively, or the segment unpublished.
func (s *segment) closeFiles() error {
	s.gen++
	err := s.closeIndexFiles()
	if cerr := s.file.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *segment) closeIndexFiles() error {
	var err error
	for _, f := range []**os.File{&s.indexFile, &s.timeFile} {
		if *f != nil {
			if cerr := (*f).Close(); err == nil {
				err = cerr
			}
			*f = nil
		}
	}
	return err
}

// removeFiles deletes the segment's files. REQUIRES: closed.
func removeSegmentFiles(dir string, base int64) error {
	var err error
	for _, suffix := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if rerr := os.Remove(segmentFileName(dir, base, suffix)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}
