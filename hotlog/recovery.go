package hotlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-log/strata/recordbatch"
)

// scanBufferSize is the read-ahead used when recovery scans a segment.
const scanBufferSize = 256 << 10

// rebuild re-reads the whole .log, validating every batch, and rebuilds the
// in-memory state and index bytes. It stops at the first torn or corrupt
// batch: s.size is then the end of the good prefix and damage says why.
// onBatch sees every good batch. err is an I/O failure (not damage).
func (s *segment) rebuild(interval int, onBatch func(recordbatch.Header)) (idx, tidx []byte, damage, err error) {
	st, err := s.file.Stat()
	if err != nil {
		return nil, nil, nil, err
	}
	s.resetState()
	fileSize := st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(s.file, 0, fileSize), scanBufferSize)
	var buf []byte
	for pos := int64(0); pos < fileSize; {
		h, b, derr := readValidBatch(r, buf, fileSize-pos)
		if derr == nil {
			derr = s.checkSequence(h, pos)
		}
		if derr != nil {
			return idx, tidx, fmt.Errorf("at position %d (offset %d): %w", pos, s.next, derr), nil
		}
		buf = b
		if s.rollBaseMs < 0 {
			s.rollBaseMs = h.MaxTimestamp
		}
		idx, tidx = s.track(h, pos, interval, h.MaxTimestamp, idx, tidx)
		onBatch(h)
		pos = s.size
	}
	return idx, tidx, nil, nil
}

// readValidBatch reads one whole batch from r, bounded by left bytes, and
// validates it. buf is reused when large enough.
func readValidBatch(r *bufio.Reader, buf []byte, left int64) (recordbatch.Header, []byte, error) {
	head, err := r.Peek(recordbatch.HeaderSize)
	if err != nil {
		return recordbatch.Header{}, buf, fmt.Errorf("%w: torn header", ErrCorruptBatch)
	}
	h, err := recordbatch.PeekHeader(head)
	if err != nil {
		return h, buf, err
	}
	if int64(h.Size()) > left {
		return h, buf, fmt.Errorf("%w: torn batch: %d bytes, %d left", ErrCorruptBatch, h.Size(), left)
	}
	if cap(buf) < h.Size() {
		buf = make([]byte, h.Size())
	}
	buf = buf[:h.Size()]
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, buf, fmt.Errorf("%w: torn batch: %v", ErrCorruptBatch, err)
	}
	h, err = recordbatch.CheckStored(buf)
	return h, buf, err
}

// checkSequence requires offsets to increase and to fit the u32 index fields.
func (s *segment) checkSequence(h recordbatch.Header, pos int64) error {
	switch {
	case h.BaseOffset > maxOffset:
		return fmt.Errorf("%w: base offset %d out of range", ErrCorruptBatch, h.BaseOffset)
	case h.BaseOffset < s.next:
		return fmt.Errorf("%w: base offset %d below %d", ErrCorruptBatch, h.BaseOffset, s.next)
	case h.LastOffset()-s.base > math.MaxUint32 || pos+int64(h.Size()) > math.MaxUint32:
		return fmt.Errorf("%w: batch at offset %d does not fit the segment", ErrCorruptBatch, h.BaseOffset)
	}
	return nil
}

// loadTrusted loads a sealed segment below the recovery point from its index
// files, reading only the headers after the last index entry.
func (s *segment) loadTrusted(dir string) error {
	st, err := s.file.Stat()
	if err != nil {
		return err
	}
	s.resetState()
	s.size = st.Size()
	if s.offsetIndex, err = loadOffsetIndex(segmentFileName(dir, s.base, indexSuffix), s.size); err != nil {
		return err
	}
	var lastRel uint32
	if n := len(s.offsetIndex); n > 0 {
		lastRel = s.offsetIndex[n-1].rel
	}
	if s.timeIndex, err = loadTimeIndex(segmentFileName(dir, s.base, timeIndexSuffix), lastRel); err != nil {
		return err
	}
	if n := len(s.timeIndex); n > 0 {
		s.maxTimestamp, s.maxTimestampOffset = s.timeIndex[n-1].ts, s.base+int64(s.timeIndex[n-1].rel)
	}
	return s.scanTail()
}

// scanTail reads headers from the last index entry to the end of the file to
// learn the segment's next offset and maximum timestamp.
func (s *segment) scanTail() error {
	var start int64
	if n := len(s.offsetIndex); n > 0 {
		start = int64(s.offsetIndex[n-1].pos)
	}
	var scanErr error
	err := s.forEachHeader(start, func(pos int64, h recordbatch.Header) bool {
		if pos == start && len(s.offsetIndex) > 0 && h.BaseOffset != s.base+int64(s.offsetIndex[len(s.offsetIndex)-1].rel) {
			scanErr = fmt.Errorf("%w: index entry does not match the log", ErrCorruptBatch)
			return false
		}
		if h.BaseOffset < s.next || pos+int64(h.Size()) > s.size {
			scanErr = fmt.Errorf("%w: bad batch header at %d", ErrCorruptBatch, pos)
			return false
		}
		if h.MaxTimestamp > s.maxTimestamp {
			s.maxTimestamp, s.maxTimestampOffset = h.MaxTimestamp, h.BaseOffset
		}
		s.next = h.LastOffset() + 1
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err == nil && s.size > 0 {
		var buf [recordbatch.HeaderSize]byte
		h, herr := s.readHeader(0, buf[:])
		s.rollBaseMs, err = h.MaxTimestamp, herr
	}
	return err
}

// listSegments returns the base offsets of the .log files in dir, deleting
// leftover temp files and index files without a log.
func listSegments(dir string) ([]int64, error) {
	names, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	logs := map[int64]bool{}
	var orphans []string
	for _, e := range names {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			orphans = append(orphans, name)
			continue
		}
		ext := filepath.Ext(name)
		base, err := strconv.ParseInt(strings.TrimSuffix(name, ext), 10, 64)
		if err != nil || base < 0 || len(name)-len(ext) != 20 {
			continue
		}
		switch ext {
		case logSuffix:
			logs[base] = true
		case indexSuffix, timeIndexSuffix, txnIndexSuffix:
			defer func() {
				if !logs[base] {
					os.Remove(filepath.Join(dir, name))
				}
			}()
		}
	}
	for _, name := range orphans {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	bases := make([]int64, 0, len(logs))
	for b := range logs {
		bases = append(bases, b)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}
