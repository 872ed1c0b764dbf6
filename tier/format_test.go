package tier

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier/objstore"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	seg := makeSegment(t, 1, 1000, 300, 600)
	meta := testMeta()
	meta.IndexIntervalBytes = 1024
	meta.ProducerSnapshot = encodeTestSnapshot(segEnd(seg))
	meta.AbortedTxns = []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: 1001, LastOffset: 1010, LastStableOffset: 1000}}
	store, key, obj := putObject(t, seg, meta)
	ctx := context.Background()
	r, err := OpenObject(ctx, store, key, -1)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	f := r.Index.Footer
	if *f != *obj.Footer() {
		t.Fatalf("decoded footer %+v != encoded %+v", *f, *obj.Footer())
	}
	checkFooter(t, f, seg, meta)
	if !bytes.Equal(r.Index.ProducerSnapshot, meta.ProducerSnapshot) || len(r.Index.Aborted) != 1 || r.Index.Aborted[0] != meta.AbortedTxns[0] {
		t.Fatalf("snapshot %q, aborted %+v", r.Index.ProducerSnapshot, r.Index.Aborted)
	}
	if len(r.Index.Offsets) < 10 {
		t.Fatalf("only %d offset index entries for %d bytes at 1 KiB interval", len(r.Index.Offsets), len(seg.log))
	}
	all, err := r.ReadBatches(ctx, f.BaseOffset, math.MaxInt32)
	if err != nil || !bytes.Equal(all, seg.log) {
		t.Fatalf("whole read: %d bytes (want %d), %v", len(all), len(seg.log), err)
	}
	checkEveryOffset(t, r, seg)
	checkEpochs(t, r.Index, seg)
	checkTimestamps(t, r, seg)
}

func checkFooter(t *testing.T, f *Footer, seg *testSegment, meta SegmentMeta) {
	t.Helper()
	first, last := seg.batches[0], seg.batches[len(seg.batches)-1]
	maxTS, maxTSOffset := int64(math.MinInt64), int64(0)
	for _, b := range seg.batches {
		if b.maxTS > maxTS {
			maxTS, maxTSOffset = b.maxTS, b.last
		}
	}
	if f.Topic != meta.Topic || f.TopicID != meta.TopicID || f.Partition != meta.Partition || f.UploadEpoch != meta.UploadEpoch ||
		f.BaseOffset != first.base || f.LastOffset != last.last || f.FirstTimestamp != first.records[0].ts ||
		f.MaxTimestamp != maxTS || f.MaxTimestampOffset != maxTSOffset || int(f.BatchCount) != len(seg.batches) ||
		f.Sections[SectionBatches].Length != int64(len(seg.log)) || f.ChunkSize != ChunkSize {
		t.Fatalf("footer %+v does not describe the segment", *f)
	}
}

func checkEveryOffset(t *testing.T, r *ObjectReader, seg *testSegment) {
	t.Helper()
	ctx := context.Background()
	for i, b := range seg.batches {
		// Every offset of the batch and, after a gap, the gap's offsets find it first.
		from := b.base
		if i > 0 {
			from = seg.batches[i-1].last + 1
		}
		for o := from; o <= b.last; o++ {
			got, err := r.ReadBatches(ctx, o, 1)
			if err != nil {
				t.Fatalf("offset %d: %v", o, err)
			}
			if !bytes.Equal(got, seg.log[b.pos:b.pos+b.size]) {
				t.Fatalf("offset %d: got %d bytes, want batch %d [%d, %d]", o, len(got), i, b.base, b.last)
			}
		}
	}
	// maxBytes keeps whole batches only.
	b0, b1 := seg.batches[0], seg.batches[1]
	if got, _ := r.ReadBatches(ctx, b0.base, b0.size+b1.size-1); len(got) != b0.size {
		t.Fatalf("maxBytes just under two batches returned %d bytes, want %d", len(got), b0.size)
	}
	for _, o := range []int64{b0.base - 1, seg.batches[len(seg.batches)-1].last + 1} {
		if _, err := r.ReadBatches(ctx, o, 100); !errors.Is(err, ErrOffsetNotInObject) {
			t.Fatalf("offset %d outside: %v", o, err)
		}
	}
}

func checkEpochs(t *testing.T, x *ObjectIndex, seg *testSegment) {
	t.Helper()
	for _, b := range seg.batches {
		if got := x.EpochAt(b.base); got != b.epoch {
			t.Fatalf("EpochAt(%d) = %d, want %d", b.base, got, b.epoch)
		}
		if got := x.EpochAt(b.last); got != b.epoch {
			t.Fatalf("EpochAt(%d) = %d, want %d", b.last, got, b.epoch)
		}
	}
}

// bruteTimestamp is the reference answer: first record at or after from with ts >= target.
func bruteTimestamp(seg *testSegment, target, from int64) (OffsetTime, bool) {
	for _, b := range seg.batches {
		for _, rec := range b.records {
			if rec.offset >= from && rec.ts >= target {
				return OffsetTime{Offset: rec.offset, Timestamp: rec.ts}, true
			}
		}
	}
	return OffsetTime{}, false
}

func checkTimestamps(t *testing.T, r *ObjectReader, seg *testSegment) {
	t.Helper()
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(3, 4))
	f := r.Index.Footer
	for i := 0; i < 400; i++ {
		target := f.FirstTimestamp - 500 + rnd.Int64N(f.MaxTimestamp-f.FirstTimestamp+1000)
		from := f.BaseOffset
		if i%3 == 0 {
			from += rnd.Int64N(f.LastOffset - f.BaseOffset + 1)
		}
		got, ok, err := r.OffsetForTimestamp(ctx, target, from)
		want, wantOK := bruteTimestamp(seg, target, from)
		if err != nil || ok != wantOK || got != want {
			t.Fatalf("OffsetForTimestamp(%d, from %d) = %+v %v %v, want %+v %v", target, from, got, ok, err, want, wantOK)
		}
	}
}

func TestOpenObjectReadsIndexBeyondTheTail(t *testing.T) {
	seg := makeSegment(t, 2, 0, 14000, 0) // tiny batches, an index entry for each
	meta := testMeta()
	meta.IndexIntervalBytes = 1
	obj, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), meta)
	if err != nil {
		t.Fatal(err)
	}
	if _, n := obj.Footer().MetaRange(); n <= TailReadSize {
		t.Fatalf("index sections %d bytes fit the tail read; the test needs more", n)
	}
	counting := objstore.NewCounting(objstore.NewMemStore())
	ctx := context.Background()
	if err := counting.Put(ctx, "c/obj", obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	r, err := OpenObject(ctx, counting, "c/obj", obj.Size())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Index.Offsets) != len(seg.batches) {
		t.Fatalf("%d offset entries, want one per batch (%d)", len(r.Index.Offsets), len(seg.batches))
	}
	if gets := counting.Total(objstore.OpGet).Requests; gets != 2 {
		t.Fatalf("%d GETs to open, want 2 (tail, then the index sections)", gets)
	}
	b := seg.batches[9876]
	got, err := r.ReadBatches(ctx, b.base, 1)
	if err != nil || !bytes.Equal(got, seg.log[b.pos:b.pos+b.size]) {
		t.Fatalf("batch 9876: %v", err)
	}
}

func TestOpenObjectTailOnlyIsOneGet(t *testing.T) {
	seg := makeSegment(t, 5, 0, 50, 100)
	store, key, obj := putObject(t, seg, testMeta())
	counting := objstore.NewCounting(store)
	if _, err := OpenObject(context.Background(), counting, key, obj.Size()); err != nil {
		t.Fatal(err)
	}
	if n := counting.Total(objstore.OpGet).Requests; n != 1 {
		t.Fatalf("%d GETs to open a small object, want 1", n)
	}
}

// Every single flipped byte anywhere in an object is caught by a CRC and
// reported as ErrCorruptObject; no flip yields wrong data.
func TestEveryFlippedByteIsDetected(t *testing.T) {
	seg := makeSegment(t, 4, 500, 12, 40)
	meta := testMeta()
	meta.IndexIntervalBytes = 128
	meta.ProducerSnapshot = encodeTestSnapshot(segEnd(seg))
	meta.AbortedTxns = []hotlog.AbortedTxn{{ProducerID: 1, FirstOffset: 500, LastOffset: 501, LastStableOffset: 500}}
	store, key, obj := putObject(t, seg, meta)
	ctx := context.Background()
	for at := int64(0); at < obj.Size(); at++ {
		for _, mask := range []byte{0x01, 0x80} {
			store.Corrupt(key, at, mask)
			err := readWholeObject(ctx, store, key, seg.log)
			store.Corrupt(key, at, mask) // flip back
			if !errors.Is(err, ErrCorruptObject) {
				t.Fatalf("byte %d of %d flipped with %#x: err %v, want ErrCorruptObject", at, obj.Size(), mask, err)
			}
		}
	}
	if err := readWholeObject(ctx, store, key, seg.log); err != nil {
		t.Fatalf("restored object: %v", err)
	}
}

// readWholeObject opens the object and reads every batch, comparing with want.
func readWholeObject(ctx context.Context, store objstore.ObjectStore, key string, want []byte) error {
	r, err := OpenObject(ctx, store, key, -1)
	if err != nil {
		return err
	}
	got, err := r.ReadBatches(ctx, r.Index.Footer.BaseOffset, math.MaxInt32)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return errors.New("served wrong data without an error")
	}
	return nil
}

func TestChunkCRCsCoverFieldsTheBatchCRCDoesNot(t *testing.T) {
	seg := makeSegment(t, 6, 0, 3000, 600) // > 1 MiB: several chunks
	store, key, obj := putObject(t, seg, testMeta())
	if obj.Footer().NumChunks() < 2 {
		t.Fatalf("%d chunks; the test needs several", obj.Footer().NumChunks())
	}
	ctx := context.Background()
	b := seg.batches[len(seg.batches)-10]    // in the last chunk
	store.Corrupt(key, int64(b.pos)+7, 0x01) // baseOffset: not covered by the batch CRC
	r, err := OpenObject(ctx, store, key, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadBatches(ctx, b.base, 1); !errors.Is(err, ErrCorruptObject) {
		t.Fatalf("read of a batch with a flipped baseOffset: %v", err)
	}
	// Reads confined to intact chunks still work.
	if got, err := r.ReadBatches(ctx, seg.batches[0].base, 1000); err != nil || len(got) == 0 {
		t.Fatalf("read from an intact chunk: %d bytes, %v", len(got), err)
	}
}

func TestEncodeRejectsBadSegments(t *testing.T) {
	good := makeSegment(t, 7, 100, 5, 10)
	b0, b1 := good.batches[0], good.batches[1]
	flipCRC := bytes.Clone(good.log)
	flipCRC[b1.pos+30] ^= 1
	reversed := append(bytes.Clone(good.log[b1.pos:b1.pos+b1.size]), good.log[b0.pos:b0.pos+b0.size]...)
	epochDown := append(makeBatch(t, 0, 5, []int64{1}, false, false, 1), makeBatch(t, 1, 4, []int64{1}, false, false, 1)...)
	cases := map[string][]byte{
		"flipped byte":       flipCRC,
		"torn tail":          good.log[:len(good.log)-3],
		"decreasing offsets": reversed,
		"decreasing epoch":   epochDown,
		"garbage":            bytes.Repeat([]byte{0xff}, 100),
	}
	for name, log := range cases {
		if _, err := EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), testMeta()); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: %v, want ErrInvalidSegment", name, err)
		}
	}
	if _, err := EncodeSegmentObject(bytes.NewReader(nil), 0, testMeta()); !errors.Is(err, ErrInvalidSegment) {
		t.Errorf("empty segment: %v", err)
	}
	for _, meta := range []SegmentMeta{{Topic: "t"}, {Topic: "bad/name", TopicID: testTopicID}, {Topic: "t", TopicID: testTopicID, Partition: -1}} {
		if _, err := EncodeSegmentObject(bytes.NewReader(good.log), int64(len(good.log)), meta); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("meta %+v: %v", meta, err)
		}
	}
	bad := testMeta()
	bad.AbortedTxns = []hotlog.AbortedTxn{{ProducerID: 1, FirstOffset: 9, LastOffset: 3}}
	if _, err := EncodeSegmentObject(bytes.NewReader(good.log), int64(len(good.log)), bad); !errors.Is(err, ErrInvalidSegment) {
		t.Errorf("bad aborted txn: %v", err)
	}
}

func TestVerify(t *testing.T) {
	seg := makeSegment(t, 8, 0, 40, 100)
	store, key, obj := putObject(t, seg, testMeta())
	ctx := context.Background()
	if err := Verify(ctx, store, key, obj.Footer(), true); err != nil {
		t.Fatalf("verify: %v", err)
	}
	other := *obj.Footer()
	other.UploadEpoch++
	if err := Verify(ctx, store, key, &other, false); !errors.Is(err, ErrCorruptObject) {
		t.Fatalf("verify against another footer: %v", err)
	}
	store.Corrupt(key, 100, 0x10)
	if err := Verify(ctx, store, key, obj.Footer(), false); err != nil {
		t.Fatalf("footer-only verify should not read batches: %v", err)
	}
	if err := Verify(ctx, store, key, obj.Footer(), true); !errors.Is(err, ErrCorruptObject) {
		t.Fatalf("full verify of a damaged object: %v", err)
	}
	if err := Verify(ctx, store, "c/missing", obj.Footer(), true); !store.IsNotFound(err) {
		t.Fatalf("verify of a missing object: %v", err)
	}
}

func TestEncodedObjectReadAt(t *testing.T) {
	seg := makeSegment(t, 9, 0, 20, 50)
	store, key, obj := putObject(t, seg, testMeta())
	whole := objtestRead(t, store, key, obj.Size())
	rnd := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		off := rnd.Int64N(obj.Size())
		n := rnd.Int64N(obj.Size() - off + 1)
		buf := make([]byte, n)
		if k, err := obj.ReadAt(buf, off); int64(k) != n || (err != nil && off+n != obj.Size()) || !bytes.Equal(buf, whole[off:off+n]) {
			t.Fatalf("ReadAt(%d, +%d) = %d, %v", off, n, k, err)
		}
	}
	if _, err := obj.ReadAt(make([]byte, 1), obj.Size()); err == nil {
		t.Fatal("ReadAt past the end succeeded")
	}
}

func objtestRead(t *testing.T, store objstore.ObjectStore, key string, size int64) []byte {
	t.Helper()
	b, err := objstore.ReadAll(context.Background(), store, key, 0, size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
