package hotlog

// Helpers for rewriting stored batches (compaction): validate a stored batch,
// compress a record set with a batch's codec, and rebuild a batch around new
// records. Owned by the compaction work (issue 7); kept apart from batch.go so
// the produce path's helpers stay small.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ValidateStoredBatch checks what every batch stored in a segment or object
// must satisfy: framing and length bounds, magic 2, CRC-32C over
// attributes..end, lastOffsetDelta >= 0 and 0 <= recordCount <=
// lastOffsetDelta+1 (a compacted batch may hold fewer records than its
// offset range, even none). Unlike ValidateBatch it accepts such batches.
func ValidateStoredBatch(b []byte) (BatchHeader, error) {
	h, err := validateStoredBatch(b)
	if err != nil {
		return h, err
	}
	if h.Codec() > CodecZstd {
		return h, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, h.Codec())
	}
	return h, nil
}

// EncodeBatch appends to dst a RecordBatch v2 with header h and the given
// record section (already compressed with h's codec), holding recordCount
// records. Every header field of h is kept except BatchLength, CRC and
// RecordCount, which are computed; Magic is always 2.
func EncodeBatch(dst []byte, h BatchHeader, recordCount int32, records []byte) []byte {
	b := kmsg.RecordBatch{
		FirstOffset:          h.BaseOffset,
		Length:               int32(minBatchLength + len(records)),
		PartitionLeaderEpoch: h.PartitionLeaderEpoch,
		Magic:                2,
		Attributes:           h.Attributes,
		LastOffsetDelta:      h.LastOffsetDelta,
		FirstTimestamp:       h.FirstTimestamp,
		MaxTimestamp:         h.MaxTimestamp,
		ProducerID:           h.ProducerID,
		ProducerEpoch:        h.ProducerEpoch,
		FirstSequence:        h.BaseSequence,
		NumRecords:           recordCount,
		Records:              records,
	}
	start := len(dst)
	dst = b.AppendTo(dst)
	out := dst[start:]
	binary.BigEndian.PutUint32(out[batchOffsetCRC:], crc32.Checksum(out[batchOffsetAttributes:], castagnoli))
	return dst
}

// CompressRecords compresses raw (an encoded record set) with codec, as a
// producer would: gzip, a raw snappy block (as franz-go and librdkafka write;
// every client also reads it), an LZ4 frame, or a zstd frame. An empty raw
// still gives a valid (empty) frame, so readers that decompress before looking
// at the record count succeed. For many calls, use a Compressor.
func CompressRecords(codec int, raw []byte) ([]byte, error) {
	var c Compressor
	defer c.Close()
	return c.Compress(nil, codec, raw)
}

// Compressor compresses record sets, reusing its encoders between calls.
// Not safe for concurrent use; the zero value is ready. Close releases the
// zstd encoder's goroutines.
type Compressor struct {
	buf  bytes.Buffer
	gzip *kgzip.Writer
	lz4  *lz4.Writer
	zstd *zstd.Encoder
}

// Compress appends raw compressed with codec to dst.
func (c *Compressor) Compress(dst []byte, codec int, raw []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return append(dst, raw...), nil
	case CodecSnappy:
		return append(dst, snappy.Encode(nil, raw)...), nil
	case CodecZstd:
		if c.zstd == nil {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
			if err != nil {
				return nil, fmt.Errorf("hotlog: zstd encoder: %w", err)
			}
			c.zstd = enc
		}
		return c.zstd.EncodeAll(raw, dst), nil
	case CodecGzip, CodecLZ4:
		return c.compressStream(dst, codec, raw)
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, codec)
}

// compressStream runs raw through the reusable gzip or LZ4 stream writer.
func (c *Compressor) compressStream(dst []byte, codec int, raw []byte) ([]byte, error) {
	c.buf.Reset()
	var w interface {
		Write([]byte) (int, error)
		Close() error
	}
	if codec == CodecGzip {
		if c.gzip == nil {
			c.gzip = kgzip.NewWriter(&c.buf)
		} else {
			c.gzip.Reset(&c.buf)
		}
		w = c.gzip
	} else {
		if c.lz4 == nil {
			c.lz4 = lz4.NewWriter(&c.buf)
		} else {
			c.lz4.Reset(&c.buf)
		}
		w = c.lz4
	}
	if _, err := w.Write(raw); err != nil {
		return nil, fmt.Errorf("hotlog: compress codec %d: %w", codec, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("hotlog: compress codec %d: %w", codec, err)
	}
	return append(dst, c.buf.Bytes()...), nil
}

// Close releases the encoders. The Compressor may be used again afterwards.
func (c *Compressor) Close() {
	if c.zstd != nil {
		_ = c.zstd.Close()
		c.zstd = nil
	}
}

// Decompressor decodes batches' records like DecodeRecords, with the same
// bounds and errors, but reuses its decoders and output buffer between calls
// (the per-batch reader setup dominates the cost for small batches). Records
// returned alias its buffer and are valid until the next call. Not safe for
// concurrent use; the zero value is ready. Close releases the zstd decoder.
type Decompressor struct {
	buf       []byte
	gzip      *kgzip.Reader
	lz4       *lz4.Reader
	zstd      *zstd.Decoder
	zstdLimit int // the limit d.zstd's window bound was derived from
}

// DecodeRecords is DecodeRecords with reused decoders.
func (d *Decompressor) DecodeRecords(batch []byte, maxDecompressed int) ([]kmsg.Record, error) {
	h, err := ParseBatchHeader(batch)
	if err != nil {
		return nil, err
	}
	raw, err := d.decompress(h.Codec(), batch[BatchHeaderSize:h.Size()], max(maxDecompressed, 0))
	if err != nil {
		return nil, err
	}
	return parseRecords(raw, h.RecordCount)
}

func (d *Decompressor) decompress(codec int, src []byte, limit int) ([]byte, error) {
	switch codec {
	case CodecGzip:
		if d.gzip == nil {
			d.gzip = new(kgzip.Reader)
		}
		if err := d.gzip.Reset(bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorruptBatch, err)
		}
		return d.readAll(d.gzip, limit)
	case CodecLZ4:
		if d.lz4 == nil {
			d.lz4 = lz4.NewReader(nil)
		}
		d.lz4.Reset(bytes.NewReader(src))
		return d.readAll(d.lz4, limit)
	case CodecZstd:
		return d.unzstd(src, limit)
	}
	return decompress(codec, src, limit) // none and snappy need no reader
}

// unzstd decodes with a decoder whose window bound matches limit, as unzstd does.
func (d *Decompressor) unzstd(src []byte, limit int) ([]byte, error) {
	if d.zstd == nil || d.zstdLimit != limit {
		d.Close()
		window := min(max(uint64(limit), zstd.MinWindowSize), zstd.MaxWindowSize)
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(window))
		if err != nil {
			return nil, fmt.Errorf("hotlog: zstd decoder: %w", err)
		}
		d.zstd, d.zstdLimit = dec, limit
	}
	if err := d.zstd.Reset(bytes.NewReader(src)); err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrCorruptBatch, err)
	}
	out, err := d.readAll(d.zstd, limit)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("%w: zstd window: %v", ErrDecompressedTooLarge, err)
	}
	return out, err
}

// readAll reads r to the end into d.buf, failing once more than limit bytes
// come out; d.buf grows as needed, never beyond limit+1 bytes of data.
func (d *Decompressor) readAll(r io.Reader, limit int) ([]byte, error) {
	buf := d.buf[:0]
	lr := io.LimitedReader{R: r, N: int64(limit) + 1}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.buf = buf
			return nil, fmt.Errorf("%w: decompress: %w", ErrCorruptBatch, err)
		}
	}
	d.buf = buf
	if len(buf) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrDecompressedTooLarge, limit)
	}
	return buf, nil
}

// Close releases the zstd decoder. The Decompressor may be used again.
func (d *Decompressor) Close() {
	if d.zstd != nil {
		d.zstd.Close()
		d.zstd = nil
	}
}
