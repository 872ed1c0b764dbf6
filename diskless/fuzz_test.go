package diskless

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// The committed seed corpora live in testdata/fuzz/<FuzzName>/ and are
// regenerated with STRATA_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./diskless/.

// FuzzParseFooter reads the footer of a fuzzed object from a tail of
// fuzzed length, follows a FooterIncompleteError once, and reads every
// batch the footer names. An object whose footer and batches all pass
// must be exactly what EncodeObject writes for those batches. With reseal
// the footer CRC is recomputed first, so the fuzzer reaches the entry
// checks.
func FuzzParseFooter(f *testing.F) {
	for _, object := range objectSeeds(f) {
		f.Add(object, uint32(len(object)), false)
		f.Add(object, uint32(TrailerSize), true)
	}
	f.Fuzz(func(t *testing.T, object []byte, tailLen uint32, reseal bool) {
		if reseal {
			resealFooter(object)
		}
		size := int64(len(object))
		tail := object[size-min(int64(tailLen), size):]
		refs, err := ParseFooter(tail, size)
		var short *FooterIncompleteError
		if errors.As(err, &short) {
			if short.Need <= int64(len(tail)) || short.Need > size {
				t.Fatalf("tail of %d from %d bytes: need %d", len(tail), size, short.Need)
			}
			need := short.Need
			refs, err = ParseFooter(object[size-need:], size)
			if errors.As(err, &short) && short.Need <= need {
				t.Fatalf("tail of %d bytes, the length asked for: need %d", need, short.Need)
			}
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFooterIncomplete) {
				t.Fatalf("error %v wraps neither ErrCorrupt nor ErrFooterIncomplete", err)
			}
			return
		}
		checkRefsReencode(t, object, refs)
	})
}

// resealFooter rewrites the footer CRC of object in place to match the
// entries its trailer claims, when they fit in it.
func resealFooter(object []byte) {
	if len(object) < TrailerSize {
		return
	}
	trailer := object[len(object)-TrailerSize:]
	footerLen := int(binary.BigEndian.Uint32(trailer[trailerOffFooterLength:]))
	if footerLen > len(object)-TrailerSize {
		return
	}
	entries := object[len(object)-TrailerSize-footerLen : len(object)-TrailerSize]
	crc := recordbatch.UpdateChecksum(recordbatch.Checksum(entries), trailer[:trailerOffCRC])
	binary.BigEndian.PutUint32(trailer[trailerOffCRC:], crc)
}

// checkRefsReencode reads every batch refs name and, when all pass,
// checks that EncodeObject rebuilds object byte for byte.
func checkRefsReencode(t *testing.T, object []byte, refs []BatchRef) {
	batches := make([]Batch, 0, len(refs))
	for _, ref := range refs {
		batch, err := ReadBatch(object, ref)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("ReadBatch error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		batches = append(batches, Batch{TopicPartition: ref.TopicPartition, Bytes: batch})
	}
	again, againRefs, err := EncodeObject(batches)
	if err != nil || !bytes.Equal(again, object) || len(againRefs) != len(refs) {
		t.Fatalf("re-encoding the object's batches: %d bytes (want %d), %v", len(again), len(object), err)
	}
	for i := range refs {
		if againRefs[i] != refs[i] {
			t.Fatalf("re-encoded ref %d = %+v, parsed %+v", i, againRefs[i], refs[i])
		}
	}
}

// FuzzReadBatch reads a fuzzed ref from a fuzzed object: a batch is
// returned only if it is the ref's bytes and valid, and it stays valid
// once patched.
func FuzzReadBatch(f *testing.F) {
	for _, object := range objectSeeds(f) {
		refs, err := ParseFooter(object, int64(len(object)))
		if err != nil {
			refs = []BatchRef{{Position: 0, Length: recordbatch.HeaderSize, Records: 1}}
		}
		for _, r := range refs[:min(len(refs), 2)] {
			f.Add(object, r.Position, r.Length, r.Records, r.CRC)
		}
	}
	f.Fuzz(func(t *testing.T, object []byte, position int64, length, records int32, crc uint32) {
		ref := BatchRef{Position: position, Length: length, Records: records, CRC: crc}
		batch, err := ReadBatch(object, ref)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || batch != nil {
				t.Fatalf("ReadBatch = %d bytes, %v; want nil and ErrCorrupt", len(batch), err)
			}
			return
		}
		if int32(len(batch)) != length || !bytes.Equal(batch, object[position:position+int64(length)]) {
			t.Fatalf("ReadBatch(%+v) returned %d other bytes", ref, len(batch))
		}
		patched := AppendPatched(nil, batch, 42)
		if h, _, err := recordbatch.Validate(patched); err != nil || h.BaseOffset != 42 || h.RecordCount != records || h.CRC != crc {
			t.Fatalf("patched batch: %+v, %v", h, err)
		}
	})
}

// objectSeeds: small objects from EncodeObject (one batch; many
// partitions; a compressed batch), damaged copies of one, and non-objects.
func objectSeeds(t testing.TB) [][]byte {
	one, _ := encodeTestObject(t, interleavedBatches(t, 1, 1, 1))
	many, refs := encodeTestObject(t, interleavedBatches(t, 2, 2, 2))
	var raw []byte
	for i := range 5 {
		raw = recordbatch.AppendRecord(raw, kmsg.Record{OffsetDelta: int32(i), Value: []byte("compressible compressible")})
	}
	section, err := recordbatch.CompressRecords(recordbatch.CodecZstd, raw)
	if err != nil {
		t.Fatal(err)
	}
	zstd := recordbatch.Encode(nil, recordbatch.Header{PartitionLeaderEpoch: -1, Attributes: recordbatch.CodecZstd,
		LastOffsetDelta: 4, ProducerID: 7, ProducerEpoch: 1, BaseSequence: 10}, 5, section)
	compressed, _ := encodeTestObject(t, []Batch{
		{TopicPartition: TopicPartition{TopicID: testTopic(9), Partition: 0}, Bytes: zstd},
		{TopicPartition: TopicPartition{TopicID: testTopic(3), Partition: 1}, Bytes: producedBatch(t, 2, "plain")},
	})
	batchDamaged := bytes.Clone(many)
	batchDamaged[refs[1].Position+recordbatch.HeaderSize] ^= 0x10
	footerDamaged := bytes.Clone(many)
	footerDamaged[len(footerDamaged)-TrailerSize-EntrySize+entryOffLength] ^= 0x01
	return [][]byte{one, many, compressed, batchDamaged, footerDamaged, []byte(objectMagic), nil}
}

// TestWriteFuzzSeeds writes the seed corpora under testdata/fuzz when
// STRATA_WRITE_FUZZ_SEEDS=1, and otherwise checks that they exist.
func TestWriteFuzzSeeds(t *testing.T) {
	corpora := map[string][]string{}
	for _, object := range objectSeeds(t) {
		corpora["FuzzParseFooter"] = append(corpora["FuzzParseFooter"],
			fmt.Sprintf("[]byte(%q)\nuint32(%d)\nbool(false)\n", object, len(object)),
			fmt.Sprintf("[]byte(%q)\nuint32(%d)\nbool(true)\n", object, TrailerSize))
		refs, err := ParseFooter(object, int64(len(object)))
		if err != nil {
			continue
		}
		r := refs[len(refs)-1]
		corpora["FuzzReadBatch"] = append(corpora["FuzzReadBatch"], fmt.Sprintf(
			"[]byte(%q)\nint64(%d)\nint32(%d)\nint32(%d)\nuint32(%d)\n", object, r.Position, r.Length, r.Records, r.CRC))
	}
	write := os.Getenv("STRATA_WRITE_FUZZ_SEEDS") == "1"
	for name, entries := range corpora {
		dir := filepath.Join("testdata", "fuzz", name)
		for i, body := range entries {
			path := filepath.Join(dir, fmt.Sprintf("seed-%02d", i))
			if !write {
				if _, err := os.Stat(path); err != nil {
					t.Errorf("missing committed seed %s (regenerate with STRATA_WRITE_FUZZ_SEEDS=1)", path)
				}
				continue
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("go test fuzz v1\n"+body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
