package hotlog

import (
	"errors"
	"fmt"
)

// Read returns whole batches, verbatim, starting with the batch that contains
// offset, stopping before any batch whose last offset is >= upTo (the HW) and
// once maxBytes is reached; but if the first batch alone exceeds maxBytes it
// is still returned (KIP-74). offset < LogStartOffset or > LogEndOffset gives
// ErrOffsetOutOfRange. offset == upTo gives an empty slice.
//
// Batches come from one segment per call, as in Kafka. Every returned batch
// passed its CRC check: a corrupt batch ends the result (ErrCorruptBatch if it
// is the first), so damage is never served.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.mu.closed {
		return nil, ErrClosed
	}
	if offset < l.mu.logStartOffset || offset > l.leoLocked() {
		return nil, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.mu.logStartOffset, l.leoLocked())
	}
	if offset >= upTo || offset == l.leoLocked() {
		return []byte{}, nil
	}
	for i := l.segmentForLocked(offset); i < len(l.mu.segments); i++ {
		s := l.mu.segments[i]
		pos, _, found, err := s.findBatch(offset)
		if err != nil {
			return nil, l.corruptReadLocked(s, offset, err)
		}
		if found {
			return l.readFromLocked(s, pos, maxBytes, upTo)
		}
	}
	return []byte{}, nil
}

// readFromLocked reads batches of s from pos under the Read rules: one
// pread of up to maxBytes, then the headers are walked in memory (a first
// batch larger than maxBytes is read whole, KIP-74). REQUIRES: mu held.
func (l *Log) readFromLocked(s *segment, pos int64, maxBytes int, upTo int64) ([]byte, error) {
	buf, err := s.readRange(pos, min(max(int64(maxBytes), BatchHeaderSize), s.size-pos))
	if err != nil {
		return nil, err
	}
	off := 0
	for off+BatchHeaderSize <= len(buf) {
		// Validate before trusting any header field (lastOffsetDelta included).
		h, err := parseHeaderOnly(buf[off:])
		if err == nil && off+h.Size() > len(buf) {
			if off > 0 {
				break
			}
			if buf, err = s.readRange(pos, min(int64(h.Size()), s.size-pos)); err != nil {
				return nil, err
			}
		}
		if err == nil {
			_, err = validateStoredBatch(buf[off:])
		}
		if err != nil {
			if off == 0 {
				return nil, l.corruptReadLocked(s, pos, err)
			}
			// The error is swallowed (the good prefix is served), so log it here.
			l.logger.Warn("hotlog: corrupt batch not served", "dir", l.dir, "segment", s.base, "position", pos+int64(off), "err", err)
			l.corruptReadLocked(s, pos+int64(off), err)
			break
		}
		if h.LastOffset() >= upTo {
			break
		}
		off += h.Size()
	}
	return buf[:off], nil
}

// readRange reads n bytes at pos. REQUIRES: Log.mu held, pos+n <= s.size.
func (s *segment) readRange(pos, n int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := s.file.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("hotlog: read segment %d at %d: %w", s.base, pos, err)
	}
	return buf, nil
}

// corruptReadLocked counts damage met by a reader and returns the error the
// caller gets (ErrCorruptBatch): the replica must re-fetch that range from
// elsewhere. Callers that return it do not log it.
func (l *Log) corruptReadLocked(s *segment, pos int64, err error) error {
	l.corruptReads.Add(1)
	if errors.Is(err, ErrCorruptBatch) {
		return fmt.Errorf("hotlog: segment %d position %d: %w", s.base, pos, err)
	}
	return fmt.Errorf("%w: segment %d position %d: %w", ErrCorruptBatch, s.base, pos, err)
}
