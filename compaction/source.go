package compaction

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier"
)

// Sentinel errors.
var (
	// ErrCorrupt means a batch failed validation (framing, CRC, record
	// encoding, offsets out of order). It wraps recordbatch.ErrCorrupt where
	// recordbatch found the problem.
	ErrCorrupt = errors.New("compaction: corrupt batch")
	// ErrBatchTooLarge means a batch's length exceeds the reader's bound.
	ErrBatchTooLarge = errors.New("compaction: batch too large")
	// ErrMapTooSmall means the offset map cannot hold the keys of even one
	// batch, so a pass cannot make progress.
	ErrMapTooSmall = errors.New("compaction: offset map too small for one batch")
	// ErrNotPlanned means Rewriter.Batch was called with neither a Plan pass
	// nor Policy.LastDataOffsets.
	ErrNotPlanned = errors.New("compaction: rewriter has no producer plan")
	// ErrBadPolicy means a Policy failed Validate.
	ErrBadPolicy = errors.New("compaction: bad policy")
)

// BatchReader frames whole batches out of a byte stream (a segment file, an
// object's data section). It checks only framing: each batch's length field
// is bounded before any allocation; contents are validated by the consumer.
type BatchReader struct {
	r        io.Reader
	maxBatch int
	buf      []byte // reused for every batch; grows up to maxBatch
}

var _ tier.BatchSource = (*BatchReader)(nil)

// NewBatchReader returns a reader of batches of at most maxBatch bytes each
// (whole batch, header included) from r.
func NewBatchReader(r io.Reader, maxBatch int) *BatchReader {
	return &BatchReader{r: r, maxBatch: maxBatch}
}

// Next returns the next whole batch. A clean end of r gives io.EOF; a batch
// cut short gives ErrCorrupt; a length over the bound ErrBatchTooLarge.
func (br *BatchReader) Next() ([]byte, error) {
	var prefix [recordbatch.LengthPrefix]byte
	n, err := io.ReadFull(br.r, prefix[:])
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, fmt.Errorf("%w: torn batch header after %d bytes: %w", ErrCorrupt, n, err)
	}
	length := int64(int32(binary.BigEndian.Uint32(prefix[8:])))
	if length < recordbatch.MinLength {
		return nil, fmt.Errorf("%w: batch length %d", ErrCorrupt, length)
	}
	size := recordbatch.LengthPrefix + length
	if size > int64(br.maxBatch) {
		return nil, fmt.Errorf("%w: %d bytes > %d", ErrBatchTooLarge, size, br.maxBatch)
	}
	if int64(cap(br.buf)) < size {
		br.buf = make([]byte, size)
	}
	b := br.buf[:size]
	copy(b, prefix[:])
	if _, err := io.ReadFull(br.r, b[recordbatch.LengthPrefix:]); err != nil {
		return nil, fmt.Errorf("%w: torn batch at offset %d: %w", ErrCorrupt, int64(binary.BigEndian.Uint64(prefix[:])), err)
	}
	return b, nil
}

// SliceSource yields the batches of a byte slice holding batches end to end
// (framing only, as BatchReader). Returned batches alias the slice.
type SliceSource struct {
	rest []byte
}

var _ tier.BatchSource = (*SliceSource)(nil)

// NewSliceSource returns a source over the batches in b.
func NewSliceSource(b []byte) *SliceSource { return &SliceSource{rest: b} }

// Next returns the next batch, io.EOF at the end, ErrCorrupt on bad framing.
func (s *SliceSource) Next() ([]byte, error) {
	if len(s.rest) == 0 {
		return nil, io.EOF
	}
	h, err := recordbatch.ParseHeader(s.rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	b := s.rest[:h.Size()]
	s.rest = s.rest[h.Size():]
	return b, nil
}
