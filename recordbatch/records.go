package recordbatch

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/snappy"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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

// DecodeRecords is Decompressor.DecodeRecords with decoders of its own, for
// callers that decode one batch now and then. Returned records may alias
// batch (uncompressed batches are not copied).
func DecodeRecords(batch []byte, maxDecompressed int) ([]kmsg.Record, error) {
	var d Decompressor
	defer d.Close()
	return d.DecodeRecords(batch, maxDecompressed)
}

// EachRecord calls fn with each record of an uncompressed records section,
// in order, stopping at fn's first error, which it returns. Each record's
// length is bounded by the bytes left; a malformed record gives ErrCorrupt.
// Records alias section. Unlike DecodeRecords it does not hold the section
// to a record count: readers of their own logs take what is there.
func EachRecord(section []byte, fn func(r *kmsg.Record) error) error {
	for len(section) > 0 {
		length, n := binary.Varint(section)
		if n <= 0 || length < 0 || length > int64(len(section)-n) {
			return fmt.Errorf("%w: record length", ErrCorrupt)
		}
		var rec kmsg.Record
		end := n + int(length)
		if err := rec.ReadFrom(section[:end]); err != nil {
			return fmt.Errorf("%w: record: %v", ErrCorrupt, err)
		}
		section = section[end:]
		if err := fn(&rec); err != nil {
			return err
		}
	}
	return nil
}

// unsnappy handles both a raw snappy block (franz-go, librdkafka) and xerial
// framing (the Java client).
func unsnappy(src []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(src, xerialMagic) {
		return appendSnappyBlock(nil, src, limit)
	}
	if len(src) < xerialHeaderSize {
		return nil, fmt.Errorf("%w: short xerial snappy header", ErrCorrupt)
	}
	var out []byte
	rest := src[xerialHeaderSize:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: torn xerial snappy chunk", ErrCorrupt)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: xerial snappy chunk of %d bytes, %d left", ErrCorrupt, n, len(rest))
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
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	if n < 0 || n > limit-len(out) {
		return nil, fmt.Errorf("%w: snappy block of %d bytes", ErrDecompressedTooLarge, n)
	}
	dst := make([]byte, n)
	dec, err := snappy.Decode(dst, block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrCorrupt, err)
	}
	return append(out, dec...), nil
}

// parseRecords parses exactly count records filling raw. Each record's
// length is bounded by the bytes left, and count by len(raw)/minRecordSize,
// before anything is allocated.
func parseRecords(raw []byte, count int32) ([]kmsg.Record, error) {
	if count < 0 || int64(count) > int64(len(raw)/minRecordSize) {
		return nil, fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrCorrupt, count, len(raw))
	}
	records := make([]kmsg.Record, count)
	for i := range records {
		length, n := binary.Varint(raw)
		if n <= 0 || length < 0 || length > int64(len(raw)-n) {
			return nil, fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		end := n + int(length)
		if err := records[i].ReadFrom(raw[:end]); err != nil {
			return nil, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, err)
		}
		raw = raw[end:]
	}
	if len(raw) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left after %d records", ErrCorrupt, len(raw), count)
	}
	return records, nil
}
