package tier

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// DefaultIndexIntervalBytes: one offset-index entry per this many bytes of
// batches. Cold reads fetch 8 MiB chunks, so a coarse index costs nothing
// there and keeps a 1 GiB segment's indexes near 300 KiB.
const DefaultIndexIntervalBytes = 64 << 10

// SegmentMeta is what an object says about a segment beyond its batches.
type SegmentMeta struct {
	Topic       string
	TopicID     metadata.TopicID
	Partition   int32
	UploadEpoch int32 // leader epoch of the uploading broker
	// ProducerSnapshot is the producer state as of the segment's end
	// (last offset + 1), encoded as a hotlog snapshot file
	// ((*hotlog.Log).ProducerSnapshotAt of the next segment's base); may
	// be empty. Anything else makes EncodeSegmentObject fail.
	ProducerSnapshot []byte
	// AbortedTxns are the aborted transactions overlapping the segment; may be empty.
	AbortedTxns []hotlog.AbortedTxn
	// IndexIntervalBytes spaces index entries. Default DefaultIndexIntervalBytes.
	IndexIntervalBytes int
}

// Validate rejects metadata that cannot be encoded.
func (m SegmentMeta) Validate() error {
	if err := metadata.ValidateTopicName(m.Topic); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidSegment, err)
	}
	if m.TopicID.IsZero() || m.Partition < 0 || m.UploadEpoch < 0 || m.IndexIntervalBytes < 0 {
		return fmt.Errorf("%w: topic id %s, partition %d, epoch %d, index interval %d",
			ErrInvalidSegment, m.TopicID, m.Partition, m.UploadEpoch, m.IndexIntervalBytes)
	}
	if len(m.ProducerSnapshot) > MaxIndexSectionBytes || len(m.AbortedTxns) > MaxIndexSectionBytes/abortedEntrySize {
		return fmt.Errorf("%w: producer snapshot or aborted transactions too large", ErrInvalidSegment)
	}
	return nil
}

// EncodedObject is a segment object ready to upload: the segment's batches
// (read in place from the .log) followed by the encoded tail (index
// sections and footer). It implements io.ReaderAt over the whole object.
type EncodedObject struct {
	Index   *ObjectIndex // what a reader of the object will decode
	batches io.ReaderAt
	tail    []byte // sections after the batches, then the footer
}

// Footer is the object's footer.
func (o *EncodedObject) Footer() *Footer { return o.Index.Footer }

// Size is the object's size in bytes.
func (o *EncodedObject) Size() int64 { return o.Index.Footer.ObjectSize() }

// NewReader returns a fresh reader of the whole object; pass it to
// ObjectStore.Put with Size(). It is an io.ReaderAt and io.Seeker, so
// multipart uploads read parts in parallel and retries can re-read it.
func (o *EncodedObject) NewReader() *io.SectionReader { return io.NewSectionReader(o, 0, o.Size()) }

// ReadAt implements io.ReaderAt over the object.
func (o *EncodedObject) ReadAt(p []byte, off int64) (int, error) {
	batchesLen := o.Index.Footer.Sections[SectionBatches].Length
	if off < 0 {
		return 0, fmt.Errorf("tier: negative offset %d", off)
	}
	n := 0
	if off < batchesLen {
		want := p[:min(int64(len(p)), batchesLen-off)]
		k, err := o.batches.ReadAt(want, off)
		n += k
		if k < len(want) {
			// The segment file shrank or failed under us: not worth retrying.
			return n, fmt.Errorf("%w: reading segment batches at %d: %v", ErrInvalidSegment, off+int64(k), noEOF(err))
		}
		p, off = p[k:], off+int64(k)
	}
	if len(p) == 0 {
		return n, nil
	}
	tailOff := off - batchesLen
	if tailOff >= int64(len(o.tail)) {
		return n, io.EOF
	}
	k := copy(p, o.tail[tailOff:])
	if k < len(p) {
		return n + k, io.EOF
	}
	return n + k, nil
}

// noEOF turns a premature EOF of the segment file (it shrank) into an error.
func noEOF(err error) error {
	if err == nil || err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// EncodeSegmentObject builds the object for a sealed hotlog segment: log
// holds the segment's .log bytes, logSize of them. Every batch is validated
// (framing, magic 2, CRC-32C, increasing offsets, non-decreasing leader
// epochs): a segment with a bad batch is ErrInvalidSegment and must not be
// uploaded. log must stay readable and unchanged until the upload is done.
func EncodeSegmentObject(log io.ReaderAt, logSize int64, meta SegmentMeta) (*EncodedObject, error) {
	if err := meta.Validate(); err != nil {
		return nil, err
	}
	if logSize <= 0 || logSize > MaxBatchesBytes {
		return nil, fmt.Errorf("%w: segment size %d not in [1, %d]", ErrInvalidSegment, logSize, int64(MaxBatchesBytes))
	}
	interval := meta.IndexIntervalBytes
	if interval == 0 {
		interval = DefaultIndexIntervalBytes
	}
	b := &indexBuilder{interval: int64(interval), sums: &checksummer{chunkSize: ChunkSize}}
	if err := b.scan(io.NewSectionReader(log, 0, logSize), logSize); err != nil {
		return nil, err
	}
	x := b.finish(meta, logSize)
	tail := encodeTail(x)
	// The tail must decode exactly as a reader will decode it (this also
	// rejects bad AbortedTxns from the caller).
	decoded, err := decodeTail(tail)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSegment, err)
	}
	return &EncodedObject{Index: decoded, batches: log, tail: tail}, nil
}

// indexBuilder accumulates the index sections while scanning batches.
type indexBuilder struct {
	interval int64
	sums     *checksummer

	pos, lastIndexed   int64
	count              uint32
	first, last        recordbatch.Header
	maxTS, maxTSOffset int64
	offsets            []OffsetIndexEntry
	times              []TimeIndexEntry
	epochs             []EpochRange
	buf                []byte
}

// checksummer computes the batches section's CRC and its chunk CRCs from
// the bytes written to it, in order.
type checksummer struct {
	chunkSize int64
	whole     uint32
	current   uint32 // CRC of the chunk being filled
	filled    int64  // bytes in the chunk being filled
	chunks    []uint32
}

func (c *checksummer) Write(p []byte) (int, error) {
	n := len(p)
	c.whole = recordbatch.UpdateChecksum(c.whole, p)
	for len(p) > 0 {
		k := min(int64(len(p)), c.chunkSize-c.filled)
		c.current = recordbatch.UpdateChecksum(c.current, p[:k])
		c.filled += k
		p = p[k:]
		if c.filled == c.chunkSize {
			c.chunks = append(c.chunks, c.current)
			c.current, c.filled = 0, 0
		}
	}
	return n, nil
}

// finish returns the whole CRC and every chunk's CRC (the last may be partial).
func (c *checksummer) finish() (uint32, []uint32) {
	if c.filled > 0 {
		c.chunks = append(c.chunks, c.current)
		c.current, c.filled = 0, 0
	}
	return c.whole, c.chunks
}

// scan reads every batch of r (size bytes) once.
func (b *indexBuilder) scan(r io.Reader, size int64) error {
	br := bufio.NewReaderSize(io.TeeReader(r, b.sums), 1<<20)
	for b.pos < size {
		h, err := b.readBatch(br, size-b.pos)
		if err != nil {
			return fmt.Errorf("%w: batch at position %d: %v", ErrInvalidSegment, b.pos, err)
		}
		if err := b.add(h); err != nil {
			return fmt.Errorf("%w: batch at position %d: %v", ErrInvalidSegment, b.pos, err)
		}
		b.pos += int64(h.Size())
	}
	return nil
}

// readBatch reads and validates one whole batch of at most remaining bytes.
func (b *indexBuilder) readBatch(br *bufio.Reader, remaining int64) (recordbatch.Header, error) {
	var prefix [recordbatch.LengthPrefix]byte
	if _, err := io.ReadFull(br, prefix[:]); err != nil {
		return recordbatch.Header{}, fmt.Errorf("torn batch: %w", noEOF(err))
	}
	length := int64(int32(binary.BigEndian.Uint32(prefix[8:])))
	if length < recordbatch.HeaderSize-recordbatch.LengthPrefix || length > remaining-recordbatch.LengthPrefix {
		return recordbatch.Header{}, fmt.Errorf("batch length %d with %d bytes left", length, remaining)
	}
	size := int(length) + recordbatch.LengthPrefix
	if cap(b.buf) < size {
		b.buf = make([]byte, size)
	}
	batch := b.buf[:size]
	copy(batch, prefix[:])
	if _, err := io.ReadFull(br, batch[recordbatch.LengthPrefix:]); err != nil {
		return recordbatch.Header{}, fmt.Errorf("torn batch: %w", noEOF(err))
	}
	return CheckStoredBatch(batch)
}

// CheckStoredBatch validates a whole stored batch at the start of b:
// framing, magic 2, CRC-32C, record count <= lastOffsetDelta+1 (compacted
// batches may hold fewer records) and base offset >= 0. It is
// recordbatch.CheckStored plus the base offset, except that any magic but 2
// is corruption here (an object never holds anything else). Errors wrap
// recordbatch.ErrCorrupt.
func CheckStoredBatch(b []byte) (recordbatch.Header, error) {
	h, err := checkStoredBatchFrame(b)
	if err != nil {
		return h, err
	}
	if got := recordbatch.Checksum(b[recordbatch.PosAttributes:h.Size()]); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", recordbatch.ErrCorrupt, h.CRC, got)
	}
	return h, nil
}

// checkStoredBatchFrame is CheckStoredBatch without the batch CRC, for
// bytes already covered by a verified chunk CRC (the cold reader's cache):
// the encoder checked every batch's CRC before computing the chunk CRCs, so
// checking it again per read would only repeat work on the read path.
func checkStoredBatchFrame(b []byte) (recordbatch.Header, error) {
	h, err := recordbatch.ParseHeader(b)
	if err != nil {
		return h, err
	}
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d", recordbatch.ErrCorrupt, h.Magic)
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 || int64(h.RecordCount) > int64(h.LastOffsetDelta)+1 || h.BaseOffset < 0 {
		return h, fmt.Errorf("%w: base offset %d, record count %d, lastOffsetDelta %d",
			recordbatch.ErrCorrupt, h.BaseOffset, h.RecordCount, h.LastOffsetDelta)
	}
	return h, nil
}

// add records one validated batch at b.pos in the indexes.
func (b *indexBuilder) add(h recordbatch.Header) error {
	if b.count > 0 && h.BaseOffset <= b.last.LastOffset() {
		return fmt.Errorf("base offset %d not above previous last offset %d", h.BaseOffset, b.last.LastOffset())
	}
	if b.count == 0 {
		b.first, b.maxTS = h, math.MinInt64
	}
	if rel := h.LastOffset() - b.first.BaseOffset; rel > math.MaxUint32 {
		return fmt.Errorf("offset %d more than 2^32 past the base %d", h.LastOffset(), b.first.BaseOffset)
	}
	if err := b.addEpoch(h); err != nil {
		return err
	}
	if h.MaxTimestamp > b.maxTS {
		b.maxTS, b.maxTSOffset = h.MaxTimestamp, h.LastOffset()
	}
	if b.count == 0 || b.pos-b.lastIndexed >= b.interval {
		b.addIndexEntry(h)
	}
	b.last = h
	b.count++
	return nil
}

func (b *indexBuilder) addEpoch(h recordbatch.Header) error {
	epoch := h.PartitionLeaderEpoch
	n := len(b.epochs)
	switch {
	case epoch < 0:
		return fmt.Errorf("leader epoch %d", epoch)
	case n > 0 && epoch < b.epochs[n-1].Epoch:
		return fmt.Errorf("leader epoch %d after %d", epoch, b.epochs[n-1].Epoch)
	case n == 0 || epoch > b.epochs[n-1].Epoch:
		b.epochs = append(b.epochs, EpochRange{Epoch: epoch, StartOffset: h.BaseOffset})
	}
	return nil
}

func (b *indexBuilder) addIndexEntry(h recordbatch.Header) {
	rel := uint32(h.BaseOffset - b.first.BaseOffset)
	b.offsets = append(b.offsets, OffsetIndexEntry{RelativeOffset: rel, Position: uint32(b.pos)})
	b.lastIndexed = b.pos
	if n := len(b.times); n == 0 || b.maxTS > b.times[n-1].Timestamp {
		b.times = append(b.times, TimeIndexEntry{Timestamp: b.maxTS, RelativeOffset: rel})
	}
}

// finish builds the index (with a footer whose section refs are filled by encodeTail).
func (b *indexBuilder) finish(meta SegmentMeta, logSize int64) *ObjectIndex {
	f := &Footer{
		Version:            FooterVersion,
		TopicID:            meta.TopicID,
		Topic:              meta.Topic,
		Partition:          meta.Partition,
		UploadEpoch:        meta.UploadEpoch,
		BaseOffset:         b.first.BaseOffset,
		LastOffset:         b.last.LastOffset(),
		FirstTimestamp:     b.first.FirstTimestamp,
		MaxTimestamp:       b.maxTS,
		MaxTimestampOffset: b.maxTSOffset,
		BatchCount:         b.count,
		ChunkSize:          uint32(b.sums.chunkSize),
	}
	whole, chunks := b.sums.finish()
	f.Sections[SectionBatches] = SectionRef{Offset: 0, Length: logSize, CRC: whole}
	return &ObjectIndex{
		Footer:           f,
		Offsets:          b.offsets,
		Times:            b.times,
		Epochs:           b.epochs,
		ProducerSnapshot: append([]byte(nil), meta.ProducerSnapshot...),
		Aborted:          append([]hotlog.AbortedTxn(nil), meta.AbortedTxns...),
		ChunkCRCs:        chunks,
	}
}

// decodeTail decodes an object's tail: index sections then footer.
func decodeTail(tail []byte) (*ObjectIndex, error) {
	if len(tail) < FooterSize {
		return nil, corruptf("tail of %d bytes", len(tail))
	}
	f, err := DecodeFooter(tail[len(tail)-FooterSize:])
	if err != nil {
		return nil, err
	}
	return DecodeIndexSections(f, tail[:len(tail)-FooterSize])
}

// encodeTail encodes the sections after the batches and the footer, filling
// x.Footer's section refs.
func encodeTail(x *ObjectIndex) []byte {
	f := x.Footer
	sections := [NumSections][]byte{
		SectionOffsetIndex:      encodeOffsetIndex(x.Offsets),
		SectionTimeIndex:        encodeTimeIndex(x.Times),
		SectionLeaderEpochs:     encodeEpochs(x.Epochs),
		SectionProducerSnapshot: x.ProducerSnapshot,
		SectionAbortedTxns:      encodeAborted(x.Aborted),
		SectionChunkCRCs:        encodeChunkCRCs(x.ChunkCRCs),
	}
	var tail []byte
	next := f.Sections[SectionBatches].Length
	for s := SectionOffsetIndex; s < NumSections; s++ {
		var crc uint32
		if len(sections[s]) > 0 {
			crc = crc32c(sections[s])
		}
		f.Sections[s] = SectionRef{Offset: next, Length: int64(len(sections[s])), CRC: crc}
		next += int64(len(sections[s]))
		tail = append(tail, sections[s]...)
	}
	return AppendFooter(tail, f)
}

func encodeOffsetIndex(entries []OffsetIndexEntry) []byte {
	out := make([]byte, 0, len(entries)*offsetEntrySize)
	for _, e := range entries {
		out = binary.BigEndian.AppendUint32(out, e.RelativeOffset)
		out = binary.BigEndian.AppendUint32(out, e.Position)
	}
	return out
}

func encodeTimeIndex(entries []TimeIndexEntry) []byte {
	out := make([]byte, 0, len(entries)*timeEntrySize)
	for _, e := range entries {
		out = binary.BigEndian.AppendUint64(out, uint64(e.Timestamp))
		out = binary.BigEndian.AppendUint32(out, e.RelativeOffset)
	}
	return out
}

func encodeEpochs(entries []EpochRange) []byte {
	out := make([]byte, 0, len(entries)*epochEntrySize)
	for _, e := range entries {
		out = binary.BigEndian.AppendUint32(out, uint32(e.Epoch))
		out = binary.BigEndian.AppendUint64(out, uint64(e.StartOffset))
	}
	return out
}

func encodeAborted(entries []hotlog.AbortedTxn) []byte {
	out := make([]byte, 0, len(entries)*abortedEntrySize)
	for _, e := range entries {
		out = binary.BigEndian.AppendUint64(out, uint64(e.ProducerID))
		out = binary.BigEndian.AppendUint64(out, uint64(e.FirstOffset))
		out = binary.BigEndian.AppendUint64(out, uint64(e.LastOffset))
		out = binary.BigEndian.AppendUint64(out, uint64(e.LastStableOffset))
	}
	return out
}

func encodeChunkCRCs(crcs []uint32) []byte {
	out := make([]byte, 0, len(crcs)*chunkCRCSize)
	for _, c := range crcs {
		out = binary.BigEndian.AppendUint32(out, c)
	}
	return out
}
