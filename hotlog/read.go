package hotlog

import (
	"errors"
	"fmt"
	"os"

	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/recordbatch"
)

// Read path without the lock
//
// A Read captures a readView of one segment under mu.RLock (the file, the
// committed end s.size, the offset index, the segment's generation), then
// preads without any lock, so appends and the roll never wait for a reader's
// I/O. Only bytes below the captured end are read: they were published
// before the capture and an append never rewrites them. What can change them
// (Truncate rewrites the active segment's tail; retention, Truncate and
// Close close files) happens with mu held exclusively and bumps the
// segment's generation inside that same critical section, so a Read
// re-takes mu.RLock after its I/O and discards the result if the generation
// moved: nothing read across a truncation or close is ever served, and a
// pread of a closed *os.File only returns an error (os.File refcounts its
// descriptor, so a closed fd is never reused under a reader). A discarded
// attempt is retried; the last attempt holds mu.RLock across the read, as
// every read did before, so a reader cannot starve.

// readAttempts bounds the lock-free attempts of one Read; the last one is
// done under mu.RLock.
const readAttempts = 4

// maxScanWindow caps the extra bytes read ahead of the wanted batch to find
// it from the nearest index entry in the same pread.
const maxScanWindow = 1 << 20

// Read returns whole batches, verbatim, starting with the batch that contains
// offset, stopping before any batch whose last offset is >= upTo (the HW) and
// once maxBytes is reached; but if the first batch alone exceeds maxBytes it
// is still returned (KIP-74). offset < LogStartOffset or > LogEndOffset gives
// ErrOffsetOutOfRange. offset == upTo gives an empty slice.
//
// Batches come from one segment per call, as in Kafka. Every returned batch
// passed its CRC check: a corrupt batch ends the result (ErrCorruptBatch if it
// is the first), so damage is never served. The file is read without holding
// the log's lock (see above): a concurrent Truncate, retention or Close makes
// the read start over, never return what it saw.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	data, _, err := l.read(offset, maxBytes, upTo, nil)
	return data, err
}

// ReadPooled is Read with the file read into a bufpool buffer: data is a
// slice of backing, which the caller owns and must give back with
// bufpool.Put once nothing reads data any more (the broker does after
// encoding the response). backing is nil when data is empty or not pooled.
func (l *Log) ReadPooled(offset int64, maxBytes int, upTo int64) (data, backing []byte, err error) {
	return l.read(offset, maxBytes, upTo, &readBuffers{})
}

// read is Read, pooled when bufs is not nil.
func (l *Log) read(offset int64, maxBytes int, upTo int64, bufs *readBuffers) (data, backing []byte, err error) {
	for attempt := 1; ; attempt++ {
		data, stale, err := l.tryRead(offset, maxBytes, upTo, attempt >= readAttempts, bufs)
		if stale || err != nil || len(data) == 0 {
			bufs.releaseAll()
		}
		if !stale {
			return data, bufs.keepLast(), err
		}
	}
}

// readBuffers are the pooled buffers one Read attempt read into; data is
// always a slice of the last one (each read of a segment replaces the
// buffer it reads from). Owned by one Read; nil means "not pooled".
type readBuffers struct{ list [][]byte }

func (b *readBuffers) alloc(n int64) []byte {
	if b == nil {
		return make([]byte, n)
	}
	buf := bufpool.Get(int(n))[:n]
	b.list = append(b.list, buf)
	return buf
}

// keepLast returns every buffer but the last to the pool and hands the last
// one (data's backing) to the caller.
func (b *readBuffers) keepLast() []byte {
	if b == nil || len(b.list) == 0 {
		return nil
	}
	last := b.list[len(b.list)-1]
	for _, buf := range b.list[:len(b.list)-1] {
		bufpool.Put(buf)
	}
	b.list = b.list[:0]
	return last
}

func (b *readBuffers) releaseAll() {
	if b == nil {
		return
	}
	for _, buf := range b.list {
		bufpool.Put(buf)
	}
	b.list = b.list[:0]
}

// tryRead is one attempt of Read. Unless locked, each segment is read with
// mu released; stale reports that the segment changed meanwhile and the
// attempt was discarded.
func (l *Log) tryRead(offset int64, maxBytes int, upTo int64, locked bool, bufs *readBuffers) (data []byte, stale bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if done, err := l.checkReadLocked(offset, upTo); done || err != nil {
		return []byte{}, false, err
	}
	for i := l.segmentForLocked(offset); i < len(l.mu.segments); i++ {
		v := l.viewLocked(l.mu.segments[i], maxBytes)
		v.bufs = bufs
		if !locked {
			l.mu.RUnlock()
		}
		res := v.read(offset, upTo)
		if !locked {
			l.mu.RLock()
			if v.s.gen != v.gen || l.mu.closed {
				return nil, true, nil
			}
			// Segments before v.s may have gone (retention): find it again.
			i = l.segmentForLocked(v.s.base)
		}
		if res.err != nil || res.damage != nil || res.found {
			return l.finishReadLocked(v.s, res)
		}
	}
	return []byte{}, false, nil
}

// checkReadLocked applies Read's range rules: an error, or done when the
// answer is empty. REQUIRES: mu held.
func (l *Log) checkReadLocked(offset, upTo int64) (done bool, err error) {
	if l.mu.closed {
		return true, ErrClosed
	}
	if len(l.mu.segments) == 0 {
		// Only after a failed ResetTo, which fenced the log (mu.err set).
		if err := l.usableLocked(); err != nil {
			return true, err
		}
		return true, fmt.Errorf("%w: no segments", ErrStorage)
	}
	if offset < l.mu.logStartOffset || offset > l.leoLocked() {
		return true, fmt.Errorf("%w: %d not in [%d, %d]", ErrOffsetOutOfRange, offset, l.mu.logStartOffset, l.leoLocked())
	}
	return offset >= upTo || offset == l.leoLocked(), nil
}

// finishReadLocked turns a validated segment read into Read's answer,
// counting and logging damage only now that it is known not to come from
// a concurrent truncation. REQUIRES: mu held.
func (l *Log) finishReadLocked(s *segment, res segmentRead) ([]byte, bool, error) {
	switch {
	case res.err != nil:
		return nil, false, res.err
	case res.damage != nil && len(res.data) == 0:
		return nil, false, l.corruptReadLocked(s, res.damagePos, res.damage)
	case res.damage != nil:
		// The error is swallowed (the good prefix is served), so log it here.
		l.logger.Warn("hotlog: corrupt batch not served", "dir", l.dir, "segment", s.base, "position", res.damagePos, "err", res.damage)
		l.corruptReadLocked(s, res.damagePos, res.damage)
	}
	return res.data, false, nil
}

// readView is what a Read captures of one segment under mu.RLock: enough to
// read its committed batches without the lock. Owned by one Read.
type readView struct {
	bufs   *readBuffers // where reads go (nil: plain allocations)
	s      *segment     // compared under mu only (gen)
	gen    uint64       // s.gen at capture
	file   *os.File
	base   int64
	end    int64              // s.size at capture: only bytes below it are read
	index  []offsetIndexEntry // s.offsetIndex at capture (entries are never rewritten in place)
	want   int64              // bytes wanted from the first batch on (maxBytes, at least a header)
	window int64              // extra bytes read before the wanted batch (about an index gap)
}

// viewLocked captures s for a read of maxBytes. REQUIRES: mu held.
func (l *Log) viewLocked(s *segment, maxBytes int) readView {
	return readView{s: s, gen: s.gen, file: s.file, base: s.base, end: s.size, index: s.offsetIndex,
		want: max(int64(maxBytes), recordbatch.HeaderSize),
		// Index entries are at least IndexIntervalBytes apart, and at most that
		// plus one batch: twice the interval usually covers the walk.
		window: min(max(2*int64(l.mu.cfg.IndexIntervalBytes), recordbatch.HeaderSize), maxScanWindow)}
}

// segmentRead is the outcome of reading one segment, judged by the caller
// once it knows the segment did not change meanwhile.
type segmentRead struct {
	data      []byte // whole, CRC-checked batches
	found     bool   // a batch with last offset >= the wanted offset exists below end
	damage    error  // damage met at damagePos (ends data)
	damagePos int64
	err       error // an I/O failure
}

// read finds the first batch whose last offset is >= offset and reads the
// batches from it under the Read rules. Usually one pread: the window from
// the nearest index entry covers both the header walk and the data.
func (v readView) read(offset, upTo int64) segmentRead {
	pos, buf, res := v.locate(offset)
	if !res.found || res.err != nil || res.damage != nil {
		return res
	}
	n := min(v.want, v.end-pos)
	if int64(len(buf)) < n {
		if buf, res.err = v.readRange(pos, n); res.err != nil {
			return res
		}
	}
	return v.collect(pos, buf[:n], upTo)
}

// locate walks batch headers from the nearest index entry to the first
// batch whose last offset is >= offset, and returns its position with the
// bytes already read from there (possibly fewer than wanted).
func (v readView) locate(offset int64) (int64, []byte, segmentRead) {
	pos := lookupOffset(v.index, v.base, offset)
	for pos < v.end {
		if v.end-pos < recordbatch.HeaderSize {
			return pos, nil, segmentRead{damage: fmt.Errorf("%w: torn header at position %d", ErrCorruptBatch, pos), damagePos: pos}
		}
		buf, err := v.readRange(pos, min(v.window+v.want, v.end-pos))
		if err != nil {
			return pos, nil, segmentRead{err: err}
		}
		for len(buf) >= recordbatch.HeaderSize {
			h, err := recordbatch.PeekHeader(buf)
			if err != nil {
				return pos, nil, segmentRead{damage: err, damagePos: pos}
			}
			if h.LastOffset() >= offset {
				return pos, buf, segmentRead{found: true}
			}
			pos += int64(h.Size())
			buf = buf[min(h.Size(), len(buf)):]
		}
	}
	return pos, nil, segmentRead{}
}

// collect keeps the whole, valid batches of buf (read at pos) below upTo; a
// first batch larger than buf is read whole (KIP-74).
func (v readView) collect(pos int64, buf []byte, upTo int64) segmentRead {
	var res segmentRead
	off := 0
	for off+recordbatch.HeaderSize <= len(buf) {
		// Validate before trusting any header field (lastOffsetDelta included).
		h, err := recordbatch.PeekHeader(buf[off:])
		if err == nil && off+h.Size() > len(buf) {
			if off > 0 {
				break
			}
			if buf, res.err = v.readRange(pos, min(int64(h.Size()), v.end-pos)); res.err != nil {
				return res
			}
		}
		if err == nil {
			_, err = recordbatch.CheckStored(buf[off:])
		}
		if err != nil {
			res.damage, res.damagePos = err, pos+int64(off)
			break
		}
		if h.LastOffset() >= upTo {
			break
		}
		off += h.Size()
	}
	res.data, res.found = buf[:off], true
	return res
}

// readRange reads n bytes at pos; pos+n <= v.end.
func (v readView) readRange(pos, n int64) ([]byte, error) {
	buf := v.bufs.alloc(n)
	if _, err := v.file.ReadAt(buf, pos); err != nil {
		return nil, fmt.Errorf("hotlog: read segment %d at %d: %w", v.base, pos, err)
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
