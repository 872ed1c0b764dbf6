package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier/objstore"
)

// compactFixture is a partition's run of objects in a store.
type compactFixture struct {
	store   ObjectStore
	entries []metadata.TierEntry
	records []testRecordAt // every data record, in offset order
	markers []int64        // offsets of abort markers
}

// latest returns the model's answer: the offset of the latest record of
// each key, sorted.
func (f *compactFixture) latest() []int64 {
	byKey := map[string]int64{}
	for _, r := range f.records {
		byKey[r.key] = r.offset
	}
	var out []int64
	for _, o := range byKey {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// newCompactFixture writes objects objects of batches keyed batches each
// (3 records over keys distinct keys). With txn set, object 1 holds a
// transactional batch of producer 7 and object 2 its abort marker, and
// the last object ends with an abort of producer 8 (marker last).
func newCompactFixture(t testing.TB, store ObjectStore, objects, batches, keys int, txn bool) *compactFixture {
	return newCompactFixtureMeta(t, store, testMeta(), objects, batches, keys, 0, txn)
}

// newCompactFixtureMeta is newCompactFixture for the partition of meta.
// pad bytes are appended to each value.
func newCompactFixtureMeta(t testing.TB, store ObjectStore, base SegmentMeta, objects, batches, keys, pad int, txn bool) *compactFixture {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(objects), uint64(batches)))
	f := &compactFixture{store: store}
	offset, ts := int64(100), int64(1_700_000_000_000)
	var txnFirst int64
	for o := 0; o < objects; o++ {
		var log []byte
		meta := base
		for b := 0; b < batches; b++ {
			var recs []kv
			for i := 0; i < 3; i++ {
				recs = append(recs, kv{fmt.Sprintf("k%03d", r.IntN(keys)), fmt.Sprintf("v%d", offset+int64(i)) + strings.Repeat("x", pad)})
			}
			log = append(log, keyedBatch(offset, ts, -1, recs)...)
			for i, rec := range recs {
				f.records = append(f.records, testRecordAt{offset: offset + int64(i), key: rec.key, value: rec.value})
			}
			offset, ts = offset+3, ts+10
		}
		if txn && o == 1 {
			txnFirst = offset
			log = append(log, keyedBatch(offset, ts, 7, []kv{{"tx7", "aborted"}})...)
			f.records = append(f.records, testRecordAt{offset: offset, key: "tx7", value: "aborted"})
			offset++
		}
		if txn && o == 2 {
			log = append(log, markerBatch(offset, ts, 7)...)
			meta.AbortedTxns = []hotlog.AbortedTxn{{ProducerID: 7, FirstOffset: txnFirst, LastOffset: offset, LastStableOffset: txnFirst}}
			f.markers = append(f.markers, offset)
			offset++
		}
		if txn && o == objects-1 {
			log = append(log, markerBatch(offset, ts, 8)...)
			meta.AbortedTxns = append(meta.AbortedTxns, hotlog.AbortedTxn{ProducerID: 8, FirstOffset: offset, LastOffset: offset, LastStableOffset: offset})
			f.markers = append(f.markers, offset)
			offset++
		}
		f.entries = append(f.entries, putRunObject(t, store, log, meta, int64(o+1)))
	}
	return f
}

// putRunObject uploads one object and returns its committed entry.
func putRunObject(t testing.TB, store ObjectStore, log []byte, meta SegmentMeta, version int64) metadata.TierEntry {
	t.Helper()
	obj, err := EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), meta)
	if err != nil {
		t.Fatal(err)
	}
	ft := obj.Footer()
	key, _ := SegmentKey(SegmentKeyParts{Cluster: "c1", Topic: meta.Topic, TopicID: meta.TopicID,
		Partition: meta.Partition, BaseOffset: ft.BaseOffset, Epoch: meta.UploadEpoch})
	if err := store.Put(context.Background(), key, obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	return metadata.TierEntry{TopicID: meta.TopicID, Partition: meta.Partition, BaseOffset: ft.BaseOffset,
		LastOffset: ft.LastOffset, FirstTimestamp: ft.FirstTimestamp, MaxTimestamp: ft.MaxTimestamp,
		LeaderEpoch: 1, Key: key, Size: obj.Size(), Version: version}
}

// fakeClock is a settable clock.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func newTestCompactor(t testing.TB, store ObjectStore, swapper ManifestSwapper, m *Manifest, clock *fakeClock) *Compactor {
	t.Helper()
	c, err := NewCompactor(CompactorConfig{Store: store, Swapper: swapper, Manifest: m, Cluster: "c1",
		TempDir: t.TempDir(), DeleteGrace: time.Minute, Logger: quietLog(), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAllEntries reads every record of entries through an ObjectReader,
// checking that each object lies inside its entry.
func readAllEntries(t testing.TB, store ObjectStore, entries []metadata.TierEntry) []testRecordAt {
	t.Helper()
	ctx := context.Background()
	var out []testRecordAt
	for _, e := range entries {
		r, err := OpenObject(ctx, store, e.Key, e.Size)
		if err != nil {
			t.Fatalf("open %s: %v", e.Key, err)
		}
		if f := r.Index.Footer; f.BaseOffset < e.BaseOffset || f.LastOffset > e.LastOffset {
			t.Fatalf("%s: object [%d, %d] outside its entry [%d, %d]", e.Key, f.BaseOffset, f.LastOffset, e.BaseOffset, e.LastOffset)
		}
		data, err := r.ReadBatches(ctx, r.Index.Footer.BaseOffset, math.MaxInt32)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range splitBatches(t, data) {
			if h, recs := batchRecords(t, b); !h.Control() {
				out = append(out, recs...)
			}
		}
	}
	return out
}

func checkContiguous(t testing.TB, olds, news []metadata.TierEntry) {
	t.Helper()
	if news[0].BaseOffset != olds[0].BaseOffset || news[len(news)-1].LastOffset != olds[len(olds)-1].LastOffset {
		t.Fatalf("news [%d, %d] do not cover olds [%d, %d]", news[0].BaseOffset, news[len(news)-1].LastOffset,
			olds[0].BaseOffset, olds[len(olds)-1].LastOffset)
	}
	for i := 1; i < len(news); i++ {
		if news[i].BaseOffset != news[i-1].LastOffset+1 {
			t.Fatalf("news not contiguous: %+v", news)
		}
	}
}

// TestCompactMergesAndDeletesAfterGrace: six small objects become one
// (target far above their total), holding exactly the latest record per
// key at its original offset; the manifest swaps at once; the old objects
// go only once the grace period has passed.
func TestCompactMergesAndDeletesAfterGrace(t *testing.T) {
	store := objstore.NewMemStore()
	f := newCompactFixture(t, store, 6, 40, 25, false)
	m := NewManifest()
	m.Load(f.entries)
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := newTestCompactor(t, store, newMemSwapper(f.entries), m, clock)
	res, err := c.Compact(context.Background(), CompactRun{Topic: "orders.v1", UploadEpoch: 4, Entries: f.entries,
		TargetBytes: 1 << 20, Rewrite: keepLatest(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.News) != 1 || res.BatchesIn != 6*40 || res.BytesOut >= res.BytesIn || res.News[0].Version != res.Revision {
		t.Fatalf("result %+v", res)
	}
	checkContiguous(t, f.entries, res.News)
	got := readAllEntries(t, store, res.News)
	want := f.latest()
	if len(got) != len(want) {
		t.Fatalf("%d records kept, want %d (one per key)", len(got), len(want))
	}
	for i, r := range got {
		if r.offset != want[i] || r.value != fmt.Sprintf("v%d", r.offset) {
			t.Fatalf("record %d: %+v, want offset %d", i, r, want[i])
		}
	}
	if segs := m.Segments(testTopicID, 3); len(segs) != 1 || segs[0].Key != res.News[0].Key {
		t.Fatalf("manifest after swap: %+v", segs)
	}
	testGraceDeletion(t, c, store, clock, f.entries)
}

func testGraceDeletion(t *testing.T, c *Compactor, store ObjectStore, clock *fakeClock, olds []metadata.TierEntry) {
	t.Helper()
	ctx := context.Background()
	if pending := c.PendingDeletes(); len(pending) != len(olds) {
		t.Fatalf("pending %v", pending)
	}
	cold, err := NewColdReader(store, ColdConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cold.Close()
	c.cfg.Cold = cold
	for _, e := range olds { // cached: a forgotten Forget would keep answering from here
		if _, err := cold.Index(ctx, ColdObjectOf(e)); err != nil {
			t.Fatal(err)
		}
	}
	if deleted, err := c.DeleteDue(ctx); err != nil || len(deleted) != 0 {
		t.Fatalf("deleted before the grace period: %v %v", deleted, err)
	}
	for _, e := range olds {
		if _, err := store.Stat(ctx, e.Key); err != nil {
			t.Fatalf("old object gone early: %v", err)
		}
	}
	clock.now = clock.now.Add(time.Minute)
	deleted, err := c.DeleteDue(ctx)
	if err != nil || len(deleted) != len(olds) {
		t.Fatalf("deleted %v, %v", deleted, err)
	}
	for _, e := range olds {
		if _, err := store.Stat(ctx, e.Key); !store.IsNotFound(err) {
			t.Fatalf("old object %s still there: %v", e.Key, err)
		}
		if _, err := cold.Index(ctx, ColdObjectOf(e)); !store.IsNotFound(err) {
			t.Fatalf("the cold cache still answers for deleted %s: %v", e.Key, err)
		}
	}
	if len(c.PendingDeletes()) != 0 {
		t.Fatal("queue not drained")
	}
}

// TestCompactKeepsObjectCountAndAborts: with a small target the output is
// cut into several objects, never more than the input; the abort whose
// marker is kept is carried into the object holding the marker, the one
// whose marker was dropped is not; the run's end stays claimed by the last
// entry even though its last batch (a marker) was dropped.
func TestCompactKeepsObjectCountAndAborts(t *testing.T) {
	store := objstore.NewMemStore()
	f := newCompactFixture(t, store, 5, 60, 100000, true) // keys all distinct: little shrinks
	keepFirstMarker := func(o int64) bool { return o == f.markers[0] }
	c := newTestCompactor(t, store, newMemSwapper(f.entries), nil, &fakeClock{now: time.Unix(0, 0)})
	res, err := c.Compact(context.Background(), CompactRun{Topic: "orders.v1", Entries: f.entries,
		TargetBytes: f.entries[0].Size / 3, Rewrite: keepLatest(t, keepFirstMarker)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.News) < 2 || len(res.News) > len(f.entries) {
		t.Fatalf("%d new objects from %d", len(res.News), len(f.entries))
	}
	checkContiguous(t, f.entries, res.News)
	var aborts []hotlog.AbortedTxn
	for _, e := range res.News {
		r, err := OpenObject(context.Background(), store, e.Key, e.Size)
		if err != nil {
			t.Fatal(err)
		}
		aborts = append(aborts, r.Index.Aborted...)
		if e == res.News[len(res.News)-1] && r.Index.Footer.LastOffset >= e.LastOffset {
			t.Fatalf("last object ends at %d, entry at %d: the dropped marker should leave a claimed tail", r.Index.Footer.LastOffset, e.LastOffset)
		}
	}
	if len(aborts) != 1 || aborts[0].ProducerID != 7 || aborts[0].LastOffset != f.markers[0] {
		t.Fatalf("aborts carried %+v, want only producer 7's", aborts)
	}
	if got := readAllEntries(t, store, res.News); len(got) != len(f.latest()) {
		t.Fatalf("%d records, want %d", len(got), len(f.latest()))
	}
}

// TestCompactFailuresChangeNothing: a failed guard, a corrupt old object,
// a rewrite that stops early or writes outside the run, and an empty
// output all leave the manifest and the bucket as they were.
func TestCompactFailuresChangeNothing(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		prepare func(f *compactFixture, s *memSwapper, store *objstore.MemStore)
		rewrite func(t *testing.T, f *compactFixture) RewriteFunc
		want    error
	}{
		"guard": {
			prepare: func(f *compactFixture, s *memSwapper, _ *objstore.MemStore) {
				s.entries[f.entries[1].BaseOffset] = metadata.TierEntry{Version: 99}
			},
			want: metadata.ErrTierEntriesChanged,
		},
		"corrupt": {
			prepare: func(f *compactFixture, _ *memSwapper, store *objstore.MemStore) {
				store.Corrupt(f.entries[2].Key, 100, 0x40)
			},
			want: ErrCorruptObject,
		},
		"early stop": {
			rewrite: func(t *testing.T, f *compactFixture) RewriteFunc {
				return func(src BatchSource, sink func([]byte) error) error {
					b, _ := src.Next()
					return sink(bytes.Clone(b))
				}
			},
			want: ErrInvalidCompaction,
		},
		"outside the run": {
			rewrite: func(t *testing.T, f *compactFixture) RewriteFunc {
				return func(src BatchSource, sink func([]byte) error) error {
					return sink(keyedBatch(f.entries[len(f.entries)-1].LastOffset+1, 0, -1, []kv{{"x", "y"}}))
				}
			},
			want: ErrInvalidCompaction,
		},
		"empty": {
			rewrite: func(t *testing.T, f *compactFixture) RewriteFunc {
				return func(src BatchSource, sink func([]byte) error) error {
					for {
						if _, err := src.Next(); err != nil {
							return nil
						}
					}
				}
			},
			want: ErrCompactedEmpty,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			store := objstore.NewMemStore()
			f := newCompactFixture(t, store, 4, 20, 10, false)
			swapper := newMemSwapper(f.entries)
			if tc.prepare != nil {
				tc.prepare(f, swapper, store)
			}
			rewrite := keepLatest(t, nil)
			if tc.rewrite != nil {
				rewrite = tc.rewrite(t, f)
			}
			m := NewManifest()
			m.Load(f.entries)
			c := newTestCompactor(t, store, swapper, m, &fakeClock{now: time.Unix(0, 0)})
			_, err := c.Compact(ctx, CompactRun{Topic: "orders.v1", Entries: f.entries, TargetBytes: 1 << 20, Rewrite: rewrite})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			listed, _ := store.List(ctx, "c1/")
			if len(listed) != len(f.entries) || len(c.PendingDeletes()) != 0 {
				t.Fatalf("bucket holds %d objects (want the %d olds), pending %v", len(listed), len(f.entries), c.PendingDeletes())
			}
			if segs := m.Segments(testTopicID, 3); len(segs) != len(f.entries) || segs[0] != f.entries[0] {
				t.Fatalf("manifest changed: %+v", segs)
			}
		})
	}
}

// TestPlanPieces: equal-ish pieces of at least the target, never more
// than maxPieces, covering every batch once.
func TestPlanPieces(t *testing.T) {
	mk := func(sizes ...int64) []outBatch {
		var out []outBatch
		pos, off := int64(0), int64(0)
		for _, s := range sizes {
			out = append(out, outBatch{pos: pos, size: s, base: off, last: off})
			pos, off = pos+s, off+1
		}
		return out
	}
	cases := []struct {
		name      string
		sizes     []int64
		target    int64
		maxPieces int
		want      [][2]int
	}{
		{"all small merge", []int64{10, 10, 10, 10}, 100, 4, [][2]int{{0, 4}}},
		{"two pieces", []int64{10, 10, 10, 10}, 20, 4, [][2]int{{0, 2}, {2, 4}}},
		{"capped by inputs", []int64{10, 10, 10, 10, 10, 10}, 10, 2, [][2]int{{0, 3}, {3, 6}}},
		{"one batch", []int64{500}, 10, 3, [][2]int{{0, 1}}},
		{"remainder joins", []int64{30, 30, 5}, 30, 2, [][2]int{{0, 2}, {2, 3}}},
	}
	for _, tc := range cases {
		b := mk(tc.sizes...)
		var total int64
		for _, s := range tc.sizes {
			total += s
		}
		got := planPieces(b, total, tc.target, tc.maxPieces)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCompactorConfigValidate rejects missing parts and bad values.
func TestCompactorConfigValidate(t *testing.T) {
	ok := CompactorConfig{Store: objstore.NewMemStore(), Swapper: newMemSwapper(nil), Cluster: "c1"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(c *CompactorConfig){
		func(c *CompactorConfig) { c.Store = nil },
		func(c *CompactorConfig) { c.Swapper = nil },
		func(c *CompactorConfig) { c.Cluster = "" },
		func(c *CompactorConfig) { c.DeleteGrace = -1 },
		func(c *CompactorConfig) { c.MaxRunObjects = metadata.MaxTierSwapEntries },
	} {
		c := ok
		bad(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidCompaction) {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

// TestColdReadGoneAndPastEnd: a deleted object is ErrObjectGone (so the
// caller retries from the manifest), and RetryGone retries until the
// read finds the new object.
func TestColdReadGoneAndPastEnd(t *testing.T) {
	store := objstore.NewMemStore()
	f := newCompactFixture(t, store, 2, 10, 5, false)
	c, err := NewColdReader(store, ColdConfig{FetchSize: 1 << 20, ReadAhead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	gone := f.entries[0]
	if err := store.Delete(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	_, err = c.Read(ctx, ColdRead{Object: ColdObject{Key: gone.Key, Size: gone.Size}, Offset: gone.BaseOffset, MaxBytes: 1, UpTo: math.MaxInt64})
	if !errors.Is(err, ErrObjectGone) {
		t.Fatalf("read of a deleted object: %v", err)
	}
	tries := 0
	data, err := RetryGone(ctx, 3, time.Millisecond, func() ([]byte, error) {
		tries++
		e := gone
		if tries == 2 {
			e = f.entries[1] // the manifest caught up
		}
		return c.Read(ctx, ColdRead{Object: ColdObject{Key: e.Key, Size: e.Size}, Offset: e.BaseOffset, MaxBytes: 1, UpTo: math.MaxInt64})
	})
	if err != nil || tries != 2 || len(data) == 0 {
		t.Fatalf("RetryGone: %d tries, %d bytes, %v", tries, len(data), err)
	}
	_, err = RetryGone(ctx, 2, time.Millisecond, func() ([]byte, error) {
		return nil, fmt.Errorf("x: %w", ErrObjectGone)
	})
	if !errors.Is(err, ErrObjectGone) {
		t.Fatalf("RetryGone gave up with %v", err)
	}
	if _, err := RetryGone(ctx, 5, time.Millisecond, func() (int, error) { return 0, io.ErrUnexpectedEOF }); err != io.ErrUnexpectedEOF {
		t.Fatalf("other errors pass through: %v", err)
	}
}

// NewCompactor removes the run files a crash left in its own TempDir, and
// nothing else there.
func TestNewCompactorRemovesStaleRunFiles(t *testing.T) {
	dir := t.TempDir()
	stale, other := filepath.Join(dir, "strata-compact-123.log"), filepath.Join(dir, "00000000000000000000.log")
	for _, f := range []string{stale, other} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewCompactor(CompactorConfig{Store: objstore.NewMemStore(), Swapper: newMemSwapper(nil),
		Cluster: "c1", TempDir: dir, Logger: quietLog()}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale run file kept: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another file removed: %v", err)
	}
}
