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

// readFromLocked reads batches of s from pos under the Read rules.
// REQUIRES: mu held.
func (l *Log) readFromLocked(s *segment, pos int64, maxBytes int, upTo int64) ([]byte, error) {
	end := pos
	var ends []int64
	err := s.forEachHeader(pos, func(p int64, h BatchHeader) bool {
		size := int64(h.Size())
		if h.LastOffset() >= upTo || (len(ends) > 0 && p+size-pos > int64(maxBytes)) {
			return false
		}
		end = p + size
		ends = append(ends, end)
		return true
	})
	if err != nil && len(ends) == 0 {
		return nil, l.corruptReadLocked(s, pos, err)
	}
	buf := make([]byte, end-pos)
	if _, err := s.file.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("hotlog: read segment %d: %w", s.base, err)
	}
	start := 0
	for _, e := range ends {
		if _, err := validateStoredBatch(buf[start : e-pos]); err != nil {
			if start == 0 {
				return nil, l.corruptReadLocked(s, pos, err)
			}
			l.corruptReadLocked(s, pos+int64(start), err)
			break
		}
		start = int(e - pos)
	}
	return buf[:start], nil
}

// corruptReadLocked counts and logs damage met by a reader. The caller gets
// ErrCorruptBatch; the replica must re-fetch that range from elsewhere.
func (l *Log) corruptReadLocked(s *segment, pos int64, err error) error {
	l.corruptReads.Add(1)
	l.logger.Warn("hotlog: corrupt batch not served", "dir", l.dir, "segment", s.base, "position", pos, "err", err)
	if errors.Is(err, ErrCorruptBatch) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrCorruptBatch, err)
}
