package tier

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Footer layout. Part of the in-bucket format; never change.
const (
	// FooterSize is the size of the footer, the last bytes of every object.
	FooterSize = 512
	// FooterVersion is the only version written and read so far.
	FooterVersion = 1
	// MaxTopicNameLen is the room for the topic name in the footer (Kafka's limit).
	MaxTopicNameLen = 249

	footerMagic            = "STRATAsg"
	footerOffVersion       = 8
	footerOffSize          = 10
	footerOffFlags         = 12
	footerOffTopicID       = 16
	footerOffPartition     = 32
	footerOffUploadEpoch   = 36
	footerOffBaseOffset    = 40
	footerOffLastOffset    = 48
	footerOffFirstTS       = 56
	footerOffMaxTS         = 64
	footerOffMaxTSOffset   = 72
	footerOffBatchCount    = 80
	footerOffChunkSize     = 84
	footerOffSections      = 88
	footerSectionEntrySize = 20
	footerOffTopicNameLen  = 228
	footerOffTopicName     = 230
	footerOffCRC           = FooterSize - 4
)

// Section identifies one section of a segment object, in object order.
// Part of the in-bucket format; never change (new sections go after the last).
type Section int

// Sections, in the order they appear in the object.
const (
	SectionBatches Section = iota
	SectionOffsetIndex
	SectionTimeIndex
	SectionLeaderEpochs
	SectionProducerSnapshot
	SectionAbortedTxns
	SectionChunkCRCs
	NumSections
)

// Index entry sizes. Part of the in-bucket format; never change.
const (
	offsetEntrySize  = 8
	timeEntrySize    = 12
	epochEntrySize   = 12
	abortedEntrySize = 32
	chunkCRCSize     = 4
)

// ChunkSize is the granularity of the chunk-CRC section: CRC-32C of every
// ChunkSize bytes of the batches section (the last chunk may be shorter).
// Cold reads fetch aligned multiples of it, so every byte served is checked,
// including the baseOffset and leader-epoch fields the batch CRC does not
// cover. Written into each footer; readers accept any power of two in
// [minChunkSize, maxChunkSize].
const ChunkSize = 1 << 20

const (
	minChunkSize = 64 << 10
	maxChunkSize = 64 << 20
)

// Decoder bounds: nothing larger is allocated from a footer's word.
const (
	// MaxIndexSectionBytes bounds each non-batch section (and their sum is
	// read in one range by OpenObject).
	MaxIndexSectionBytes = 64 << 20
	// MaxBatchesBytes bounds the batches section: offset-index positions are u32.
	MaxBatchesBytes = 1<<32 - 1
)

// crc32c is the CRC-32C every section, chunk and footer carries (the
// batch checksum's polynomial, so the module builds one table).
func crc32c(b []byte) uint32 { return recordbatch.Checksum(b) }

// SectionRef locates one section and carries its CRC-32C.
type SectionRef struct {
	Offset int64
	Length int64
	CRC    uint32
}

// Footer is the decoded footer of a segment object.
type Footer struct {
	Version            uint16
	TopicID            metadata.TopicID
	Topic              string
	Partition          int32
	UploadEpoch        int32 // leader epoch of the uploader (the <epoch> of the key)
	BaseOffset         int64
	LastOffset         int64
	FirstTimestamp     int64
	MaxTimestamp       int64
	MaxTimestampOffset int64
	BatchCount         uint32
	ChunkSize          uint32 // see ChunkSize
	Sections           [NumSections]SectionRef
}

// ObjectSize is the size of the whole object the footer describes.
func (f *Footer) ObjectSize() int64 {
	last := f.Sections[NumSections-1]
	return last.Offset + last.Length + FooterSize
}

// NumChunks is the number of CRC chunks of the batches section.
func (f *Footer) NumChunks() int64 {
	return (f.Sections[SectionBatches].Length + int64(f.ChunkSize) - 1) / int64(f.ChunkSize)
}

// MetaRange is the byte range of every section after the batches: one
// ranged read of it gives DecodeIndexSections all it needs.
func (f *Footer) MetaRange() (offset, length int64) {
	start := f.Sections[SectionOffsetIndex].Offset
	return start, f.ObjectSize() - FooterSize - start
}

// AppendFooter appends the FooterSize-byte encoding of f to dst.
// REQUIRES: f.Topic is 1..MaxTopicNameLen bytes.
func AppendFooter(dst []byte, f *Footer) []byte {
	var b [FooterSize]byte
	be := binary.BigEndian
	copy(b[:], footerMagic)
	be.PutUint16(b[footerOffVersion:], FooterVersion)
	be.PutUint16(b[footerOffSize:], FooterSize)
	copy(b[footerOffTopicID:], f.TopicID[:])
	be.PutUint32(b[footerOffPartition:], uint32(f.Partition))
	be.PutUint32(b[footerOffUploadEpoch:], uint32(f.UploadEpoch))
	be.PutUint64(b[footerOffBaseOffset:], uint64(f.BaseOffset))
	be.PutUint64(b[footerOffLastOffset:], uint64(f.LastOffset))
	be.PutUint64(b[footerOffFirstTS:], uint64(f.FirstTimestamp))
	be.PutUint64(b[footerOffMaxTS:], uint64(f.MaxTimestamp))
	be.PutUint64(b[footerOffMaxTSOffset:], uint64(f.MaxTimestampOffset))
	be.PutUint32(b[footerOffBatchCount:], f.BatchCount)
	be.PutUint32(b[footerOffChunkSize:], f.ChunkSize)
	for i, s := range f.Sections {
		at := footerOffSections + i*footerSectionEntrySize
		be.PutUint64(b[at:], uint64(s.Offset))
		be.PutUint64(b[at+8:], uint64(s.Length))
		be.PutUint32(b[at+16:], s.CRC)
	}
	be.PutUint16(b[footerOffTopicNameLen:], uint16(len(f.Topic)))
	copy(b[footerOffTopicName:footerOffTopicName+MaxTopicNameLen], f.Topic)
	be.PutUint32(b[footerOffCRC:], crc32c(b[:footerOffCRC]))
	return append(dst, b[:]...)
}

// DecodeFooter decodes and checks a footer: b must be exactly the last
// FooterSize bytes of an object. Errors wrap ErrCorruptObject.
func DecodeFooter(b []byte) (*Footer, error) {
	if len(b) != FooterSize {
		return nil, corruptf("footer is %d bytes, want %d", len(b), FooterSize)
	}
	be := binary.BigEndian
	if string(b[:len(footerMagic)]) != footerMagic {
		return nil, corruptf("bad footer magic %q", b[:len(footerMagic)])
	}
	if got, want := be.Uint32(b[footerOffCRC:]), crc32c(b[:footerOffCRC]); got != want {
		return nil, corruptf("footer crc %08x, computed %08x", got, want)
	}
	f := &Footer{Version: be.Uint16(b[footerOffVersion:])}
	if f.Version != FooterVersion || be.Uint16(b[footerOffSize:]) != FooterSize || be.Uint32(b[footerOffFlags:]) != 0 {
		return nil, corruptf("unsupported footer version %d, size %d, flags %#x",
			f.Version, be.Uint16(b[footerOffSize:]), be.Uint32(b[footerOffFlags:]))
	}
	copy(f.TopicID[:], b[footerOffTopicID:])
	f.Partition = int32(be.Uint32(b[footerOffPartition:]))
	f.UploadEpoch = int32(be.Uint32(b[footerOffUploadEpoch:]))
	f.BaseOffset = int64(be.Uint64(b[footerOffBaseOffset:]))
	f.LastOffset = int64(be.Uint64(b[footerOffLastOffset:]))
	f.FirstTimestamp = int64(be.Uint64(b[footerOffFirstTS:]))
	f.MaxTimestamp = int64(be.Uint64(b[footerOffMaxTS:]))
	f.MaxTimestampOffset = int64(be.Uint64(b[footerOffMaxTSOffset:]))
	f.BatchCount = be.Uint32(b[footerOffBatchCount:])
	f.ChunkSize = be.Uint32(b[footerOffChunkSize:])
	for i := range f.Sections {
		at := footerOffSections + i*footerSectionEntrySize
		f.Sections[i] = SectionRef{
			Offset: int64(be.Uint64(b[at:])),
			Length: int64(be.Uint64(b[at+8:])),
			CRC:    be.Uint32(b[at+16:]),
		}
	}
	nameLen := int(be.Uint16(b[footerOffTopicNameLen:]))
	if nameLen < 1 || nameLen > MaxTopicNameLen {
		return nil, corruptf("topic name length %d", nameLen)
	}
	f.Topic = string(b[footerOffTopicName : footerOffTopicName+nameLen])
	if err := f.check(); err != nil {
		return nil, err
	}
	return f, nil
}

// check validates the decoded fields against each other.
func (f *Footer) check() error {
	if err := metadata.ValidateTopicName(f.Topic); err != nil {
		return corruptf("topic name: %v", err)
	}
	if f.Partition < 0 || f.BaseOffset < 0 || f.LastOffset < f.BaseOffset || f.BatchCount == 0 {
		return corruptf("partition %d, offsets [%d, %d], %d batches", f.Partition, f.BaseOffset, f.LastOffset, f.BatchCount)
	}
	if f.LastOffset-f.BaseOffset > 1<<32-1 {
		return corruptf("offset span [%d, %d] does not fit relative u32 offsets", f.BaseOffset, f.LastOffset)
	}
	if f.ChunkSize < minChunkSize || f.ChunkSize > maxChunkSize || f.ChunkSize&(f.ChunkSize-1) != 0 {
		return corruptf("chunk size %d", f.ChunkSize)
	}
	if f.MaxTimestampOffset < f.BaseOffset || f.MaxTimestampOffset > f.LastOffset {
		return corruptf("max timestamp offset %d outside [%d, %d]", f.MaxTimestampOffset, f.BaseOffset, f.LastOffset)
	}
	return f.checkSections()
}

// checkSections: contiguous from 0, bounded lengths, sizes multiple of entries.
func (f *Footer) checkSections() error {
	entrySizes := [NumSections]int64{0, offsetEntrySize, timeEntrySize, epochEntrySize, 0, abortedEntrySize, chunkCRCSize}
	var next int64
	for i, s := range f.Sections {
		limit := int64(MaxIndexSectionBytes)
		if Section(i) == SectionBatches {
			limit = MaxBatchesBytes
		}
		if s.Offset != next || s.Length < 0 || s.Length > limit {
			return corruptf("section %d at %d length %d (expected at %d, at most %d)", i, s.Offset, s.Length, next, limit)
		}
		if entrySizes[i] != 0 && s.Length%entrySizes[i] != 0 {
			return corruptf("section %d length %d not a multiple of %d", i, s.Length, entrySizes[i])
		}
		if s.Length == 0 && s.CRC != 0 {
			return corruptf("empty section %d with crc %08x", i, s.CRC)
		}
		next += s.Length
	}
	if off, n := f.MetaRange(); n > MaxIndexSectionBytes || off < 0 {
		return corruptf("index sections total %d bytes", n)
	}
	if f.Sections[SectionBatches].Length < 61 || f.Sections[SectionOffsetIndex].Length == 0 ||
		f.Sections[SectionTimeIndex].Length == 0 || f.Sections[SectionLeaderEpochs].Length == 0 {
		return corruptf("missing batches, offset index, time index or leader epochs")
	}
	if chunks := f.NumChunks(); f.Sections[SectionChunkCRCs].Length != chunks*chunkCRCSize {
		return corruptf("chunk CRC section of %d bytes for %d chunks", f.Sections[SectionChunkCRCs].Length, chunks)
	}
	return nil
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorruptObject, fmt.Sprintf(format, args...))
}
