package hotlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Byte positions inside a RecordBatch v2. Part of the on-disk format; never change.
const (
	batchOffsetBaseOffset      = 0
	batchOffsetLength          = 8
	batchOffsetLeaderEpoch     = 12
	batchOffsetMagic           = 16
	batchOffsetCRC             = 17
	batchOffsetAttributes      = 21 // first byte covered by the CRC
	batchOffsetLastOffsetDelta = 23
	batchOffsetFirstTimestamp  = 27
	batchOffsetMaxTimestamp    = 35
	batchOffsetProducerID      = 43
	batchOffsetProducerEpoch   = 51
	batchOffsetBaseSequence    = 53
	batchOffsetRecordCount     = 57

	// batchLengthPrefix is the part of a batch not counted in batchLength.
	batchLengthPrefix = 12
	// minBatchLength is the smallest legal batchLength (a batch with no records).
	minBatchLength = BatchHeaderSize - batchLengthPrefix
	// maxBatchLength keeps position arithmetic inside int32 as Kafka does.
	maxBatchLength = math.MaxInt32 - batchLengthPrefix
)

// Attribute bits. Part of the on-disk format; never change.
const (
	attrCodecMask     = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// Compression codecs (attributes bits 0-2). Part of the on-disk format; never change.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// castagnoli is the CRC-32C table; read-only after package init.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Codec returns the compression codec of the batch (attributes bits 0-2).
func (h BatchHeader) Codec() int { return int(h.Attributes & attrCodecMask) }

// LogAppendTime reports whether the batch's timestamps are broker-assigned.
func (h BatchHeader) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// Transactional reports whether the batch belongs to a transaction.
func (h BatchHeader) Transactional() bool { return h.Attributes&attrTransactional != 0 }

// Control reports whether the batch holds control records (transaction markers).
func (h BatchHeader) Control() bool { return h.Attributes&attrControl != 0 }

// LastOffset is the offset of the batch's last record.
func (h BatchHeader) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size is the batch's total size in bytes.
func (h BatchHeader) Size() int { return batchLengthPrefix + int(h.BatchLength) }

// ParseBatchHeader decodes the header of the batch at the start of b without
// checking the CRC. It fails with ErrCorruptBatch if b is shorter than the
// header or than the batch length says, or the length is out of bounds.
func ParseBatchHeader(b []byte) (BatchHeader, error) {
	h, err := parseHeaderOnly(b)
	if err != nil {
		return h, err
	}
	if len(b) < h.Size() {
		return h, fmt.Errorf("%w: batch length %d but only %d bytes", ErrCorruptBatch, h.BatchLength, len(b)-batchLengthPrefix)
	}
	return h, nil
}

// parseHeaderOnly decodes the 61-byte header and checks the length field's
// bounds, but not that the whole batch is in b (header scans read only headers).
func parseHeaderOnly(b []byte) (BatchHeader, error) {
	var h BatchHeader
	if len(b) < BatchHeaderSize {
		return h, fmt.Errorf("%w: %d bytes, header needs %d", ErrCorruptBatch, len(b), BatchHeaderSize)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b[batchOffsetBaseOffset:]))
	h.BatchLength = int32(be.Uint32(b[batchOffsetLength:]))
	h.PartitionLeaderEpoch = int32(be.Uint32(b[batchOffsetLeaderEpoch:]))
	h.Magic = int8(b[batchOffsetMagic])
	h.CRC = be.Uint32(b[batchOffsetCRC:])
	h.Attributes = int16(be.Uint16(b[batchOffsetAttributes:]))
	h.LastOffsetDelta = int32(be.Uint32(b[batchOffsetLastOffsetDelta:]))
	h.FirstTimestamp = int64(be.Uint64(b[batchOffsetFirstTimestamp:]))
	h.MaxTimestamp = int64(be.Uint64(b[batchOffsetMaxTimestamp:]))
	h.ProducerID = int64(be.Uint64(b[batchOffsetProducerID:]))
	h.ProducerEpoch = int16(be.Uint16(b[batchOffsetProducerEpoch:]))
	h.BaseSequence = int32(be.Uint32(b[batchOffsetBaseSequence:]))
	h.RecordCount = int32(be.Uint32(b[batchOffsetRecordCount:]))
	if h.BatchLength < minBatchLength || h.BatchLength > maxBatchLength {
		return h, fmt.Errorf("%w: batch length %d out of bounds", ErrCorruptBatch, h.BatchLength)
	}
	return h, nil
}

// ValidateBatch checks the batch at the start of b as the produce path and
// recovery need: length in bounds, magic 2 (ErrUnsupportedMagic for 0/1),
// CRC-32C over attributes..end, record count >= 1 and == lastOffsetDelta+1.
// It returns the header and the batch's total size in bytes.
//
// Batches rewritten by compaction may legally hold fewer records than
// lastOffsetDelta+1; stored data is checked with validateStoredBatch instead.
func ValidateBatch(b []byte) (BatchHeader, int, error) {
	h, err := validateStoredBatch(b)
	if err != nil {
		return h, 0, err
	}
	if h.RecordCount < 1 {
		return h, 0, fmt.Errorf("%w: record count %d", ErrCorruptBatch, h.RecordCount)
	}
	if int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return h, 0, fmt.Errorf("%w: record count %d != lastOffsetDelta+1 (%d)", ErrCorruptBatch, h.RecordCount, int64(h.LastOffsetDelta)+1)
	}
	if h.Codec() > CodecZstd {
		return h, 0, fmt.Errorf("%w: unknown compression codec %d", ErrCorruptBatch, h.Codec())
	}
	return h, h.Size(), nil
}

// validateStoredBatch checks what every batch on disk must satisfy: framing,
// magic, CRC, lastOffsetDelta >= 0 and 0 <= recordCount <= lastOffsetDelta+1.
func validateStoredBatch(b []byte) (BatchHeader, error) {
	if len(b) > batchOffsetMagic {
		if m := int8(b[batchOffsetMagic]); m == 0 || m == 1 {
			return BatchHeader{Magic: m}, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
		}
	}
	h, err := ParseBatchHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", ErrCorruptBatch, h.Magic)
	}
	if got := crc32.Checksum(b[batchOffsetAttributes:h.Size()], castagnoli); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorruptBatch, h.CRC, got)
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: record count %d, lastOffsetDelta %d", ErrCorruptBatch, h.RecordCount, h.LastOffsetDelta)
	}
	return h, nil
}

// SetLogAppendTime marks the batch at the start of b as LogAppendTime
// (attributes bit 3), sets its maxTimestamp to ts and recomputes the CRC.
// A b too short to hold its batch is left unchanged (callers validate first).
func SetLogAppendTime(b []byte, ts int64) {
	h, err := ParseBatchHeader(b)
	if err != nil {
		return
	}
	be := binary.BigEndian
	be.PutUint16(b[batchOffsetAttributes:], uint16(h.Attributes|attrLogAppendTime))
	be.PutUint64(b[batchOffsetMaxTimestamp:], uint64(ts))
	be.PutUint32(b[batchOffsetCRC:], crc32.Checksum(b[batchOffsetAttributes:h.Size()], castagnoli))
}

// setBaseOffsetAndEpoch rewrites the two fields the CRC does not cover.
func setBaseOffsetAndEpoch(b []byte, baseOffset int64, epoch int32) {
	binary.BigEndian.PutUint64(b[batchOffsetBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[batchOffsetLeaderEpoch:], uint32(epoch))
}
