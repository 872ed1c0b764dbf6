package tier

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier/objstore"
)

// TestBlockArenaBudget: the arena never maps more than its budget, reuses
// a freed slot of the same class, unmaps free slots of another class to
// make room, and unmaps everything once closed and returned.
func TestBlockArenaBudget(t *testing.T) {
	a := newBlockArena(3 << 20)
	var slots [][]byte
	for i := 0; i < 3; i++ {
		b, ok := a.get(1<<20 - 100)
		if !ok || len(b) != 1<<20-100 || cap(b) != 1<<20 {
			t.Fatalf("slot %d: ok %v len %d cap %d", i, ok, len(b), cap(b))
		}
		slots = append(slots, b)
	}
	if _, ok := a.get(1 << 20); ok || a.mapped != 3<<20 {
		t.Fatalf("a fourth slot past the budget: ok %v, mapped %d", ok, a.mapped)
	}
	a.put(slots[0])
	b, ok := a.get(1 << 20)
	if !ok || &b[0] != &slots[0][0] || a.mapped != 3<<20 {
		t.Fatalf("freed slot not reused: ok %v, mapped %d", ok, a.mapped)
	}
	a.put(b)
	small, ok := a.get(1000)
	if !ok || cap(small) != minSlot || a.mapped != 2<<20+minSlot {
		t.Fatalf("small slot: ok %v cap %d mapped %d; want the free 1 MiB slot unmapped for it", ok, cap(small), a.mapped)
	}
	if _, ok := a.get(4 << 20); ok {
		t.Fatal("a slot larger than the budget")
	}
	a.put(slots[1])
	a.close()
	if a.mapped != 1<<20+minSlot {
		t.Fatalf("after close: %d mapped, want the two slots in use", a.mapped)
	}
	a.put(slots[2])
	a.put(small)
	if a.mapped != 0 {
		t.Fatalf("%d bytes still mapped after every slot came back", a.mapped)
	}
}

// TestColdAnswerOutlivesSlotReuse: a Read's answer stays intact after the
// blocks it came from are evicted and their slots refilled with other
// blocks.
func TestColdAnswerOutlivesSlotReuse(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{CacheBytes: 2 << 20})
	ctx := context.Background()
	first := f.seg.batches[0].base
	want, err := f.plain.ReadBatches(ctx, first, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: first, MaxBytes: 10_000, UpTo: 1 << 62})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("first read: %d bytes, %v", len(got), err)
	}
	// Blocks 1 and up only: block 0 read again would refill a slot with the
	// very bytes it held.
	for i := len(f.seg.batches) - 1; f.seg.batches[i].pos >= 1<<20; i -= 97 {
		if _, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: f.seg.batches[i].base, MaxBytes: 10_000, UpTo: 1 << 62}); err != nil {
			t.Fatal(err)
		}
	}
	if st := c.Stats(); st.Gets < c.numBlocks(f.plain.Index)-1 {
		t.Fatalf("%d GETs: the reads did not cycle the two slots through every block", st.Gets)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("an answer changed after its block's slot was reused")
	}
}

// TestColdBlockReferencesBalance: concurrent readers, some giving up while
// their block is in flight, some cache-only, over a cache of two blocks with
// read-ahead: every answer is right, and once they are done every slot in
// use is a cached block only the cache holds (no reference leaked), and
// Close returns all of them.
func TestColdBlockReferencesBalance(t *testing.T) {
	f := newColdFixture(t)
	slow := objstore.NewLatency(f.counter, time.Millisecond)
	c, err := NewColdReader(slow, ColdConfig{FetchSize: 1 << 20, CacheBytes: 2 << 20, ReadAhead: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := 0; i < 40; i++ {
				b := f.seg.batches[rng.IntN(len(f.seg.batches))]
				r := ColdRead{Object: f.obj, Offset: b.base, MaxBytes: rng.IntN(3 << 20), UpTo: 1 << 62, CacheOnly: i%5 == 4}
				rctx, cancel := context.WithTimeout(ctx, time.Duration(rng.IntN(4))*time.Millisecond+time.Microsecond)
				if i%3 != 0 {
					cancel()
					rctx, cancel = ctx, func() {}
				}
				got, err := c.Read(rctx, r)
				cancel()
				if err != nil {
					continue // given up, or not cached: nothing to check
				}
				want, err := f.plain.ReadBatches(ctx, b.base, max(r.MaxBytes, 1))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("offset %d max %d: %d bytes, want %d (%v)", b.base, r.MaxBytes, len(got), len(want), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	testkit.WaitFor(t, 10*time.Second, "flights done", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.mu.flights) == 0
	})
	c.mu.Lock()
	free := int64(0)
	for class, l := range c.mu.arena.free {
		free += int64(class * len(l))
	}
	inUse := c.mu.arena.mapped - free
	for el := c.mu.blocks.Front(); el != nil; el = el.Next() {
		if refs := el.Value.(*cacheEntry).block.refs; refs != 1 {
			t.Errorf("a cached block has %d references with no reader left", refs)
		}
	}
	cached, mapped := c.mu.cachedBytes, c.mu.arena.mapped
	c.mu.Unlock()
	if inUse != cached || mapped > 2<<20 {
		t.Fatalf("%d bytes of slots in use, %d cached, %d mapped (budget %d)", inUse, cached, mapped, 2<<20)
	}
	c.Close()
	if c.mu.arena.mapped != 0 {
		t.Fatalf("%d bytes still mapped after Close", c.mu.arena.mapped)
	}
}

// TestColdAnswerIntoBuffers: with ColdRead.Buffers the answer, one block or
// spanning blocks, is a pooled buffer the set owns, with the same bytes.
func TestColdAnswerIntoBuffers(t *testing.T) {
	f := newColdFixture(t)
	c := f.reader(t, ColdConfig{})
	ctx := context.Background()
	for _, maxBytes := range []int{10_000, 3 << 20} {
		first := f.seg.batches[0].base
		want, err := f.plain.ReadBatches(ctx, first, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var set bufpool.Set
		got, err := c.Read(ctx, ColdRead{Object: f.obj, Offset: first, MaxBytes: maxBytes, UpTo: 1 << 62, Buffers: &set})
		if err != nil || !bytes.Equal(got, want) || set.Len() != 1 {
			t.Fatalf("max %d: %d bytes (want %d), %v, %d buffers in the set", maxBytes, len(got), len(want), err, set.Len())
		}
		set.Release()
	}
}
