package hotlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrDecompressedTooLarge means a batch's records decompress to more than the
// caller's bound (a zip bomb or simply a batch larger than allowed).
var ErrDecompressedTooLarge = errors.New("hotlog: decompressed records exceed limit")

// xerialMagic starts snappy data framed by the Java client's xerial
// SnappyOutputStream: magic, then version and compatible-version int32s, then
// chunks of [int32 length][raw snappy block]. Part of the wire format; never change.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	// minRecordSize is the smallest encoding of a record: length, attributes,
	// timestamp delta, offset delta, key and value lengths, header count.
	minRecordSize = 7
)

// DecodeRecords decompresses (per the batch's codec) and parses the records of
// the whole batch at the start of batch. The decompressed record bytes may not
// exceed maxDecompressed (ErrDecompressedTooLarge). Malformed data gives
// ErrCorruptBatch; the CRC is not checked here (callers validate first).
// Returned records may alias batch (uncompressed batches are not copied).
func DecodeRecords(batch []byte, maxDecompressed int) ([]kmsg.Record, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return nil, err
	}
	raw, err := decompress(h.Codec(), batch[BatchHeaderSize:h.Size()], maxDecompressed)
	if err != nil {
		return nil, err
	}
	return parseRecords(raw, h.RecordCount)
}

// decompress returns the uncompressed record bytes, at most limit of them.
func decompress(codec int, src []byte, limit int) ([]byte, error) {
	if limit < 0 {
		limit = 0
	}
	switch codec {
	case CodecNone:
		if len(src) > limit {
			return nil, fmt.Errorf("%w: %d bytes > %d", ErrDecompressedTooLarge, len(src), limit)
		}
		return src, nil
	case CodecGzip:
		return gunzip(src, limit)
	case CodecSnappy:
		return unsnappy(src, limit)
	case CodecLZ4:
		return readBounded(lz4.NewReader(bytes.NewReader(src)), limit)
	case CodecZstd:
		return unzstd(src, limit)
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, codec)
}

func gunzip(src []byte, limit int) ([]byte, error) {
	r, err := kgzip.NewReader(bytes.NewReader(src))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorruptBatch, err)
	}
	defer r.Close()
	return readBounded(r, limit)
}

func unzstd(src []byte, limit int) ([]byte, error) {
	window := uint64(limit)
	if window < zstd.MinWindowSize {
		window = zstd.MinWindowSize
	}
	if window > zstd.MaxWindowSize {
		window = zstd.MaxWindowSize
	}
	d, err := zstd.NewReader(bytes.NewReader(src), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(window))
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
	}
	defer d.Close()
	out, err := readBounded(d, limit)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		// A window larger than the limit means more output than the limit.
		return nil, fmt.Errorf("%w: zstd window: %v", ErrDecompressedTooLarge, err)
	}
	return out, err
}

// readBounded reads r to the end, failing once more than limit bytes come out.
func readBounded(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %w", ErrCorruptBatch, err)
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrDecompressedTooLarge, limit)
	}
	return out, nil
}

// unsnappy handles both a raw snappy block (franz-go, librdkafka) and xerial
// framing (the Java client).
func unsnappy(src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return appendSnappyBlock(nil, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return nil, fmt.Errorf("%w: short xerial snappy header", ErrCorruptBatch)
	}
	var out []byte
	rest := src[xerialHeaderSize:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: torn xerial snappy chunk", ErrCorruptBatch)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: xerial snappy chunk of %d bytes, %d left", ErrCorruptBatch, n, len(rest))
		}
		var err error
		if out, err = appendSnappyBlock(out, rest[:n], limit); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// appendSnappyBlock decodes one raw snappy block onto out, checking the
// block's declared length against what limit still allows before allocating.
func appendSnappyBlock(out, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
	}
	if n < 0 || n > limit-len(out) {
		return nil, fmt.Errorf("%w: snappy block of %d bytes", ErrDecompressedTooLarge, n)
	}
	dst := make([]byte, n)
	dec, err := snappy.Decode(dst, block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorruptBatch, err)
	}
	return append(out, dec...), nil
}

// parseRecords parses exactly count records filling raw. Each record's
// length is bounded by the bytes left, and count by len(raw)/minRecordSize,
// before anything is allocated.
func parseRecords(raw []byte, count int32) ([]kmsg.Record, error) {
	if count < 0 || int64(count) > int64(len(raw)/minRecordSize) {
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorruptBatch, count, len(raw))
	}
	records := make([]kmsg.Record, count)
	for i := range records {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || length > int64(len(raw)-n) {
			return nil, fmt.Errorf("%w: record %d: bad length", ErrCorruptBatch, i)
		}
		end := n + int(length)
		if err := records[i].ReadFrom(raw[:end]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
		}
		raw = raw[end:]
	}
	if len(raw) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left after %d records", ErrCorruptBatch, len(raw), count)
	}
	return records, nil
}
