package tier

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// TailReadSize is how much of an object's end OpenObject reads first: the
// footer plus, for all but very large segments, every index section.
const TailReadSize = 256 << 10

// maxDecodeBytes bounds one batch's decompressed size in timestamp look-ups.
const maxDecodeBytes = 256 << 20

// ObjectReader reads one segment object through ranged GETs, with its
// index decoded once. It holds no mutable state and is safe for concurrent
// use. It does no caching of batches: the cold reader (its own package
// later) keeps chunks; restore, replay and tests use ReadBatches directly.
type ObjectReader struct {
	store ObjectStore
	key   string
	Index *ObjectIndex
}

// OpenObject reads and checks the footer and index sections of key. size
// is the object's size if known (from the manifest), or < 0 to Stat it.
// A damaged object gives ErrCorruptObject.
func OpenObject(ctx context.Context, store ObjectStore, key string, size int64) (*ObjectReader, error) {
	if size < 0 {
		info, err := store.Stat(ctx, key)
		if err != nil {
			return nil, err
		}
		size = info.Size
	}
	if size < FooterSize {
		return nil, corruptf("%s: %d bytes, smaller than a footer", key, size)
	}
	tailLen := min(size, TailReadSize)
	tail, err := objstore.ReadAll(ctx, store, key, size-tailLen, tailLen)
	if err != nil {
		return nil, err
	}
	f, err := DecodeFooter(tail[len(tail)-FooterSize:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if f.ObjectSize() != size {
		return nil, corruptf("%s: footer describes %d bytes, object has %d", key, f.ObjectSize(), size)
	}
	metaOff, metaLen := f.MetaRange()
	var meta []byte
	if tailStart := size - tailLen; metaOff >= tailStart {
		meta = tail[metaOff-tailStart : metaOff-tailStart+metaLen]
	} else if meta, err = objstore.ReadAll(ctx, store, key, metaOff, metaLen); err != nil {
		return nil, err
	}
	x, err := DecodeIndexSections(f, meta)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &ObjectReader{store: store, key: key, Index: x}, nil
}

// Key is the object's key.
func (r *ObjectReader) Key() string { return r.key }

// ReadBatches returns whole batches starting with the one holding offset (or
// the first after it, where compaction left a gap), up to maxBytes; the
// first batch is returned whole even if larger, as Kafka's Fetch does. Every
// returned batch passed its CRC check; a bad one is ErrCorruptObject.
func (r *ObjectReader) ReadBatches(ctx context.Context, offset int64, maxBytes int) ([]byte, error) {
	start, _, err := r.Index.OffsetSpan(offset)
	if err != nil {
		return nil, err
	}
	batchesLen := r.Index.Footer.Sections[SectionBatches].Length
	rc, err := r.openVerified(ctx, start)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	var out []byte
	pos := start
	for pos < batchesLen {
		batch, h, err := readObjectBatch(br, batchesLen-pos)
		if err != nil {
			return nil, fmt.Errorf("%s at %d: %w", r.key, pos, err)
		}
		pos += int64(len(batch))
		if h.LastOffset() < offset {
			continue
		}
		if len(out) > 0 && len(out)+len(batch) > maxBytes {
			break
		}
		out = append(out, batch...)
	}
	return out, nil
}

// readObjectBatch reads one batch of at most remaining bytes and checks it.
// Damage is ErrCorruptObject; read failures pass through (transient ones
// may be retried by the caller).
func readObjectBatch(br *bufio.Reader, remaining int64) ([]byte, recordbatch.Header, error) {
	prefix, err := br.Peek(recordbatch.LengthPrefix)
	if err != nil {
		return nil, recordbatch.Header{}, noEOF(err)
	}
	length := int64(int32(uint32(prefix[8])<<24 | uint32(prefix[9])<<16 | uint32(prefix[10])<<8 | uint32(prefix[11])))
	if length < recordbatch.MinLength || length > remaining-recordbatch.LengthPrefix {
		return nil, recordbatch.Header{}, corruptf("batch length %d with %d bytes left", length, remaining)
	}
	batch := make([]byte, length+recordbatch.LengthPrefix)
	if _, err := io.ReadFull(br, batch); err != nil {
		return nil, recordbatch.Header{}, noEOF(err)
	}
	h, err := CheckStoredBatch(batch)
	if err != nil {
		return nil, h, fmt.Errorf("%w: %v", ErrCorruptObject, err)
	}
	return batch, h, nil
}

// OffsetTime is an (offset, timestamp) answer of a timestamp look-up.
type OffsetTime = hotlog.OffsetTime

// OffsetForTimestamp finds the first record with timestamp >= ts at or
// after offset from (the log start offset). ok is false if the object has none.
// LogAppendTime batches count every record at the batch's maxTimestamp.
func (r *ObjectReader) OffsetForTimestamp(ctx context.Context, ts, from int64) (OffsetTime, bool, error) {
	start, ok := r.Index.TimestampStart(ts)
	if !ok || from > r.Index.Footer.LastOffset {
		return OffsetTime{}, false, nil
	}
	if from > r.Index.Footer.BaseOffset {
		fromStart, _, err := r.Index.OffsetSpan(from)
		if err != nil {
			return OffsetTime{}, false, err
		}
		start = max(start, fromStart)
	}
	return r.scanForTimestamp(ctx, start, ts, from)
}

func (r *ObjectReader) scanForTimestamp(ctx context.Context, start, ts, from int64) (OffsetTime, bool, error) {
	batchesLen := r.Index.Footer.Sections[SectionBatches].Length
	rc, err := r.openVerified(ctx, start)
	if err != nil {
		return OffsetTime{}, false, err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, 64<<10)
	for pos := start; pos < batchesLen; {
		batch, h, err := readObjectBatch(br, batchesLen-pos)
		if err != nil {
			return OffsetTime{}, false, fmt.Errorf("%s at %d: %w", r.key, pos, err)
		}
		pos += int64(len(batch))
		if h.LastOffset() < from || h.MaxTimestamp < ts {
			continue
		}
		res, found, err := searchBatch(batch, h, ts, from)
		if found || err != nil {
			return res, found, err
		}
	}
	return OffsetTime{}, false, nil
}

// searchBatch returns the batch's first record at or after from with timestamp >= ts.
func searchBatch(batch []byte, h recordbatch.Header, ts, from int64) (OffsetTime, bool, error) {
	if h.LogAppendTime() {
		return OffsetTime{Offset: max(h.BaseOffset, from), Timestamp: h.MaxTimestamp}, true, nil
	}
	records, err := recordbatch.DecodeRecords(batch, maxDecodeBytes)
	if err != nil {
		return OffsetTime{}, false, fmt.Errorf("%w: batch at offset %d: %v", ErrCorruptObject, h.BaseOffset, err)
	}
	for _, rec := range records {
		offset, rts := h.BaseOffset+int64(rec.OffsetDelta), h.FirstTimestamp+rec.TimestampDelta64
		if offset >= from && rts >= ts {
			return OffsetTime{Offset: offset, Timestamp: rts}, true, nil
		}
	}
	return OffsetTime{}, false, nil
}

// Verify checks an uploaded object against the footer the uploader encoded:
// size and footer must match, and with full set the batches section is read
// back and its CRC compared (one GET of the whole object). A mismatch is
// ErrCorruptObject: the uploader deletes the object and uploads again.
func Verify(ctx context.Context, store ObjectStore, key string, want *Footer, full bool) error {
	r, err := OpenObject(ctx, store, key, -1)
	if err != nil {
		return err
	}
	if *r.Index.Footer != *want {
		return corruptf("%s: footer %+v, uploaded %+v", key, *r.Index.Footer, *want)
	}
	if !full {
		return nil
	}
	batches := want.Sections[SectionBatches]
	rc, err := store.ReadRange(ctx, key, 0, batches.Length)
	if err != nil {
		return err
	}
	defer rc.Close()
	h := recordbatch.NewChecksum()
	n, err := io.Copy(h, rc)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if n != batches.Length || h.Sum32() != batches.CRC {
		return corruptf("%s: batches read back %d bytes crc %08x, want %d bytes crc %08x", key, n, h.Sum32(), batches.Length, batches.CRC)
	}
	return nil
}
