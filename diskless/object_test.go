package diskless

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
)

// producedBatch builds a batch as a producer sends it: baseOffset 0,
// partitionLeaderEpoch -1, records values tagged with tag.
func producedBatch(t testing.TB, records int, tag string) []byte {
	t.Helper()
	var section []byte
	for i := range records {
		section = recordbatch.AppendRecord(section, kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i),
			Key: []byte(tag), Value: fmt.Appendf(nil, "%s-%d", tag, i)})
	}
	h := recordbatch.Header{PartitionLeaderEpoch: -1, LastOffsetDelta: int32(records - 1),
		FirstTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_000_000_000 + int64(records-1),
		ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	b := recordbatch.Encode(nil, h, int32(records), section)
	if _, _, err := recordbatch.Validate(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func testTopic(n byte) metadata.TopicID {
	var id metadata.TopicID
	id[0], id[15] = 0xa0+n, n
	return id
}

// interleavedBatches: topics × partitions × perPartition batches, handed
// over round-robin across partitions (as produce requests arrive), topics
// and partitions in descending order so that grouping has work to do.
func interleavedBatches(t testing.TB, topics, partitions, perPartition int) []Batch {
	var out []Batch
	for round := range perPartition {
		for topic := topics - 1; topic >= 0; topic-- {
			for p := partitions - 1; p >= 0; p-- {
				tp := TopicPartition{TopicID: testTopic(byte(topic)), Partition: int32(p)}
				out = append(out, Batch{TopicPartition: tp,
					Bytes: producedBatch(t, 1+(round+p)%4, fmt.Sprintf("t%d-p%d-r%d", topic, p, round))})
			}
		}
	}
	return out
}

func encodeTestObject(t testing.TB, batches []Batch) ([]byte, []BatchRef) {
	t.Helper()
	object, refs, err := EncodeObject(batches)
	if err != nil {
		t.Fatal(err)
	}
	return object, refs
}

func TestEncodeObjectRoundTrip(t *testing.T) {
	batches := interleavedBatches(t, 3, 4, 5)
	object, refs := encodeTestObject(t, batches)
	if len(refs) != len(batches) {
		t.Fatalf("%d refs for %d batches", len(refs), len(batches))
	}
	// Expected order: partitions sorted, each partition's batches as given.
	want := slices.Clone(batches)
	slices.SortStableFunc(want, func(a, b Batch) int { return compareTopicPartitions(a.TopicPartition, b.TopicPartition) })
	var position int64
	for i, ref := range refs {
		if ref.TopicPartition != want[i].TopicPartition || ref.Position != position {
			t.Fatalf("ref %d = %+v, want %v at %d", i, ref, want[i].TopicPartition, position)
		}
		got, err := ReadBatch(object, ref)
		if err != nil {
			t.Fatalf("ReadBatch(%+v): %v", ref, err)
		}
		if !bytes.Equal(got, want[i].Bytes) {
			t.Fatalf("batch %d differs from the one given", i)
		}
		h, _ := recordbatch.ParseHeader(got)
		if ref.Records != h.RecordCount || ref.CRC != h.CRC || int(ref.Length) != h.Size() {
			t.Fatalf("ref %d = %+v, header %+v", i, ref, h)
		}
		position += int64(ref.Length)
	}
	if wantSize := position + int64(len(refs))*EntrySize + TrailerSize; int64(len(object)) != wantSize {
		t.Fatalf("object of %d bytes, want %d", len(object), wantSize)
	}
	parsed, err := ParseFooter(object, int64(len(object)))
	if err != nil || !slices.Equal(parsed, refs) {
		t.Fatalf("ParseFooter = %v, %v; want the refs EncodeObject returned", parsed, err)
	}
	again, _ := encodeTestObject(t, batches)
	if !bytes.Equal(again, object) {
		t.Fatal("encoding the same batches twice gave different objects")
	}
}

func TestEncodeObjectGrouping(t *testing.T) {
	a := TopicPartition{TopicID: testTopic(1), Partition: 0}
	b := TopicPartition{TopicID: testTopic(1), Partition: 7}
	c := TopicPartition{TopicID: testTopic(0), Partition: 3}
	given := []TopicPartition{b, a, c, b, a, b, c}
	var batches []Batch
	for i, tp := range given {
		batches = append(batches, Batch{TopicPartition: tp, Bytes: producedBatch(t, 1, fmt.Sprint(i))})
	}
	object, refs := encodeTestObject(t, batches)
	wantOrder := []int{2, 6, 1, 4, 0, 3, 5} // c, c, a, a, b, b, b: stable within a partition
	for i, ref := range refs {
		got, err := ReadBatch(object, ref)
		if err != nil {
			t.Fatal(err)
		}
		if w := batches[wantOrder[i]]; ref.TopicPartition != w.TopicPartition || !bytes.Equal(got, w.Bytes) {
			t.Fatalf("object batch %d is not given batch %d", i, wantOrder[i])
		}
	}
}

func TestEncodeObjectRejects(t *testing.T) {
	tp := TopicPartition{TopicID: testTopic(1), Partition: 2}
	good := producedBatch(t, 2, "x")
	badCRC := bytes.Clone(good)
	badCRC[len(badCRC)-1] ^= 1
	tests := []struct {
		name    string
		batches []Batch
	}{
		{"no batches", nil},
		{"zero topic id", []Batch{{TopicPartition{Partition: 1}, good}}},
		{"negative partition", []Batch{{TopicPartition{TopicID: tp.TopicID, Partition: -1}, good}}},
		{"crc", []Batch{{tp, badCRC}}},
		{"trailing bytes", []Batch{{tp, append(bytes.Clone(good), 0)}}},
		{"two batches in one", []Batch{{tp, append(bytes.Clone(good), good...)}}},
		{"truncated", []Batch{{tp, good[:len(good)-1]}}},
		{"empty bytes", []Batch{{tp, nil}}},
		{"one bad among good", []Batch{{tp, good}, {tp, badCRC}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			object, refs, err := EncodeObject(tt.batches)
			if !errors.Is(err, ErrInvalidBatch) || object != nil || refs != nil {
				t.Fatalf("EncodeObject = %d bytes, %d refs, %v; want ErrInvalidBatch", len(object), len(refs), err)
			}
		})
	}
}

func TestParseFooterShortTail(t *testing.T) {
	object, refs := encodeTestObject(t, interleavedBatches(t, 2, 3, 2))
	size := int64(len(object))
	footerLen := int64(len(refs)) * EntrySize
	for _, n := range []int64{0, 1, TrailerSize - 1, TrailerSize, TrailerSize + 1, TrailerSize + footerLen - 1} {
		_, err := ParseFooter(object[size-n:], size)
		var short *FooterIncompleteError
		if !errors.As(err, &short) || !errors.Is(err, ErrFooterIncomplete) {
			t.Fatalf("tail of %d: %v, want a FooterIncompleteError", n, err)
		}
		if want := fmt.Sprintf("need the last %d bytes", short.Need); !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
		want := TrailerSize + footerLen
		if n < TrailerSize {
			want = TrailerSize
		}
		if short.Need != want {
			t.Fatalf("tail of %d: need %d, want %d", n, short.Need, want)
		}
	}
	for _, n := range []int64{TrailerSize + footerLen, TrailerSize + footerLen + 100, size} {
		got, err := ParseFooter(object[size-n:], size)
		if err != nil || !slices.Equal(got, refs) {
			t.Fatalf("tail of %d: %v, %v", n, got, err)
		}
	}
	// Two reads suffice from any first guess.
	_, err := ParseFooter(object[size-1:], size)
	var short *FooterIncompleteError
	errors.As(err, &short)
	_, err = ParseFooter(object[size-short.Need:], size)
	errors.As(err, &short)
	if got, err := ParseFooter(object[size-short.Need:], size); err != nil || !slices.Equal(got, refs) {
		t.Fatalf("after following Need: %v", err)
	}
}

// TestCorruptionDetected flips every byte of a small object, region by
// region, and checks that the reader notices.
func TestCorruptionDetected(t *testing.T) {
	object, refs := encodeTestObject(t, interleavedBatches(t, 2, 2, 2))
	size := int64(len(object))
	footerStart := size - TrailerSize - int64(len(refs))*EntrySize
	for at := range size {
		damaged := bytes.Clone(object)
		damaged[at] ^= 0x5a
		parsed, footerErr := ParseFooter(damaged, size)
		if at >= footerStart {
			if !errors.Is(footerErr, ErrCorrupt) {
				t.Fatalf("byte %d of the footer or trailer flipped: ParseFooter = %v", at, footerErr)
			}
			continue
		}
		if footerErr != nil || !slices.Equal(parsed, refs) {
			t.Fatalf("byte %d of the batches flipped: ParseFooter = %v", at, footerErr)
		}
		ref := refs[slices.IndexFunc(refs, func(r BatchRef) bool { return at < r.Position+int64(r.Length) })]
		_, err := ReadBatch(damaged, ref)
		inBatch := at - ref.Position
		notCovered := inBatch < recordbatch.PosLength ||
			(inBatch >= recordbatch.PosLeaderEpoch && inBatch < recordbatch.PosMagic)
		switch {
		case notCovered && err != nil:
			t.Fatalf("byte %d of a batch (baseOffset or leader epoch, patched on read) flipped: %v", inBatch, err)
		case !notCovered && !errors.Is(err, ErrCorrupt):
			t.Fatalf("byte %d of a batch flipped: ReadBatch = %v, want ErrCorrupt", inBatch, err)
		}
	}
}

func TestParseFooterRejects(t *testing.T) {
	object, refs := encodeTestObject(t, interleavedBatches(t, 2, 2, 1))
	size := int64(len(object))
	trailer := size - TrailerSize
	resealed := func(edit func(o []byte)) []byte {
		o := bytes.Clone(object)
		edit(o)
		footer := o[size-TrailerSize-int64(len(refs))*EntrySize : trailer]
		crc := recordbatch.UpdateChecksum(recordbatch.Checksum(footer), o[trailer:trailer+trailerOffCRC])
		binary.BigEndian.PutUint32(o[trailer+trailerOffCRC:], crc)
		return o
	}
	entry := func(i int) int64 { return size - TrailerSize - int64(len(refs)-i)*EntrySize }
	tests := []struct {
		name   string
		object []byte
		size   int64
	}{
		{"truncated end", object[:size-1], size - 1},
		{"truncated front", object[1:], size - 1},
		{"longer than its size", object, size - 1},
		{"bytes between batches and footer", slices.Insert(bytes.Clone(object), int(entry(0)), 0), size + 1},
		{"tiny", object[size-TrailerSize:], TrailerSize},
		{"magic", resealed(func(o []byte) { o[size-1] = 'x' }), size},
		{"version", resealed(func(o []byte) { o[trailer+trailerOffVersion+1] = 2 }), size},
		{"flags", resealed(func(o []byte) { o[trailer+trailerOffFlags+1] = 1 }), size},
		{"zero entries", resealed(func(o []byte) {
			binary.BigEndian.PutUint64(o[trailer:], 0)
		}), size},
		{"footer length not count × entry", resealed(func(o []byte) {
			binary.BigEndian.PutUint32(o[trailer+trailerOffFooterLength:], uint32(len(refs)*EntrySize-1))
		}), size},
		{"more entries than fit", resealed(func(o []byte) {
			n := uint32(size / EntrySize)
			binary.BigEndian.PutUint32(o[trailer+trailerOffCount:], n)
			binary.BigEndian.PutUint32(o[trailer+trailerOffFooterLength:], n*EntrySize)
		}), size},
		{"huge count", resealed(func(o []byte) {
			binary.BigEndian.PutUint32(o[trailer+trailerOffCount:], 1<<32-1)
			binary.BigEndian.PutUint32(o[trailer+trailerOffFooterLength:], 1<<32-1)
		}), size},
		{"zero topic id", resealed(func(o []byte) { clear(o[entry(0) : entry(0)+16]) }), size},
		{"negative partition", resealed(func(o []byte) { o[entry(0)+entryOffPartition] = 0x80 }), size},
		{"zero records", resealed(func(o []byte) { clear(o[entry(1)+entryOffRecords : entry(1)+entryOffCRC]) }), size},
		{"partitions out of order", resealed(func(o []byte) {
			first := bytes.Clone(o[entry(0) : entry(0)+entryOffPosition])
			copy(o[entry(0):], o[entry(len(refs)-1):entry(len(refs)-1)+entryOffPosition])
			copy(o[entry(len(refs)-1):], first)
		}), size},
		{"gap between batches", resealed(func(o []byte) {
			binary.BigEndian.PutUint64(o[entry(1)+entryOffPosition:], uint64(refs[1].Position+1))
		}), size},
		{"length past the footer", resealed(func(o []byte) {
			last := len(refs) - 1
			binary.BigEndian.PutUint32(o[entry(last)+entryOffLength:], uint32(refs[last].Length+1))
		}), size},
		{"length below a header", resealed(func(o []byte) {
			binary.BigEndian.PutUint32(o[entry(0)+entryOffLength:], recordbatch.HeaderSize-1)
		}), size},
		{"negative position", resealed(func(o []byte) {
			binary.BigEndian.PutUint64(o[entry(0)+entryOffPosition:], 1<<63)
		}), size},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if refs, err := ParseFooter(tt.object, tt.size); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ParseFooter = %d refs, %v; want ErrCorrupt", len(refs), err)
			}
		})
	}
}

func TestReadBatchRejectsMismatchedRef(t *testing.T) {
	object, refs := encodeTestObject(t, interleavedBatches(t, 1, 2, 2))
	ref := refs[1]
	edits := map[string]func(r *BatchRef){
		"records":            func(r *BatchRef) { r.Records++ },
		"crc":                func(r *BatchRef) { r.CRC ^= 1 },
		"shorter":            func(r *BatchRef) { r.Length-- },
		"longer":             func(r *BatchRef) { r.Length++ },
		"shifted":            func(r *BatchRef) { r.Position++ },
		"negative position":  func(r *BatchRef) { r.Position = -1 },
		"past the end":       func(r *BatchRef) { r.Position = int64(len(object)) },
		"huge position":      func(r *BatchRef) { r.Position = 1<<63 - 1 },
		"length past end":    func(r *BatchRef) { r.Length = 1<<31 - 1 },
		"length below a hdr": func(r *BatchRef) { r.Length = 3 },
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) {
			bad := ref
			edit(&bad)
			if got, err := ReadBatch(object, bad); !errors.Is(err, ErrCorrupt) || got != nil {
				t.Fatalf("ReadBatch(%+v) = %d bytes, %v; want ErrCorrupt", bad, len(got), err)
			}
		})
	}
	last := refs[len(refs)-1]
	if _, err := ReadBatch(object[:last.Position+int64(last.Length)-1], last); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadBatch of a truncated object: %v", err)
	}
}

func TestAppendPatched(t *testing.T) {
	object, refs := encodeTestObject(t, interleavedBatches(t, 1, 1, 3))
	original := bytes.Clone(object)
	prefix := []byte("already in the response")
	out := bytes.Clone(prefix)
	base := int64(1_000_000_007)
	for _, ref := range refs {
		batch, err := ReadBatch(object, ref)
		if err != nil {
			t.Fatal(err)
		}
		out = AppendPatched(out, batch, base)
		base += int64(ref.Records)
	}
	if !bytes.Equal(object, original) {
		t.Fatal("AppendPatched changed the object")
	}
	if !bytes.HasPrefix(out, prefix) {
		t.Fatal("AppendPatched changed dst's existing bytes")
	}
	rest, want := out[len(prefix):], int64(1_000_000_007)
	for len(rest) > 0 {
		h, size, err := recordbatch.Validate(rest)
		if err != nil {
			t.Fatalf("patched batch fails its check: %v", err)
		}
		if h.BaseOffset != want || h.PartitionLeaderEpoch != 0 {
			t.Fatalf("patched batch has baseOffset %d, epoch %d; want %d, 0", h.BaseOffset, h.PartitionLeaderEpoch, want)
		}
		want += int64(h.RecordCount)
		rest = rest[size:]
	}
}
