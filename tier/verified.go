package tier

import (
	"context"
	"io"
)

// verifiedReader serves the batches section from some position to its end,
// reading whole CRC chunks and releasing a chunk's bytes only after its CRC
// matched. Damage anywhere in a chunk, including the batch fields the batch
// CRC does not cover, surfaces as ErrCorruptObject before any of the chunk
// is returned. Owned by one goroutine.
type verifiedReader struct {
	index *ObjectIndex
	body  io.ReadCloser
	next  int64  // index of the next chunk to fetch from body
	chunk []byte // verified bytes not yet returned
	skip  int64  // bytes of the first chunk before the requested position
	buf   []byte
}

// openVerified opens the batches section at pos through a verifiedReader.
func (r *ObjectReader) openVerified(ctx context.Context, pos int64) (*verifiedReader, error) {
	x := r.Index
	size := int64(x.Footer.ChunkSize)
	first := pos / size
	start, _ := x.ChunkRange(first)
	batchesLen := x.Footer.Sections[SectionBatches].Length
	body, err := r.store.ReadRange(ctx, r.key, start, batchesLen-start)
	if err != nil {
		return nil, err
	}
	return &verifiedReader{index: x, body: body, next: first, skip: pos - start}, nil
}

func (v *verifiedReader) Read(p []byte) (int, error) {
	for len(v.chunk) == 0 {
		if err := v.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p, v.chunk)
	v.chunk = v.chunk[n:]
	return n, nil
}

// fill reads and verifies the next chunk.
func (v *verifiedReader) fill() error {
	if v.next >= int64(len(v.index.ChunkCRCs)) {
		return io.EOF
	}
	_, length := v.index.ChunkRange(v.next)
	if int64(cap(v.buf)) < length {
		v.buf = make([]byte, length)
	}
	data := v.buf[:length]
	if _, err := io.ReadFull(v.body, data); err != nil {
		return noEOF(err)
	}
	if err := v.index.VerifyChunk(v.next, data); err != nil {
		return err
	}
	v.next++
	v.chunk = data[v.skip:]
	v.skip = 0
	return nil
}

func (v *verifiedReader) Close() error { return v.body.Close() }
