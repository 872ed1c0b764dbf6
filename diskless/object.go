package diskless

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// Shared-object layout (see doc.go). Part of the in-bucket format; never change.
const (
	// EntrySize is the size of one footer entry.
	EntrySize = 40
	// TrailerSize is the size of the trailer, the last bytes of every shared object.
	TrailerSize = 24
	// ObjectVersion is the only format version written and read so far.
	ObjectVersion = 1

	objectMagic = "STRATAsh"

	entryOffTopicID   = 0
	entryOffPartition = 16
	entryOffPosition  = 20
	entryOffLength    = 28
	entryOffRecords   = 32
	entryOffCRC       = 36

	trailerOffCount        = 0
	trailerOffFooterLength = 4
	trailerOffVersion      = 8
	trailerOffFlags        = 10
	trailerOffCRC          = 12
	trailerOffMagic        = 16
)

// minEntryBytes is what every entry costs an object at least: the entry and
// a batch header. It bounds the entry count a trailer may claim by the
// object's size before anything is allocated.
const minEntryBytes = EntrySize + recordbatch.HeaderSize

// maxEntries keeps the footer length inside the trailer's u32.
const maxEntries = math.MaxUint32 / EntrySize

// Sentinel errors of the shared-object format.
var (
	// ErrCorrupt: an object's bytes fail a format check or a CRC, or a
	// BatchRef does not match the batch it points at. Such bytes are never
	// served.
	ErrCorrupt = errors.New("diskless: corrupt shared object")
	// ErrFooterIncomplete: the tail given to ParseFooter is too short to
	// hold the footer; the error is a *FooterIncompleteError saying how
	// many tail bytes to read.
	ErrFooterIncomplete = errors.New("diskless: tail too short for the shared-object footer")
	// ErrInvalidBatch: EncodeObject was given something that is not one
	// whole, valid RecordBatch v2 of a valid partition.
	ErrInvalidBatch = errors.New("diskless: invalid batch for a shared object")
)

// FooterIncompleteError is ParseFooter's answer to a tail shorter than the
// footer: Need is the number of tail bytes to read next. When the tail did
// not even hold the trailer, Need is TrailerSize and the next call may ask
// for more. It matches ErrFooterIncomplete under errors.Is.
type FooterIncompleteError struct {
	Need int64
}

func (e *FooterIncompleteError) Error() string {
	return fmt.Sprintf("%v: need the last %d bytes", ErrFooterIncomplete, e.Need)
}

// Unwrap makes errors.Is(err, ErrFooterIncomplete) hold.
func (e *FooterIncompleteError) Unwrap() error { return ErrFooterIncomplete }

// TopicPartition names one partition of one topic, by topic id.
type TopicPartition struct {
	TopicID   metadata.TopicID
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%v/%d", tp.TopicID, tp.Partition) }

// compareTopicPartitions orders partitions as a shared object stores them:
// by topic id bytes, then partition.
func compareTopicPartitions(a, b TopicPartition) int {
	if c := bytes.Compare(a.TopicID[:], b.TopicID[:]); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// Batch is one batch to put in a shared object.
type Batch struct {
	TopicPartition
	Bytes []byte // one whole RecordBatch v2, as produced
}

// BatchRef locates one batch inside a shared object: one footer entry.
type BatchRef struct {
	TopicPartition
	Position int64  // of the batch's first byte in the object
	Length   int32  // of the whole batch (12 + batchLength)
	Records  int32  // lastOffsetDelta + 1: the offsets the batch takes
	CRC      uint32 // the CRC field of the batch header
}

// EncodeObject lays batches out as one shared object: grouped by
// partition, partitions in (topic id, partition) order, the batches of one
// partition in the order given, then the footer and the trailer. It
// returns the object and the refs of its batches in object order (what
// ParseFooter returns for it). Each batch must be one whole batch that
// recordbatch.Validate accepts, of a partition >= 0 of a non-zero topic
// id; otherwise the error wraps ErrInvalidBatch and nothing is returned.
func EncodeObject(batches []Batch) ([]byte, []BatchRef, error) {
	if len(batches) == 0 {
		return nil, nil, fmt.Errorf("%w: no batches", ErrInvalidBatch)
	}
	if uint64(len(batches)) > maxEntries {
		return nil, nil, fmt.Errorf("%w: %d batches, at most %d", ErrInvalidBatch, len(batches), maxEntries)
	}
	ordered := slices.Clone(batches)
	slices.SortStableFunc(ordered, func(a, b Batch) int {
		return compareTopicPartitions(a.TopicPartition, b.TopicPartition)
	})
	refs := make([]BatchRef, len(ordered))
	var batchesLen int64
	for i, b := range ordered {
		h, err := checkInputBatch(b)
		if err != nil {
			return nil, nil, err
		}
		refs[i] = BatchRef{TopicPartition: b.TopicPartition, Position: batchesLen,
			Length: int32(len(b.Bytes)), Records: h.LastOffsetDelta + 1, CRC: h.CRC}
		batchesLen += int64(len(b.Bytes))
	}
	object := make([]byte, 0, batchesLen+int64(len(refs))*EntrySize+TrailerSize)
	for _, b := range ordered {
		object = append(object, b.Bytes...)
	}
	return appendFooter(object, refs), refs, nil
}

// checkInputBatch validates one batch given to EncodeObject.
func checkInputBatch(b Batch) (recordbatch.Header, error) {
	if b.TopicID.IsZero() || b.Partition < 0 {
		return recordbatch.Header{}, fmt.Errorf("%w: partition %v", ErrInvalidBatch, b.TopicPartition)
	}
	h, size, err := recordbatch.Validate(b.Bytes)
	if err != nil {
		return h, fmt.Errorf("%w: %v: %w", ErrInvalidBatch, b.TopicPartition, err)
	}
	if size != len(b.Bytes) {
		return h, fmt.Errorf("%w: %v: %d bytes hold a batch of %d", ErrInvalidBatch, b.TopicPartition, len(b.Bytes), size)
	}
	return h, nil
}

// appendFooter appends the entries of refs and the trailer to object.
func appendFooter(object []byte, refs []BatchRef) []byte {
	be := binary.BigEndian
	footerStart := len(object)
	for _, ref := range refs {
		var e [EntrySize]byte
		copy(e[entryOffTopicID:], ref.TopicID[:])
		be.PutUint32(e[entryOffPartition:], uint32(ref.Partition))
		be.PutUint64(e[entryOffPosition:], uint64(ref.Position))
		be.PutUint32(e[entryOffLength:], uint32(ref.Length))
		be.PutUint32(e[entryOffRecords:], uint32(ref.Records))
		be.PutUint32(e[entryOffCRC:], ref.CRC)
		object = append(object, e[:]...)
	}
	var t [TrailerSize]byte
	be.PutUint32(t[trailerOffCount:], uint32(len(refs)))
	be.PutUint32(t[trailerOffFooterLength:], uint32(len(refs)*EntrySize))
	be.PutUint16(t[trailerOffVersion:], ObjectVersion)
	crc := recordbatch.UpdateChecksum(recordbatch.Checksum(object[footerStart:]), t[:trailerOffCRC])
	be.PutUint32(t[trailerOffCRC:], crc)
	copy(t[trailerOffMagic:], objectMagic)
	return append(object, t[:]...)
}

// ParseFooter decodes and checks the footer of a shared object of size
// bytes from tail, the object's last len(tail) bytes (a caller GETs, say,
// the last 64 KiB, or passes the whole object). A tail too short for the
// footer gives a *FooterIncompleteError with the length to read. Every
// other failure wraps ErrCorrupt. The refs returned are in object order and
// satisfy the format's invariants (see doc.go); the batches themselves are
// checked by ReadBatch.
func ParseFooter(tail []byte, size int64) ([]BatchRef, error) {
	if int64(len(tail)) > size {
		return nil, corruptf("tail of %d bytes from an object of %d", len(tail), size)
	}
	if size < TrailerSize+minEntryBytes {
		return nil, corruptf("object of %d bytes is too small", size)
	}
	if len(tail) < TrailerSize {
		return nil, &FooterIncompleteError{Need: TrailerSize}
	}
	t := tail[len(tail)-TrailerSize:]
	count, footerLen, err := checkTrailer(t, size)
	if err != nil {
		return nil, err
	}
	need := TrailerSize + footerLen
	if int64(len(tail)) < need {
		return nil, &FooterIncompleteError{Need: need}
	}
	entries := tail[int64(len(tail))-need : len(tail)-TrailerSize]
	crc := recordbatch.UpdateChecksum(recordbatch.Checksum(entries), t[:trailerOffCRC])
	if got := binary.BigEndian.Uint32(t[trailerOffCRC:]); got != crc {
		return nil, corruptf("footer crc %08x, computed %08x", got, crc)
	}
	return decodeEntries(entries, count, size-need)
}

// checkTrailer checks the trailer's own fields and returns the entry count
// and footer length, bounded by the object's size.
func checkTrailer(t []byte, size int64) (count, footerLen int64, err error) {
	be := binary.BigEndian
	if string(t[trailerOffMagic:]) != objectMagic {
		return 0, 0, corruptf("bad magic %q", t[trailerOffMagic:])
	}
	version, flags := be.Uint16(t[trailerOffVersion:]), be.Uint16(t[trailerOffFlags:])
	if version != ObjectVersion || flags != 0 {
		return 0, 0, corruptf("unsupported version %d, flags %#x", version, flags)
	}
	count = int64(be.Uint32(t[trailerOffCount:]))
	footerLen = int64(be.Uint32(t[trailerOffFooterLength:]))
	if count == 0 || footerLen != count*EntrySize {
		return 0, 0, corruptf("%d entries in a footer of %d bytes", count, footerLen)
	}
	if count > (size-TrailerSize)/minEntryBytes {
		return 0, 0, corruptf("%d entries do not fit an object of %d bytes", count, size)
	}
	return count, footerLen, nil
}

// decodeEntries decodes count entries and checks that their batches
// exactly fill [0, batchesLen) in entry order, grouped and ordered by
// partition. REQUIRES: len(entries) == count*EntrySize.
func decodeEntries(entries []byte, count, batchesLen int64) ([]BatchRef, error) {
	be := binary.BigEndian
	refs := make([]BatchRef, count)
	var next int64
	for i := range refs {
		e := entries[i*EntrySize : (i+1)*EntrySize]
		ref := &refs[i]
		copy(ref.TopicID[:], e[entryOffTopicID:])
		ref.Partition = int32(be.Uint32(e[entryOffPartition:]))
		ref.Position = int64(be.Uint64(e[entryOffPosition:]))
		ref.Length = int32(be.Uint32(e[entryOffLength:]))
		ref.Records = int32(be.Uint32(e[entryOffRecords:]))
		ref.CRC = be.Uint32(e[entryOffCRC:])
		if ref.TopicID.IsZero() || ref.Partition < 0 || ref.Records < 1 {
			return nil, corruptf("entry %d: partition %v, %d records", i, ref.TopicPartition, ref.Records)
		}
		if i > 0 && compareTopicPartitions(refs[i-1].TopicPartition, ref.TopicPartition) > 0 {
			return nil, corruptf("entry %d: partition %v after %v", i, ref.TopicPartition, refs[i-1].TopicPartition)
		}
		if ref.Position != next || ref.Length < recordbatch.HeaderSize || int64(ref.Length) > batchesLen-next {
			return nil, corruptf("entry %d: batch at %d of %d bytes (expected at %d, batches end at %d)",
				i, ref.Position, ref.Length, next, batchesLen)
		}
		next += int64(ref.Length)
	}
	if next != batchesLen {
		return nil, corruptf("batches end at %d, footer starts at %d", next, batchesLen)
	}
	return refs, nil
}

// ReadBatch returns the batch ref locates in object, a whole shared
// object, after checking it: inside the object, the header's length,
// lastOffsetDelta+1 and CRC field equal to the ref's, and the batch valid
// under recordbatch.Validate (magic 2, CRC-32C, record count). A batch that
// fails is never returned; the error wraps ErrCorrupt. The result aliases
// object (capacity trimmed); copy it with AppendPatched before serving.
func ReadBatch(object []byte, ref BatchRef) ([]byte, error) {
	if ref.Position < 0 || ref.Length < recordbatch.HeaderSize || ref.Position > int64(len(object)) ||
		int64(ref.Length) > int64(len(object))-ref.Position {
		return nil, corruptf("%v: batch at %d of %d bytes outside an object of %d", ref.TopicPartition,
			ref.Position, ref.Length, len(object))
	}
	end := ref.Position + int64(ref.Length)
	batch := object[ref.Position:end:end]
	h, size, err := recordbatch.Validate(batch)
	if err != nil {
		return nil, fmt.Errorf("%w: %v: batch at %d: %w", ErrCorrupt, ref.TopicPartition, ref.Position, err)
	}
	if size != len(batch) || h.LastOffsetDelta+1 != ref.Records || h.CRC != ref.CRC {
		return nil, corruptf("%v: batch at %d has %d bytes, %d records, crc %08x; ref says %d, %d, %08x",
			ref.TopicPartition, ref.Position, size, h.LastOffsetDelta+1, h.CRC, ref.Length, ref.Records, ref.CRC)
	}
	return batch, nil
}

// AppendPatched appends a copy of batch to dst with its baseOffset set to
// baseOffset and its partitionLeaderEpoch to 0, the two header fields a
// shared object leaves as produced. Neither is covered by the batch CRC, so
// the copy stays valid. REQUIRES: batch is one whole batch (from ReadBatch).
func AppendPatched(dst, batch []byte, baseOffset int64) []byte {
	start := len(dst)
	dst = append(dst, batch...)
	recordbatch.SetBaseOffsetAndEpoch(dst[start:], baseOffset, 0)
	return dst
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
