package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier/objstore"
)

// The committed seed corpora live in testdata/fuzz/<FuzzName>/ and are
// regenerated with STRATA_WRITE_FUZZ_SEEDS=1 go test -run TestWriteFuzzSeeds ./tier/.

func FuzzDecodeFooter(f *testing.F) {
	for _, seed := range footerSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		footer, err := DecodeFooter(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("error %v does not wrap ErrCorruptObject", err)
			}
			return
		}
		again, err := DecodeFooter(AppendFooter(nil, footer))
		if err != nil || *again != *footer {
			t.Fatalf("re-encoded footer decodes to %+v, %v; want %+v", again, err, footer)
		}
	})
}

// FuzzIndexSections builds a footer with valid CRCs around fuzzed sections,
// so the fuzzer reaches the index invariant checks and the look-ups.
func FuzzIndexSections(f *testing.F) {
	for _, s := range indexSeeds(f) {
		f.Add(s.offsets, s.times, s.epochs, s.aborted, s.chunks, s.base, s.span, s.maxTS, s.batchesLen)
	}
	f.Fuzz(func(t *testing.T, offsets, times, epochs, aborted, chunks []byte, base, span, maxTS int64, batchesLen uint32) {
		footer := &Footer{Topic: "fuzz", TopicID: testTopicID, BaseOffset: base, LastOffset: base + span,
			MaxTimestamp: maxTS, MaxTimestampOffset: base, BatchCount: 1, ChunkSize: ChunkSize}
		sections := [][]byte{nil, offsets, times, epochs, nil, aborted, chunks}
		next := int64(batchesLen)
		footer.Sections[SectionBatches] = SectionRef{Length: int64(batchesLen)}
		var meta []byte
		for s := SectionOffsetIndex; s < NumSections; s++ {
			var crc uint32
			if len(sections[s]) > 0 {
				crc = crc32c(sections[s])
			}
			footer.Sections[s] = SectionRef{Offset: next, Length: int64(len(sections[s])), CRC: crc}
			next += int64(len(sections[s]))
			meta = append(meta, sections[s]...)
		}
		decoded, err := DecodeFooter(AppendFooter(nil, footer))
		if err != nil {
			return
		}
		x, err := DecodeIndexSections(decoded, meta)
		if err != nil {
			if !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("error %v does not wrap ErrCorruptObject", err)
			}
			return
		}
		exerciseLookups(t, x)
	})
}

func exerciseLookups(t *testing.T, x *ObjectIndex) {
	f := x.Footer
	batchesLen := f.Sections[SectionBatches].Length
	for _, o := range []int64{f.BaseOffset - 1, f.BaseOffset, (f.BaseOffset + f.LastOffset) / 2, f.LastOffset, f.LastOffset + 1} {
		start, end, err := x.OffsetSpan(o)
		if err == nil && (start < 0 || start > end || end > batchesLen) {
			t.Fatalf("OffsetSpan(%d) = [%d, %d] outside [0, %d]", o, start, end, batchesLen)
		}
		x.EpochAt(o)
	}
	for _, ts := range []int64{-1 << 63, 0, f.MaxTimestamp, f.MaxTimestamp + 1} {
		if start, ok := x.TimestampStart(ts); ok && (start < 0 || start >= batchesLen) {
			t.Fatalf("TimestampStart(%d) = %d outside [0, %d)", ts, start, batchesLen)
		}
	}
}

// FuzzOpenObject feeds whole objects through OpenObject and the readers.
func FuzzOpenObject(f *testing.F) {
	for _, seed := range objectSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, object []byte) {
		store := objstore.NewMemStore()
		ctx := context.Background()
		if err := store.Put(ctx, "c/obj", bytes.NewReader(object), int64(len(object))); err != nil {
			t.Fatal(err)
		}
		r, err := OpenObject(ctx, store, "c/obj", -1)
		if err != nil {
			return
		}
		exerciseLookups(t, r.Index)
		got, err := r.ReadBatches(ctx, r.Index.Footer.BaseOffset, 1<<20)
		if err == nil && len(got) == 0 {
			t.Fatal("ReadBatches returned nothing and no error")
		}
		r.OffsetForTimestamp(ctx, r.Index.Footer.FirstTimestamp, r.Index.Footer.BaseOffset)
	})
}

func objectSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for i, n := range []int{1, 3, 12} {
		seg := makeSegment(t, uint64(20+i), int64(i*1000), n, 30)
		meta := testMeta()
		meta.IndexIntervalBytes = 100
		if i == 2 {
			meta.ProducerSnapshot = encodeTestSnapshot(segEnd(seg))
			meta.AbortedTxns = []hotlog.AbortedTxn{{ProducerID: 3, FirstOffset: 2000, LastOffset: 2002, LastStableOffset: 1999}}
		}
		obj, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), meta)
		if err != nil {
			t.Fatal(err)
		}
		whole := make([]byte, obj.Size())
		obj.ReadAt(whole, 0)
		out = append(out, whole)
	}
	damaged := bytes.Clone(out[1])
	damaged[len(damaged)-FooterSize-3] ^= 0x40 // in the chunk CRCs
	return append(out, damaged, []byte("STRATAsg"), nil)
}

func footerSeeds(t testing.TB) [][]byte {
	var out [][]byte
	for _, obj := range objectSeeds(t)[:3] {
		out = append(out, obj[len(obj)-FooterSize:])
	}
	bad := bytes.Clone(out[0])
	bad[footerOffVersion+1] = 2
	return append(out, bad, make([]byte, FooterSize))
}

type indexSeed struct {
	offsets, times, epochs, aborted, chunks []byte
	base, span, maxTS                       int64
	batchesLen                              uint32
}

func indexSeeds(t testing.TB) []indexSeed {
	var out []indexSeed
	for _, obj := range objectSeeds(t)[:3] {
		footer, err := DecodeFooter(obj[len(obj)-FooterSize:])
		if err != nil {
			t.Fatal(err)
		}
		sec := func(s Section) []byte {
			ref := footer.Sections[s]
			return obj[ref.Offset : ref.Offset+ref.Length]
		}
		out = append(out, indexSeed{sec(SectionOffsetIndex), sec(SectionTimeIndex), sec(SectionLeaderEpochs),
			sec(SectionAbortedTxns), sec(SectionChunkCRCs), footer.BaseOffset, footer.LastOffset - footer.BaseOffset,
			footer.MaxTimestamp, uint32(footer.Sections[SectionBatches].Length)})
	}
	return out
}

// TestWriteFuzzSeeds writes the seed corpora under testdata/fuzz when
// STRATA_WRITE_FUZZ_SEEDS=1, and otherwise checks that they exist.
func TestWriteFuzzSeeds(t *testing.T) {
	corpora := map[string][]string{}
	for _, b := range objectSeeds(t) {
		corpora["FuzzOpenObject"] = append(corpora["FuzzOpenObject"], fmt.Sprintf("[]byte(%q)\n", b))
	}
	for _, b := range footerSeeds(t) {
		corpora["FuzzDecodeFooter"] = append(corpora["FuzzDecodeFooter"], fmt.Sprintf("[]byte(%q)\n", b))
	}
	for _, s := range indexSeeds(t) {
		corpora["FuzzIndexSections"] = append(corpora["FuzzIndexSections"], fmt.Sprintf(
			"[]byte(%q)\n[]byte(%q)\n[]byte(%q)\n[]byte(%q)\n[]byte(%q)\nint64(%d)\nint64(%d)\nint64(%d)\nuint32(%d)\n",
			s.offsets, s.times, s.epochs, s.aborted, s.chunks, s.base, s.span, s.maxTS, s.batchesLen))
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
