package session

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for the cache.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestCache(slots int) (*Cache, *clock) {
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c := NewCache(Config{Slots: slots, EvictAfter: time.Minute})
	c.now = clk.now
	return c, clk
}

func part(topic string, p int32, offset int64) Partition {
	return Partition{Key: Key{Topic: topic, Partition: p}, Params: Params{FetchOffset: offset, MaxBytes: 1 << 20}}
}

func results(n int, hw int64) []Result {
	out := make([]Result, n)
	for i := range out {
		out[i] = Result{HighWatermark: hw, LastStableOffset: hw}
	}
	return out
}

// openSession runs a full fetch of parts and returns the session id.
func openSession(t *testing.T, c *Cache, parts []Partition, privileged bool) int32 {
	t.Helper()
	x, err := c.Begin(Request{Epoch: InitialEpoch, Partitions: parts, Privileged: privileged})
	if err != nil {
		t.Fatal(err)
	}
	id, include := x.Finish(results(len(parts), 10))
	if slices.Contains(include, false) {
		t.Fatalf("a full fetch left partitions out: %v", include)
	}
	return id
}

func keys(parts []Partition) []Key {
	out := make([]Key, len(parts))
	for i, p := range parts {
		out[i] = p.Key
	}
	return out
}

func TestSessionlessFetchOpensNothingAndClosesTheNamedSession(t *testing.T) {
	c, _ := newTestCache(10)
	id := openSession(t, c, []Partition{part("a", 0, 0)}, false)
	if id == 0 || c.Len() != 1 {
		t.Fatalf("full fetch: id %d, %d sessions", id, c.Len())
	}
	x, err := c.Begin(Request{ID: id, Epoch: FinalEpoch, Partitions: []Partition{part("b", 0, 5)}})
	if err != nil {
		t.Fatalf("a sessionless fetch naming a session: %v (Kafka serves it)", err)
	}
	if got := keys(x.Partitions()); !slices.Equal(got, []Key{{Topic: "b"}}) {
		t.Fatalf("partitions %v, want only the named one", got)
	}
	if sid, include := x.Finish(results(1, 0)); sid != 0 || !include[0] {
		t.Fatalf("sessionless answer: session %d, include %v", sid, include)
	}
	if c.Len() != 0 {
		t.Fatalf("the named session stays open: %d sessions", c.Len())
	}
	if _, err := c.Begin(Request{ID: id, Epoch: 1}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("incremental fetch of the closed session: %v, want ErrSessionNotFound", err)
	}
}

func TestIncrementalFetchAnswersOnlyChanges(t *testing.T) {
	c, _ := newTestCache(10)
	parts := []Partition{part("a", 0, 0), part("a", 1, 0), part("b", 0, 0)}
	id := openSession(t, c, parts, false)

	x, err := c.Begin(Request{ID: id, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := keys(x.Partitions()); !slices.Equal(got, keys(parts)) {
		t.Fatalf("incremental fetch reads %v, want the whole session %v", got, keys(parts))
	}
	res := results(3, 10)
	res[1].HasRecords = true
	res[2].HighWatermark = 11
	sid, include := x.Finish(res)
	if sid != id || !slices.Equal(include, []bool{false, true, true}) {
		t.Fatalf("session %d include %v, want %d [false true true]", sid, include, id)
	}

	// Params replaced, one partition forgotten, one added.
	x, err = c.Begin(Request{ID: id, Epoch: 2, Partitions: []Partition{part("a", 1, 7), part("c", 0, 3)},
		Forgotten: []Key{{Topic: "a", Partition: 0}}})
	if err != nil {
		t.Fatal(err)
	}
	got := x.Partitions()
	want := []Partition{part("a", 1, 7), part("b", 0, 0), part("c", 0, 3)}
	if !slices.Equal(got, want) {
		t.Fatalf("session after update %+v, want %+v", got, want)
	}
	res = results(3, 10)
	res[1].HighWatermark = 11 // unchanged since last sent
	res[2].ErrorCode = 6
	if _, include := x.Finish(res); !slices.Equal(include, []bool{false, false, true}) {
		t.Fatalf("include %v, want only the new partition with an error", include)
	}

	// A new partition of a topic already in the session joins its topic.
	x, err = c.Begin(Request{ID: id, Epoch: 3, Partitions: []Partition{part("a", 2, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	want = []Partition{part("a", 1, 7), part("a", 2, 0), part("b", 0, 0), part("c", 0, 3)}
	if got := x.Partitions(); !slices.Equal(got, want) {
		t.Fatalf("session after adding a-2 %+v, want %+v (a topic's partitions adjacent)", got, want)
	}
	res = results(4, 10)
	res[2].HighWatermark = 11
	if _, include := x.Finish(res); !slices.Equal(include, []bool{false, true, false, true}) {
		t.Fatalf("include %v, want the new partition and c-0 (its error cleared)", include)
	}
}

func TestIncrementalFetchEpochs(t *testing.T) {
	c, _ := newTestCache(10)
	id := openSession(t, c, []Partition{part("a", 0, 0)}, false)
	if _, err := c.Begin(Request{ID: id + 1, Epoch: 1}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := c.Begin(Request{ID: id, Epoch: 2}); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("epoch ahead: %v", err)
	}
	if _, err := c.Begin(Request{ID: id, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(Request{ID: id, Epoch: 1}); !errors.Is(err, ErrInvalidEpoch) {
		t.Fatalf("epoch replayed: %v", err)
	}
	// A full fetch naming the session replaces it with a new one.
	x, err := c.Begin(Request{ID: id, Epoch: InitialEpoch, Partitions: []Partition{part("z", 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	newID, _ := x.Finish(results(1, 0))
	if newID == 0 || newID == id || c.Len() != 1 {
		t.Fatalf("re-initialised session: id %d (old %d), %d sessions", newID, id, c.Len())
	}
	if nextEpoch(1<<31-1) != 1 {
		t.Fatal("the epoch must wrap to 1")
	}
}

// Two requests racing with the same epoch: exactly one proceeds.
func TestConcurrentRequestsOnOneSession(t *testing.T) {
	c, _ := newTestCache(10)
	id := openSession(t, c, []Partition{part("a", 0, 0)}, false)
	for epoch := int32(1); epoch <= 50; epoch++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		ok := 0
		for range 4 {
			wg.Go(func() {
				if x, err := c.Begin(Request{ID: id, Epoch: epoch}); err == nil {
					x.Finish(results(1, int64(epoch)))
					mu.Lock()
					ok++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if ok != 1 {
			t.Fatalf("epoch %d: %d requests proceeded, want 1", epoch, ok)
		}
	}
}

func TestEviction(t *testing.T) {
	c, clk := newTestCache(2)
	small := openSession(t, c, []Partition{part("a", 0, 0)}, false)
	follower := openSession(t, c, []Partition{part("f", 0, 0)}, true)
	if small == 0 || follower == 0 {
		t.Fatal("free slots not used")
	}
	big := []Partition{part("b", 0, 0), part("b", 1, 0)}
	if id := openSession(t, c, big, false); id != 0 {
		t.Fatal("evicted a session younger than EvictAfter")
	}

	clk.t = clk.t.Add(30 * time.Second)
	if _, err := c.Begin(Request{ID: small, Epoch: 1}); err != nil { // small is used
		t.Fatal(err)
	}
	if _, err := c.Begin(Request{ID: follower, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(40 * time.Second) // both exist for 70 s, used 40 s ago: not stale
	if id := openSession(t, c, []Partition{part("c", 0, 0)}, false); id != 0 {
		t.Fatal("a consumer session of the same size evicted another")
	}
	bigID := openSession(t, c, big, false)
	if bigID == 0 {
		t.Fatal("a larger consumer session did not evict the smaller one")
	}
	if _, err := c.Begin(Request{ID: small, Epoch: 2}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("the evicted session still answers: %v", err)
	}
	if _, err := c.Begin(Request{ID: follower, Epoch: 2}); err != nil {
		t.Fatalf("the follower's session was evicted: %v", err)
	}

	// No consumer evicts a follower's session; a follower evicts a
	// consumer's once it is old enough.
	clk.t = clk.t.Add(61 * time.Second) // big is now old; follower was used 61 s ago: stale
	if _, err := c.Begin(Request{ID: follower, Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	huge := append(slices.Clone(big), part("b", 2, 0), part("b", 3, 0))
	if _, err := c.Begin(Request{ID: bigID, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	hugeID := openSession(t, c, huge, false)
	if hugeID == 0 {
		t.Fatal("a larger consumer session did not evict the smaller, old consumer session")
	}
	if id := openSession(t, c, huge[:1], false); id != 0 {
		t.Fatal("a small consumer session evicted something")
	}
	clk.t = clk.t.Add(61 * time.Second) // huge is old enough; both used just now
	if _, err := c.Begin(Request{ID: follower, Epoch: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Begin(Request{ID: hugeID, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	if id := openSession(t, c, []Partition{part("g", 0, 0)}, true); id == 0 {
		t.Fatal("a follower's session could not evict an old, larger consumer session")
	}
	if _, err := c.Begin(Request{ID: hugeID, Epoch: 2}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("the consumer session survived: %v", err)
	}
	if _, err := c.Begin(Request{ID: follower, Epoch: 5}); err != nil {
		t.Fatalf("the first follower's session was evicted: %v", err)
	}
}

func TestStaleSessionIsEvictedFirst(t *testing.T) {
	c, clk := newTestCache(1)
	old := openSession(t, c, []Partition{part("a", 0, 0), part("a", 1, 0)}, true)
	clk.t = clk.t.Add(61 * time.Second)
	if id := openSession(t, c, []Partition{part("b", 0, 0)}, false); id == 0 {
		t.Fatal("a stale session was not evicted")
	}
	if _, err := c.Begin(Request{ID: old, Epoch: 1}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("stale session: %v", err)
	}
}

func TestNoSessionsWhenSlotsNegative(t *testing.T) {
	c := NewCache(Config{Slots: -1})
	x, err := c.Begin(Request{Epoch: InitialEpoch, Partitions: []Partition{part("a", 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := x.Finish(results(1, 0)); id != 0 || c.Len() != 0 {
		t.Fatalf("session %d opened with sessions off", id)
	}
}

// The partitions cached across sessions stay within MaxPartitions: a
// session growing past it is closed, a full fetch larger than it gets no
// session, and closing frees the room.
func TestMaxPartitionsBound(t *testing.T) {
	c := NewCache(Config{Slots: 10, MaxPartitions: 4})
	three := []Partition{part("a", 0, 0), part("a", 1, 0), part("a", 2, 0)}
	id := openSession(t, c, three, false)
	if id == 0 {
		t.Fatal("a session within the bound was not opened")
	}
	if _, err := c.Begin(Request{ID: id, Epoch: 1, Partitions: []Partition{part("a", 0, 5)}}); err != nil {
		t.Fatalf("updating a partition it holds: %v", err)
	}
	if _, err := c.Begin(Request{ID: id, Epoch: 2, Partitions: []Partition{part("b", 0, 0), part("b", 1, 0)}}); !errors.Is(err, ErrSessionNotFound) {
		t.Fatalf("growing past the bound: %v, want the session closed", err)
	}
	if c.Len() != 0 {
		t.Fatalf("%d sessions after the close", c.Len())
	}
	five := append(slices.Clone(three), part("b", 0, 0), part("b", 1, 0))
	if id := openSession(t, c, five, false); id != 0 {
		t.Fatal("a full fetch larger than the bound opened a session")
	}
	if id := openSession(t, c, five[:4], false); id == 0 {
		t.Fatal("the room of the closed session was not freed")
	}
	if id := openSession(t, c, five[:1], false); id != 0 {
		t.Fatal("a second session passed the bound (nothing old enough to evict)")
	}
}
