package recordbatch

// The key check of compacted topics, streamed: every record of a produced
// batch must have a key, and finding out must not cost the batch's
// decompressed size in memory (a compression bomb on a compacted topic would
// otherwise make the broker allocate up to the decompression limit, doubling
// a buffer on the way, for every such request). Records are parsed field by
// field from the decoder's output through a small buffer; keys, values and
// headers are skipped, never held.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// keyScanBuffer is the read buffer of one streamed key check.
const keyScanBuffer = 32 << 10

// keyScanners holds scanners between calls: their decoders and read buffer
// are the costly part of checking a small batch.
var keyScanners = sync.Pool{New: func() any { return new(keyScanner) }}

type keyScanner struct {
	d   Decompressor
	in  limitedReader
	buf *bufio.Reader
}

// CheckKeys reports whether every record of the batch at the start of batch
// has a key: ErrKeylessCompacted names the first that does not. The records
// may decompress to at most maxDecompressed bytes (ErrDecompressedTooLarge);
// malformed records, or a record count the records do not match, give
// ErrCorrupt. Memory stays a small buffer and the decoder's window whatever
// the batch inflates to (snappy, whose ratio is bounded, is decoded whole).
func CheckKeys(batch []byte, maxDecompressed int) error {
	h, err := ParseHeader(batch)
	if err != nil {
		return err
	}
	s := keyScanners.Get().(*keyScanner)
	defer keyScanners.Put(s)
	limit := int64(max(maxDecompressed, 0))
	src, err := s.d.stream(h.Codec(), batch[HeaderSize:h.Size()], int(limit))
	if err != nil {
		return err
	}
	s.in = limitedReader{r: src, limit: limit}
	if s.buf == nil {
		s.buf = bufio.NewReaderSize(&s.in, keyScanBuffer)
	} else {
		s.buf.Reset(&s.in)
	}
	err = scanKeys(s.buf, h.RecordCount, limit)
	s.buf.Reset(nil) // the pooled buffer keeps no reader of this batch (the decoders keep theirs until their next use)
	s.in = limitedReader{}
	if errors.Is(err, errPastLimit) {
		return fmt.Errorf("%w: more than %d bytes", ErrDecompressedTooLarge, limit)
	}
	return err
}

// errPastLimit stops a scan whose input went past the decompression limit.
var errPastLimit = errors.New("recordbatch: past the decompression limit")

// limitedReader fails once more than limit bytes came out of r.
type limitedReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.n > l.limit {
		return n, errPastLimit
	}
	return n, err
}

// scanKeys parses count records from r, checking each has a key, and that
// nothing follows the last. Counts and lengths are bounded by limit, what r
// may yield at most.
func scanKeys(r *bufio.Reader, count int32, limit int64) error {
	if count < 0 || int64(count) > limit/minRecordSize {
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, count, limit)
	}
	for i := int32(0); i < count; i++ {
		if err := scanRecord(r, i, limit); err != nil {
			return err
		}
	}
	switch _, err := r.ReadByte(); {
	case err == nil:
		return fmt.Errorf("%w: bytes left after %d records", ErrCorrupt, count)
	case err != io.EOF:
		return readErr(err)
	}
	return nil
}

// scanRecord parses record i: length, attributes, timestamp delta, offset
// delta, key, value, headers, which must fit in its length.
func scanRecord(r *bufio.Reader, i int32, limit int64) error {
	length, err := binary.ReadVarint(r)
	if err != nil {
		return readErr(err)
	}
	if length > limit {
		return fmt.Errorf("%w: record %d: length %d", errPastLimit, i, length)
	}
	if length < minRecordSize-1 {
		return fmt.Errorf("%w: record %d: length %d", ErrCorrupt, i, length)
	}
	rec := fieldReader{r: r, left: length}
	rec.skip(1)  // attributes
	rec.varint() // timestamp delta
	offsetDelta := rec.varint()
	keyLen := rec.varint()
	if rec.err == nil && keyLen < 0 {
		return fmt.Errorf("%w (offset delta %d)", ErrKeylessCompacted, offsetDelta)
	}
	rec.skip(keyLen)
	rec.skip(rec.varint()) // value; -1 is null
	// As the full decoder (kmsg): a negative header count is no headers,
	// a negative header key length a null key.
	headers := rec.varint()
	if rec.err == nil && headers > rec.left/2 {
		return fmt.Errorf("%w: record %d: %d headers in %d bytes", ErrCorrupt, i, headers, rec.left)
	}
	for h := int64(0); h < headers && rec.err == nil; h++ {
		rec.skip(rec.varint()) // key
		rec.skip(rec.varint()) // value
	}
	rec.skip(rec.left) // as the full decoder, bytes after the fields are ignored
	if rec.err != nil {
		return fmt.Errorf("record %d: %w", i, rec.err)
	}
	return nil
}

// fieldReader reads the fields of one record of a known length; the first
// error (a field past the length, a short read) sticks and later reads do
// nothing.
type fieldReader struct {
	r    *bufio.Reader
	left int64 // bytes of the record not read yet
	err  error
}

// ReadByte makes fieldReader a byte source for binary.ReadVarint that
// counts against the record's length.
func (f *fieldReader) ReadByte() (byte, error) {
	if f.left <= 0 {
		return 0, fmt.Errorf("%w: a field runs past the record's length", ErrCorrupt)
	}
	c, err := f.r.ReadByte()
	if err != nil {
		return 0, readErr(err)
	}
	f.left--
	return c, nil
}

func (f *fieldReader) varint() int64 {
	if f.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(f)
	if err != nil {
		f.err = readErr(err)
	}
	return v
}

// skip discards n bytes of the record; a negative n is a null field.
func (f *fieldReader) skip(n int64) {
	if f.err != nil || n < 0 {
		return
	}
	if n > f.left {
		f.err = fmt.Errorf("%w: field of %d bytes, %d left in the record", ErrCorrupt, n, f.left)
		return
	}
	if _, err := f.r.Discard(int(n)); err != nil {
		f.err = readErr(err)
		return
	}
	f.left -= n
}

// readErr maps a read failure to what the scan reports: data ending early
// is a corrupt batch; the limit and our own errors pass through.
func readErr(err error) error {
	switch {
	case errors.Is(err, errPastLimit), errors.Is(err, ErrCorrupt):
		return err
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: records cut short", ErrCorrupt)
	}
	return fmt.Errorf("%w: decompress: %v", ErrCorrupt, err)
}
