package recordbatch

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Header is the fixed 61-byte header of a RecordBatch v2. See doc.go for
// the byte layout.
type Header struct {
	BaseOffset           int64
	BatchLength          int32 // bytes after the length field
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32 // CRC-32C of attributes..end
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	RecordCount          int32
}

// HeaderSize is the size of the RecordBatch v2 header. Part of the format; never change.
const HeaderSize = 61

// Byte positions inside a RecordBatch v2. Part of the format; never change.
const (
	PosBaseOffset      = 0
	PosLength          = 8
	PosLeaderEpoch     = 12
	PosMagic           = 16
	PosCRC             = 17
	PosAttributes      = 21 // first byte covered by the CRC
	PosLastOffsetDelta = 23
	PosFirstTimestamp  = 27
	PosMaxTimestamp    = 35
	PosProducerID      = 43
	PosProducerEpoch   = 51
	PosBaseSequence    = 53
	PosRecordCount     = 57

	// LengthPrefix is the part of a batch not counted in batchLength.
	LengthPrefix = 12
	// MinLength is the smallest legal batchLength (a batch with no records).
	MinLength = HeaderSize - LengthPrefix
	// MaxLength keeps position arithmetic inside int32 as Kafka does.
	MaxLength = math.MaxInt32 - LengthPrefix
)

// Attribute bits. Part of the format; never change.
const (
	AttrCodecMask     = 0x07
	AttrLogAppendTime = 0x08
	AttrTransactional = 0x10
	AttrControl       = 0x20
)

// Compression codecs (attributes bits 0-2). Part of the format; never change.
const (
	CodecNone   = 0
	CodecGzip   = 1
	CodecSnappy = 2
	CodecLZ4    = 3
	CodecZstd   = 4
)

// Codec returns the compression codec of the batch (attributes bits 0-2).
func (h Header) Codec() int { return int(h.Attributes & AttrCodecMask) }

// LogAppendTime reports whether the batch's timestamps are broker-assigned.
func (h Header) LogAppendTime() bool { return h.Attributes&AttrLogAppendTime != 0 }

// Transactional reports whether the batch belongs to a transaction.
func (h Header) Transactional() bool { return h.Attributes&AttrTransactional != 0 }

// Control reports whether the batch holds control records (transaction markers).
func (h Header) Control() bool { return h.Attributes&AttrControl != 0 }

// LastOffset is the offset of the batch's last record.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size is the batch's total size in bytes.
func (h Header) Size() int { return LengthPrefix + int(h.BatchLength) }

// ParseHeader decodes the header of the batch at the start of b without
// checking the CRC. It fails with ErrCorrupt if b is shorter than the
// header or than the batch length says, or the length is out of bounds.
func ParseHeader(b []byte) (Header, error) {
	h, err := PeekHeader(b)
	if err != nil {
		return h, err
	}
	if len(b) < h.Size() {
		return h, fmt.Errorf("%w: batch length %d but only %d bytes", ErrCorrupt, h.BatchLength, len(b)-LengthPrefix)
	}
	return h, nil
}

// PeekHeader decodes the 61-byte header and checks the length field's
// bounds, but not that the whole batch is in b (header scans read only headers).
func PeekHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, fmt.Errorf("%w: %d bytes, header needs %d", ErrCorrupt, len(b), HeaderSize)
	}
	be := binary.BigEndian
	h.BaseOffset = int64(be.Uint64(b[PosBaseOffset:]))
	h.BatchLength = int32(be.Uint32(b[PosLength:]))
	h.PartitionLeaderEpoch = int32(be.Uint32(b[PosLeaderEpoch:]))
	h.Magic = int8(b[PosMagic])
	h.CRC = be.Uint32(b[PosCRC:])
	h.Attributes = int16(be.Uint16(b[PosAttributes:]))
	h.LastOffsetDelta = int32(be.Uint32(b[PosLastOffsetDelta:]))
	h.FirstTimestamp = int64(be.Uint64(b[PosFirstTimestamp:]))
	h.MaxTimestamp = int64(be.Uint64(b[PosMaxTimestamp:]))
	h.ProducerID = int64(be.Uint64(b[PosProducerID:]))
	h.ProducerEpoch = int16(be.Uint16(b[PosProducerEpoch:]))
	h.BaseSequence = int32(be.Uint32(b[PosBaseSequence:]))
	h.RecordCount = int32(be.Uint32(b[PosRecordCount:]))
	if h.BatchLength < MinLength || h.BatchLength > MaxLength {
		return h, fmt.Errorf("%w: batch length %d out of bounds", ErrCorrupt, h.BatchLength)
	}
	return h, nil
}

// Validate checks the batch at the start of b as the produce path and
// recovery need: length in bounds, magic 2 (ErrUnsupportedMagic for 0/1),
// CRC-32C over attributes..end, record count >= 1 and == lastOffsetDelta+1,
// a known codec. It returns the header and the batch's total size in bytes.
//
// Batches rewritten by compaction may legally hold fewer records than
// lastOffsetDelta+1; stored data is checked with ValidateStored or
// CheckStored instead.
func Validate(b []byte) (Header, int, error) {
	h, err := CheckStored(b)
	if err != nil {
		return h, 0, err
	}
	if h.RecordCount < 1 {
		return h, 0, fmt.Errorf("%w: record count %d", ErrCorrupt, h.RecordCount)
	}
	if int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return h, 0, fmt.Errorf("%w: record count %d != lastOffsetDelta+1 (%d)", ErrCorrupt, h.RecordCount, int64(h.LastOffsetDelta)+1)
	}
	if h.Codec() > CodecZstd {
		return h, 0, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, h.Codec())
	}
	return h, h.Size(), nil
}

// ValidateStored checks what every batch stored in a segment or object
// must satisfy: framing and length bounds, magic 2, CRC-32C over
// attributes..end, lastOffsetDelta >= 0 and 0 <= recordCount <=
// lastOffsetDelta+1 (a compacted batch may hold fewer records than its
// offset range, even none), and a known codec. Unlike Validate it accepts
// such batches.
func ValidateStored(b []byte) (Header, error) {
	h, err := CheckStored(b)
	if err != nil {
		return h, err
	}
	if h.Codec() > CodecZstd {
		return h, fmt.Errorf("%w: unknown compression codec %d", ErrCorrupt, h.Codec())
	}
	return h, nil
}

// CheckStored is ValidateStored without the codec check: framing, magic,
// CRC, lastOffsetDelta >= 0 and 0 <= recordCount <= lastOffsetDelta+1.
// The local log's reads and recovery use it: they serve whatever the
// produce path accepted and never decompress.
func CheckStored(b []byte) (Header, error) {
	if len(b) > PosMagic {
		if m := int8(b[PosMagic]); m == 0 || m == 1 {
			return Header{Magic: m}, fmt.Errorf("%w: magic %d", ErrUnsupportedMagic, m)
		}
	}
	h, err := ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", ErrCorrupt, h.Magic)
	}
	if got := Checksum(b[PosAttributes:h.Size()]); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, h.CRC, got)
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: record count %d, lastOffsetDelta %d", ErrCorrupt, h.RecordCount, h.LastOffsetDelta)
	}
	return h, nil
}

// SetLogAppendTime marks the batch at the start of b as LogAppendTime
// (attributes bit 3), sets its maxTimestamp to ts and recomputes the CRC.
// A b too short to hold its batch is left unchanged (callers validate first).
func SetLogAppendTime(b []byte, ts int64) {
	h, err := ParseHeader(b)
	if err != nil {
		return
	}
	be := binary.BigEndian
	be.PutUint16(b[PosAttributes:], uint16(h.Attributes|AttrLogAppendTime))
	be.PutUint64(b[PosMaxTimestamp:], uint64(ts))
	be.PutUint32(b[PosCRC:], Checksum(b[PosAttributes:h.Size()]))
}

// SetBaseOffsetAndEpoch rewrites the two fields the CRC does not cover,
// so the log can assign offsets and stamp its epoch without re-checksumming.
// REQUIRES: len(b) >= HeaderSize.
func SetBaseOffsetAndEpoch(b []byte, baseOffset int64, epoch int32) {
	binary.BigEndian.PutUint64(b[PosBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[PosLeaderEpoch:], uint32(epoch))
}
