package recordbatch

// The codecs: compress a record set with a batch's codec (Compressor), and
// decompress a batch's records with reused decoders (Decompressor), the one
// decompression path of the module.

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
				return nil, fmt.Errorf("recordbatch: zstd encoder: %w", err)
			}
			c.zstd = enc
		}
		return c.zstd.EncodeAll(raw, dst), nil
	case CodecGzip, CodecLZ4:
		return c.compressStream(dst, codec, raw)
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
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
		return nil, fmt.Errorf("recordbatch: compress codec %d: %w", codec, err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("recordbatch: compress codec %d: %w", codec, err)
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

// Decompressor decodes batches' records, reusing its decoders and output
// buffer between calls (the per-batch reader setup dominates the cost for
// small batches). Records returned alias its buffer (or the batch, when
// uncompressed) and are valid until the next call. Not safe for concurrent
// use; the zero value is ready. Close releases the zstd decoder.
type Decompressor struct {
	buf       []byte
	gzip      *kgzip.Reader
	lz4       *lz4.Reader
	zstd      *zstd.Decoder
	zstdLimit int // the limit d.zstd's window bound was derived from
}

// DecodeRecords decompresses (per the batch's codec) and parses the records
// of the whole batch at the start of batch. The decompressed record bytes may
// not exceed maxDecompressed (ErrDecompressedTooLarge). Malformed data gives
// ErrCorrupt; the CRC is not checked here (callers validate first).
func (d *Decompressor) DecodeRecords(batch []byte, maxDecompressed int) ([]kmsg.Record, error) {
	h, err := ParseHeader(batch)
	if err != nil {
		return nil, err
	}
	raw, err := d.decompress(h.Codec(), batch[HeaderSize:h.Size()], max(maxDecompressed, 0))
	if err != nil {
		return nil, err
	}
	return parseRecords(raw, h.RecordCount)
}

func (d *Decompressor) decompress(codec int, src []byte, limit int) ([]byte, error) {
	switch codec {
	case CodecNone:
		if len(src) > limit {
			return nil, fmt.Errorf("%w: %d bytes > %d", ErrDecompressedTooLarge, len(src), limit)
		}
		return src, nil
	case CodecSnappy:
		return unsnappy(src, limit) // snappy blocks need no reader
	case CodecZstd:
		return d.unzstd(src, limit)
	}
	r, err := d.stream(codec, src, limit)
	if err != nil {
		return nil, err
	}
	return d.readAll(r, limit)
}

// stream returns a reader of the decompressed src, reusing d's decoders
// (valid until d's next use). Snappy and uncompressed data come from memory;
// the caller bounds how much it reads.
func (d *Decompressor) stream(codec int, src []byte, limit int) (io.Reader, error) {
	switch codec {
	case CodecGzip:
		if d.gzip == nil {
			d.gzip = new(kgzip.Reader)
		}
		if err := d.gzip.Reset(bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
		}
		return d.gzip, nil
	case CodecLZ4:
		if d.lz4 == nil {
			d.lz4 = lz4.NewReader(nil)
		}
		d.lz4.Reset(bytes.NewReader(src))
		return d.lz4, nil
	case CodecZstd:
		if err := d.resetZstd(src, limit); err != nil {
			return nil, err
		}
		return zstdReader{d.zstd}, nil
	case CodecNone:
		return bytes.NewReader(src), nil
	case CodecSnappy:
		raw, err := unsnappy(src, limit)
		if err != nil {
			return nil, err
		}
		return bytes.NewReader(raw), nil
	}
	return nil, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, codec)
}

// zstdReader reports a frame whose window exceeds the decoder's bound (the
// limit) as past the limit: it would decode to more than the limit.
type zstdReader struct{ d *zstd.Decoder }

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return n, fmt.Errorf("%w: zstd window: %w", errPastLimit, err)
	}
	return n, err
}

// unzstd decodes with a decoder whose window bound is limit (clamped to
// zstd's range): a frame whose window exceeds it would decode to more than
// limit bytes, so it fails before allocating the window.
func (d *Decompressor) unzstd(src []byte, limit int) ([]byte, error) {
	if err := d.resetZstd(src, limit); err != nil {
		return nil, err
	}
	out, err := d.readAll(d.zstd, limit)
	// A window larger than the limit means more output than the limit.
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("%w: zstd window: %v", ErrDecompressedTooLarge, err)
	}
	return out, err
}

// resetZstd points d's zstd decoder, whose window bound is limit, at src.
func (d *Decompressor) resetZstd(src []byte, limit int) error {
	if d.zstd == nil || d.zstdLimit != limit {
		d.Close()
		window := min(max(uint64(limit), zstd.MinWindowSize), zstd.MaxWindowSize)
		dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(window))
		if err != nil {
			return fmt.Errorf("recordbatch: zstd decoder: %w", err)
		}
		d.zstd, d.zstdLimit = dec, limit
	}
	if err := d.zstd.Reset(bytes.NewReader(src)); err != nil {
		return fmt.Errorf("%w: zstd: %v", ErrCorrupt, err)
	}
	return nil
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
			return nil, fmt.Errorf("%w: decompress: %w", ErrCorrupt, err)
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
