package tier

import (
	"encoding/binary"
	"sort"

	"github.com/strata-log/strata/hotlog"
)

// OffsetIndexEntry is one entry of the offset index (doc.go).
type OffsetIndexEntry struct {
	RelativeOffset uint32
	Position       uint32
}

// TimeIndexEntry is one entry of the time index (doc.go).
type TimeIndexEntry struct {
	Timestamp      int64 // max batch timestamp so far
	RelativeOffset uint32
}

// EpochRange says the leader of Epoch appended from StartOffset on.
type EpochRange struct {
	Epoch       int32
	StartOffset int64
}

// ObjectIndex is everything an object says about itself except its
// batches: the footer and the decoded index sections. Immutable once built,
// so the cold reader can cache and share it.
type ObjectIndex struct {
	Footer  *Footer
	Offsets []OffsetIndexEntry
	Times   []TimeIndexEntry
	Epochs  []EpochRange
	// ProducerSnapshot is the producer state as of the object's end
	// (LastOffset+1) in hotlog's snapshot format, checked by
	// hotlog.CheckProducerSnapshot; empty when the uploader had none.
	ProducerSnapshot []byte
	Aborted          []hotlog.AbortedTxn
	ChunkCRCs        []uint32 // CRC-32C of each Footer.ChunkSize piece of the batches
}

// DecodeIndexSections decodes the sections after the batches. meta must be
// the object's bytes at f.MetaRange(). Every section CRC and the index
// invariants of doc.go are checked; errors wrap ErrCorruptObject.
func DecodeIndexSections(f *Footer, meta []byte) (*ObjectIndex, error) {
	start, length := f.MetaRange()
	if int64(len(meta)) != length {
		return nil, corruptf("index sections are %d bytes, footer says %d", len(meta), length)
	}
	section := func(s Section) []byte {
		ref := f.Sections[s]
		return meta[ref.Offset-start : ref.Offset-start+ref.Length]
	}
	for s := SectionOffsetIndex; s < NumSections; s++ {
		if got := crc32c(section(s)); got != f.Sections[s].CRC {
			return nil, corruptf("section %d crc %08x, footer says %08x", s, got, f.Sections[s].CRC)
		}
	}
	x := &ObjectIndex{
		Footer:           f,
		Offsets:          decodeOffsetIndex(section(SectionOffsetIndex)),
		Times:            decodeTimeIndex(section(SectionTimeIndex)),
		Epochs:           decodeEpochs(section(SectionLeaderEpochs)),
		ProducerSnapshot: append([]byte(nil), section(SectionProducerSnapshot)...),
		Aborted:          decodeAborted(section(SectionAbortedTxns)),
		ChunkCRCs:        decodeChunkCRCs(section(SectionChunkCRCs)),
	}
	if err := x.check(); err != nil {
		return nil, err
	}
	return x, nil
}

func decodeOffsetIndex(b []byte) []OffsetIndexEntry {
	out := make([]OffsetIndexEntry, len(b)/offsetEntrySize)
	for i := range out {
		e := b[i*offsetEntrySize:]
		out[i] = OffsetIndexEntry{RelativeOffset: binary.BigEndian.Uint32(e), Position: binary.BigEndian.Uint32(e[4:])}
	}
	return out
}

func decodeTimeIndex(b []byte) []TimeIndexEntry {
	out := make([]TimeIndexEntry, len(b)/timeEntrySize)
	for i := range out {
		e := b[i*timeEntrySize:]
		out[i] = TimeIndexEntry{Timestamp: int64(binary.BigEndian.Uint64(e)), RelativeOffset: binary.BigEndian.Uint32(e[8:])}
	}
	return out
}

func decodeEpochs(b []byte) []EpochRange {
	out := make([]EpochRange, len(b)/epochEntrySize)
	for i := range out {
		e := b[i*epochEntrySize:]
		out[i] = EpochRange{Epoch: int32(binary.BigEndian.Uint32(e)), StartOffset: int64(binary.BigEndian.Uint64(e[4:]))}
	}
	return out
}

func decodeChunkCRCs(b []byte) []uint32 {
	out := make([]uint32, len(b)/chunkCRCSize)
	for i := range out {
		out[i] = binary.BigEndian.Uint32(b[i*chunkCRCSize:])
	}
	return out
}

func decodeAborted(b []byte) []hotlog.AbortedTxn {
	out := make([]hotlog.AbortedTxn, len(b)/abortedEntrySize)
	be := binary.BigEndian
	for i := range out {
		e := b[i*abortedEntrySize:]
		out[i] = hotlog.AbortedTxn{
			ProducerID:       int64(be.Uint64(e)),
			FirstOffset:      int64(be.Uint64(e[8:])),
			LastOffset:       int64(be.Uint64(e[16:])),
			LastStableOffset: int64(be.Uint64(e[24:])),
		}
	}
	return out
}

// check verifies the invariants of doc.go against the footer.
func (x *ObjectIndex) check() error {
	if err := x.checkOffsets(); err != nil {
		return err
	}
	if err := x.checkTimes(); err != nil {
		return err
	}
	if err := x.checkEpochs(); err != nil {
		return err
	}
	if err := x.checkProducerSnapshot(); err != nil {
		return err
	}
	return x.checkAborted()
}

// checkProducerSnapshot: an empty section means no state was carried; any
// other must be a hotlog producer snapshot (its own CRC, bounds and
// invariants) as of the object's end, LastOffset+1.
func (x *ObjectIndex) checkProducerSnapshot() error {
	if len(x.ProducerSnapshot) == 0 {
		return nil
	}
	at, err := hotlog.CheckProducerSnapshot(x.ProducerSnapshot)
	if err != nil {
		return corruptf("producer snapshot: %v", err)
	}
	if at != x.Footer.LastOffset+1 {
		return corruptf("producer snapshot as of %d, object ends at %d", at, x.Footer.LastOffset+1)
	}
	return nil
}

// ProducerSnapshotOffset is the offset the object's producer snapshot is
// as of (always EndOffset), and false when the object carries none.
func (x *ObjectIndex) ProducerSnapshotOffset() (int64, bool) {
	return x.EndOffset(), len(x.ProducerSnapshot) > 0
}

// EndOffset is one past the object's last offset: the next object's base.
func (x *ObjectIndex) EndOffset() int64 { return x.Footer.LastOffset + 1 }

// checkAborted: the entries are the aborts whose marker lies in the object
// (hotlog's .txnindex of the segment), so LastOffset is in the object's
// range and strictly increasing; FirstOffset may be in an earlier object.
func (x *ObjectIndex) checkAborted() error {
	prev := int64(-1)
	for _, a := range x.Aborted {
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastOffset <= prev ||
			a.LastOffset < x.Footer.BaseOffset || a.LastOffset > x.Footer.LastOffset || a.LastStableOffset > a.LastOffset+1 {
			return corruptf("aborted transaction %+v", a)
		}
		prev = a.LastOffset
	}
	return nil
}

func (x *ObjectIndex) checkOffsets() error {
	f := x.Footer
	span, batches := uint64(f.LastOffset-f.BaseOffset), uint64(f.Sections[SectionBatches].Length)
	for i, e := range x.Offsets {
		if i == 0 && (e.RelativeOffset != 0 || e.Position != 0) {
			return corruptf("offset index starts at %+v, not the first batch", e)
		}
		if uint64(e.RelativeOffset) > span || uint64(e.Position) >= batches {
			return corruptf("offset index entry %d %+v outside the object", i, e)
		}
		if i > 0 && (e.RelativeOffset <= x.Offsets[i-1].RelativeOffset || e.Position <= x.Offsets[i-1].Position) {
			return corruptf("offset index entry %d %+v does not increase", i, e)
		}
	}
	return nil
}

func (x *ObjectIndex) checkTimes() error {
	for i, e := range x.Times {
		if i == 0 && e.RelativeOffset != 0 {
			return corruptf("time index starts at relative offset %d", e.RelativeOffset)
		}
		if i > 0 && (e.RelativeOffset <= x.Times[i-1].RelativeOffset || e.Timestamp <= x.Times[i-1].Timestamp) {
			return corruptf("time index entry %d %+v does not increase", i, e)
		}
		if e.Timestamp > x.Footer.MaxTimestamp {
			return corruptf("time index entry %d %+v above the max timestamp %d", i, e, x.Footer.MaxTimestamp)
		}
		if _, ok := x.positionOf(e.RelativeOffset); !ok {
			return corruptf("time index entry %d %+v has no offset index entry", i, e)
		}
	}
	return nil
}

func (x *ObjectIndex) checkEpochs() error {
	f := x.Footer
	for i, e := range x.Epochs {
		if i == 0 && e.StartOffset != f.BaseOffset {
			return corruptf("first epoch range starts at %d, not the base offset %d", e.StartOffset, f.BaseOffset)
		}
		if e.Epoch < 0 || e.StartOffset > f.LastOffset {
			return corruptf("epoch range %d %+v", i, e)
		}
		if i > 0 && (e.Epoch <= x.Epochs[i-1].Epoch || e.StartOffset <= x.Epochs[i-1].StartOffset) {
			return corruptf("epoch range %d %+v does not increase", i, e)
		}
	}
	return nil
}

// positionOf returns the position of the offset-index entry for rel.
func (x *ObjectIndex) positionOf(rel uint32) (int64, bool) {
	i := sort.Search(len(x.Offsets), func(i int) bool { return x.Offsets[i].RelativeOffset >= rel })
	if i < len(x.Offsets) && x.Offsets[i].RelativeOffset == rel {
		return int64(x.Offsets[i].Position), true
	}
	return 0, false
}

// Contains reports whether offset lies in [base offset, last offset].
func (x *ObjectIndex) Contains(offset int64) bool {
	return offset >= x.Footer.BaseOffset && offset <= x.Footer.LastOffset
}

// OffsetSpan returns where to scan for the batch holding offset (or, after
// compaction, the first batch past it): it starts at or after start, which
// is a batch boundary, and at or before end. ErrOffsetNotInObject if offset
// is outside the object.
func (x *ObjectIndex) OffsetSpan(offset int64) (start, end int64, err error) {
	if !x.Contains(offset) {
		return 0, 0, ErrOffsetNotInObject
	}
	rel := uint32(offset - x.Footer.BaseOffset)
	i := sort.Search(len(x.Offsets), func(i int) bool { return x.Offsets[i].RelativeOffset > rel }) - 1
	start = int64(x.Offsets[i].Position) // i >= 0: entry 0 has relative offset 0
	end = x.Footer.Sections[SectionBatches].Length
	if i+1 < len(x.Offsets) {
		end = int64(x.Offsets[i+1].Position)
	}
	return start, end, nil
}

// TimestampStart returns a batch boundary at or before the first batch whose
// maxTimestamp >= ts. ok is false when no batch of the object reaches ts.
func (x *ObjectIndex) TimestampStart(ts int64) (start int64, ok bool) {
	if ts > x.Footer.MaxTimestamp {
		return 0, false
	}
	i := sort.Search(len(x.Times), func(i int) bool { return x.Times[i].Timestamp >= ts }) - 1
	if i < 0 {
		return 0, true
	}
	pos, _ := x.positionOf(x.Times[i].RelativeOffset) // checked by checkTimes
	return pos, true
}

// EpochAt returns the leader epoch that appended offset, or -1 if unknown.
func (x *ObjectIndex) EpochAt(offset int64) int32 {
	if !x.Contains(offset) {
		return -1
	}
	i := sort.Search(len(x.Epochs), func(i int) bool { return x.Epochs[i].StartOffset > offset }) - 1
	if i < 0 {
		return -1
	}
	return x.Epochs[i].Epoch
}

// ChunkRange returns the byte range of batches chunk i: [offset, offset+length).
func (x *ObjectIndex) ChunkRange(i int64) (offset, length int64) {
	size := int64(x.Footer.ChunkSize)
	offset = i * size
	return offset, min(size, x.Footer.Sections[SectionBatches].Length-offset)
}

// VerifyChunk checks data, the whole of batches chunk i, against its CRC.
// Errors wrap ErrCorruptObject.
func (x *ObjectIndex) VerifyChunk(i int64, data []byte) error {
	if i < 0 || i >= int64(len(x.ChunkCRCs)) {
		return corruptf("chunk %d of %d", i, len(x.ChunkCRCs))
	}
	if _, length := x.ChunkRange(i); int64(len(data)) != length {
		return corruptf("chunk %d is %d bytes, want %d", i, len(data), length)
	}
	if got := crc32c(data); got != x.ChunkCRCs[i] {
		return corruptf("chunk %d crc %08x, want %08x", i, got, x.ChunkCRCs[i])
	}
	return nil
}
