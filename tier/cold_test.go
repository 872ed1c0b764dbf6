package tier

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/objstore"
)

// coldFixture is a multi-block object in a MemStore behind counting and
// fault-injecting wrappers.
type coldFixture struct {
	seg     *testSegment
	mem     *objstore.MemStore
	faulty  *objstore.Faulty
	counter *objstore.Counting
	key     string
	obj     ColdObject
	plain   *ObjectReader // uncached reference reader on the MemStore
}

// newColdFixture builds a segment of about 4-5 MiB: 4-5 blocks of 1 MiB.
func newColdFixture(t testing.TB) *coldFixture {
	t.Helper()
	seg := makeSegment(t, 42, 5000, 1500, 2000)
	mem, key, enc := putObject(t, seg, testMeta())
	faulty := objstore.NewFaulty(mem)
	f := &coldFixture{seg: seg, mem: mem, faulty: faulty, counter: objstore.NewCounting(faulty), key: key,
		obj: ColdObject{Key: key, Size: enc.Size()}}
	plain, err := OpenObject(context.Background(), mem, key, enc.Size())
	if err != nil {
		t.Fatal(err)
	}
	f.plain = plain
	if n := plain.Index.Footer.NumChunks(); n < 4 {
		t.Fatalf("fixture has %d chunks, want >= 4", n)
	}
	return f
}

func (f *coldFixture) reader(t testing.TB, cfg ColdConfig) *ColdReader {
	t.Helper()
	if cfg.FetchSize == 0 {
		cfg.FetchSize = 1 << 20
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = 64 << 20
	}
	if cfg.ReadAhead == 0 {
		cfg.ReadAhead = -1
	}
	c, err := NewColdReader(f.counter, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func (f *coldFixture) gets() int64 { return f.counter.Total(objstore.OpGet).Requests }

// TestColdReadMatchesObjectReader: the cold reader returns exactly what the
// uncached reader returns, for offsets in every block, on batch boundaries,
// in gaps, and with limits smaller and larger than batches.
func TestColdReadMatchesObjectReader(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	ctx := context.Background()
	for i := 0; i < len(f.seg.batches); i += 37 {
		b := f.seg.batches[i]
		for _, offset := range []int64{b.base, b.last, b.base - 1} {
			for _, maxBytes := range []int{1, 10_000, 3 << 20} {
				want, err := f.plain.ReadBatches(ctx, max(offset, f.seg.batches[0].base), maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: offset, MaxBytes: maxBytes, UpTo: 1 << 62})
				if err != nil {
					t.Fatalf("offset %d: %v", offset, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("offset %d max %d: got %d bytes, want %d", offset, maxBytes, len(got), len(want))
				}
			}
		}
	}
	st := c.Stats()
	if st.Gets > f.plain.Index.Footer.NumChunks()+1 || st.BlockHits == 0 {
		t.Fatalf("every block should be fetched once and then hit: %+v", st)
	}
}

// TestColdReadStopsAtUpTo and at the object end.
func TestColdReadStopsAtUpTo(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	ctx := context.Background()
	b := f.seg.batches[10]
	got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: f.seg.batches[0].base, MaxBytes: 64 << 20, UpTo: b.base})
	if err != nil {
		t.Fatal(err)
	}
	if want := f.seg.log[:b.pos]; !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want the %d bytes before batch 10", len(got), len(want))
	}
	all, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: 0, MaxBytes: 64 << 20, UpTo: 1 << 62})
	if err != nil || !bytes.Equal(all, f.seg.log) {
		t.Fatalf("whole object: %d bytes, err %v; want %d", len(all), err, len(f.seg.log))
	}
	last := f.seg.batches[len(f.seg.batches)-1].last
	// Past the end (a compacted object's entry may claim more): no batches.
	if got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: last + 1, MaxBytes: 100, UpTo: 1 << 62}); err != nil || len(got) != 0 {
		t.Fatalf("past the end: %d bytes, %v", len(got), err)
	}
}

// TestColdSharedGets: concurrent readers of one block share one GET.
func TestColdSharedGets(t *testing.T) {
	f := newColdFixture(t)
	slow := objstore.NewLatency(f.counter, 50*time.Millisecond)
	c, err := NewColdReader(slow, ColdConfig{FetchSize: 1 << 20, ReadAhead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Index(context.Background(), f.obj); err != nil {
		t.Fatal(err)
	}
	before := f.gets()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 1000, UpTo: 1 << 62})
			if err != nil || len(got) == 0 {
				t.Errorf("read: %d bytes, %v", len(got), err)
			}
		}()
	}
	wg.Wait()
	if n := f.gets() - before; n != 1 {
		t.Fatalf("%d GETs for one block read by 8 readers, want 1", n)
	}
	if st := c.Stats(); st.SharedGets+st.BlockHits != 7 {
		t.Fatalf("stats %+v: want 7 shared or hits", st)
	}
}

// TestColdReadAhead: a sequential reader gets later blocks fetched before
// it asks for them; a random reader does not.
func TestColdReadAhead(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{ReadAhead: 2})
	ctx := context.Background()
	if _, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: 0, MaxBytes: 1000, UpTo: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "2 read-ahead blocks, 3 MiB cached", func() bool {
		return c.Stats().ReadAheadBlocks == 2 && c.Stats().CachedBytes == 3<<20
	})
	// Reading on sequentially, block 1 and 2 are hits.
	start := f.seg.batches[0].base
	for pos := int64(0); pos < 2<<20; {
		got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: start, MaxBytes: 256 << 10, UpTo: 1 << 62})
		if err != nil {
			t.Fatal(err)
		}
		pos += int64(len(got))
		start = lastOffsetOf(t, got) + 1
	}
	if st := c.Stats(); st.BlockMisses != 1 {
		t.Fatalf("sequential reader missed %d blocks, want only the first: %+v", st.BlockMisses, st)
	}
}

// lastOffsetOf returns the last offset of the last batch in b.
func lastOffsetOf(t *testing.T, b []byte) int64 {
	var last int64 = -1
	for len(b) > 0 {
		h, err := CheckStoredBatch(b)
		if err != nil {
			t.Fatal(err)
		}
		last = h.LastOffset()
		b = b[h.Size():]
	}
	return last
}

// TestColdFlippedByteNeverServed: a damaged byte in a batch field the batch
// CRC does not cover (the base offset) is caught by the chunk CRC; the read
// fails with ErrCorruptObject, is counted, and reads elsewhere still work.
func TestColdFlippedByteNeverServed(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{GetAttempts: 2})
	victim := f.seg.batches[len(f.seg.batches)/2]
	if !f.mem.Corrupt(f.key, int64(victim.pos)+3, 0x10) { // inside baseOffset
		t.Fatal("corrupt failed")
	}
	ctx := context.Background()
	got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: victim.base, MaxBytes: 1 << 20, UpTo: 1 << 62})
	if !errors.Is(err, ErrCorruptObject) || got != nil {
		t.Fatalf("read of the damaged block: %d bytes, %v; want ErrCorruptObject", len(got), err)
	}
	if st := c.Stats(); st.CorruptBlocks != 1 {
		t.Fatalf("corrupt blocks %d, want 1", st.CorruptBlocks)
	}
	// Never cached: a second read fails again rather than serving it.
	if _, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: victim.base, MaxBytes: 1 << 20, UpTo: 1 << 62}); !errors.Is(err, ErrCorruptObject) {
		t.Fatalf("second read: %v", err)
	}
	if _, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: 0, MaxBytes: 1000, UpTo: 1 << 62}); err != nil {
		t.Fatalf("the first block is intact: %v", err)
	}
}

// TestColdTransientFaultsRetried: 503 SlowDown and a truncated body are
// retried; the data served is still exact.
func TestColdTransientFaultsRetried(t *testing.T) {
	for _, kind := range []objstore.FaultKind{objstore.FaultSlowDown, objstore.FaultTruncate} {
		t.Run(kind.String(), func(t *testing.T) {
			f := newColdFixture(t)
			c := f.reader(t, ColdConfig{})
			if _, err := c.Index(context.Background(), f.obj); err != nil {
				t.Fatal(err)
			}
			f.faulty.Inject(objstore.Fault{Op: objstore.OpGet, Kind: kind, Times: 1})
			got, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 64 << 20, UpTo: 1 << 62})
			if err != nil || !bytes.Equal(got, f.seg.log) {
				t.Fatalf("got %d bytes, %v", len(got), err)
			}
			if f.faulty.Fired() != 1 || c.Stats().GetErrors != 1 {
				t.Fatalf("fired %d, stats %+v", f.faulty.Fired(), c.Stats())
			}
		})
	}
}

// TestColdPermanentFailureNotCached: a permanent error fails the read; once
// the store recovers the next read works.
func TestColdPermanentFailureNotCached(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	f.faulty.Inject(objstore.Fault{Op: objstore.OpGet, Kind: objstore.FaultPermanent})
	if _, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 100, UpTo: 1 << 62}); err == nil {
		t.Fatal("read succeeded with a failing store")
	}
	f.faulty.Clear()
	if _, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 100, UpTo: 1 << 62}); err != nil {
		t.Fatal(err)
	}
}

// TestColdCacheBounded: the cache never holds more than CacheBytes.
func TestColdCacheBounded(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{CacheBytes: 2 << 20})
	got, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 64 << 20, UpTo: 1 << 62})
	if err != nil || !bytes.Equal(got, f.seg.log) {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	if st := c.Stats(); st.CachedBytes > 2<<20 || st.CachedBytes == 0 {
		t.Fatalf("cached %d bytes, bound %d", st.CachedBytes, 2<<20)
	}
	// The read spans more blocks than the cache holds: it keeps the blocks
	// it walked to cut its answer, so none is fetched twice.
	if st := c.Stats(); st.Gets != c.numBlocks(f.plain.Index) {
		t.Fatalf("%d block GETs for %d blocks", st.Gets, c.numBlocks(f.plain.Index))
	}
	c.Forget(f.key)
	if st := c.Stats(); st.CachedBytes != 0 {
		t.Fatalf("after Forget: %d bytes cached", st.CachedBytes)
	}
}

// TestColdQuota: the byte-rate quota delays GETs beyond the burst.
func TestColdQuota(t *testing.T) {
	now := time.Unix(0, 0)
	q := newByteQuota(1<<20, 1<<20, func() time.Time { return now })
	if d := q.reserve(1 << 20); d != 0 {
		t.Fatalf("burst: waited %v", d)
	}
	if d := q.reserve(1 << 20); d != time.Second {
		t.Fatalf("second MiB at 1 MiB/s: wait %v, want 1s", d)
	}
	now = now.Add(3 * time.Second) // refills to the burst, not beyond
	if d := q.reserve(1 << 20); d != 0 {
		t.Fatalf("after refill: wait %v", d)
	}
	if d := q.reserve(1 << 19); d != 500*time.Millisecond {
		t.Fatalf("half MiB over: wait %v", d)
	}

	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{BytesPerSecond: 8 << 20})
	start := time.Now()
	if _, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 64 << 20, UpTo: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	if c.Stats().QuotaWait != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("within the burst: waited %v", c.Stats().QuotaWait)
	}
	c2 := f.reader(t, ColdConfig{BytesPerSecond: 1 << 20})
	if _, err := c2.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 3 << 20, UpTo: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	if c2.Stats().QuotaWait < time.Second {
		t.Fatalf("3 MiB at 1 MiB/s waited only %v", c2.Stats().QuotaWait)
	}
}

// TestColdOffsetForTimestamp matches the uncached reader.
func TestColdOffsetForTimestamp(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	ctx := context.Background()
	for i := 0; i < len(f.seg.batches); i += 97 {
		b := f.seg.batches[i]
		for _, from := range []int64{0, b.base} {
			want, wok, werr := f.plain.OffsetForTimestamp(ctx, b.maxTS, from)
			got, ok, err := c.OffsetForTimestamp(ctx, f.obj, b.maxTS, from)
			if err != nil || werr != nil || ok != wok || got != want {
				t.Fatalf("ts %d from %d: got %+v %v %v, want %+v %v %v", b.maxTS, from, got, ok, err, want, wok, werr)
			}
		}
	}
	if _, ok, err := c.OffsetForTimestamp(ctx, f.obj, f.plain.Index.Footer.MaxTimestamp+1, 0); ok || err != nil {
		t.Fatalf("past the max timestamp: %v %v", ok, err)
	}
}

// TestColdIndexCachedAndShared: one tail read per object.
func TestColdIndexCachedAndShared(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{IndexCacheEntries: 1})
	for i := 0; i < 3; i++ {
		if _, err := c.Index(context.Background(), f.obj); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.IndexMisses != 1 || st.IndexHits != 2 || f.gets() != 1 {
		t.Fatalf("stats %+v, gets %d", st, f.gets())
	}
}

func TestColdConfigValidate(t *testing.T) {
	for _, cfg := range []ColdConfig{{FetchSize: -1}, {FetchSize: 1000}, {CacheBytes: 1 << 20}, {ReadAhead: -2}, {Workers: -1}} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidColdConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	if err := (ColdConfig{}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestColdCallerGivingUpStillWarmsCache: a caller whose context ends while
// its block is in flight gets ctx's error, but the GET completes and the
// block is cached for the next read.
func TestColdCallerGivingUpStillWarmsCache(t *testing.T) {
	f := newColdFixture(t)
	slow := objstore.NewLatency(f.counter, 100*time.Millisecond)
	c, err := NewColdReader(slow, ColdConfig{FetchSize: 1 << 20, ReadAhead: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Index(context.Background(), f.obj); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: 0, MaxBytes: 1000, UpTo: 1 << 62}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("read with an expiring context: %v", err)
	}
	testkit.WaitFor(t, 5*time.Second, "1 MiB cached", func() bool { return c.Stats().CachedBytes == 1<<20 })
	before := f.gets()
	if _, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 1000, UpTo: 1 << 62}); err != nil {
		t.Fatal(err)
	}
	if f.gets() != before {
		t.Fatal("the abandoned GET was not cached")
	}
}

func TestColdReadAfterClose(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	c.Close()
	if _, err := c.Read(context.Background(), ColdRead{Object: f.obj, Offset: 0, MaxBytes: 1000, UpTo: 1 << 62}); !errors.Is(err, ErrColdReaderClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

// TestColdCacheOnlyRead: a CacheOnly read answers from the cache alone:
// ErrNotCached, with no GET, until a normal read cached the bytes; then
// exactly what the normal read returns, still with no GET.
func TestColdCacheOnlyRead(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	ctx := context.Background()
	r := ColdRead{Object: f.obj, Offset: f.seg.batches[3].base, MaxBytes: 10_000, UpTo: 1 << 62}
	cached := r
	cached.CacheOnly = true
	if _, err := c.Read(ctx, cached); !errors.Is(err, ErrNotCached) || f.gets() != 0 {
		t.Fatalf("cold cache-only read: %v after %d GETs; want ErrNotCached and none", err, f.gets())
	}
	want, err := c.Read(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	gets := f.gets()
	got, err := c.Read(ctx, cached)
	if err != nil || !bytes.Equal(got, want) || f.gets() != gets {
		t.Fatalf("cached read: %d bytes, %v, %d GETs; want the %d bytes of the normal read and no GET",
			len(got), err, f.gets()-gets, len(want))
	}
	far := cached
	far.Offset = f.seg.batches[len(f.seg.batches)-1].base // another block, not cached
	if _, err := c.Read(ctx, far); !errors.Is(err, ErrNotCached) || f.gets() != gets {
		t.Fatalf("uncached block: %v, %d GETs", err, f.gets()-gets)
	}
}
