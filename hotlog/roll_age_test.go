package hotlog

import (
	"testing"
	"time"
)

func TestRollIfOlder(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(5_000_000)}
	cfg := testConfig(t, t.TempDir())
	cfg.Now, cfg.SegmentBytes = clock.Now, 1<<20
	l := mustOpen(t, cfg)
	defer l.Close()
	age := 30 * time.Second

	if rolled, err := l.RollIfOlder(clock.Now().Add(time.Hour), age, 100); rolled || err != nil {
		t.Fatalf("empty active segment rolled: %v %v", rolled, err)
	}
	res := mustAppend(t, l, simpleBatch(t, 5, clock.Now().UnixMilli(), 10), 1)
	end := res.LastOffset + 1
	if rolled, _ := l.RollIfOlder(clock.Now().Add(age-time.Millisecond), age, end); rolled {
		t.Fatal("rolled before the age")
	}
	if rolled, _ := l.RollIfOlder(clock.Now().Add(age), age, 0); rolled {
		t.Fatal("rolled a segment with nothing below the stable end")
	}
	if at, ok := l.FirstAppendAt(res.BaseOffset + 2); !ok || at != clock.Now().UnixMilli() {
		t.Fatalf("first append of the active segment: %d %v", at, ok)
	}
	clock.Advance(age)
	rolled, err := l.RollIfOlder(clock.Now(), age, end)
	if !rolled || err != nil {
		t.Fatalf("old committed data did not roll: %v %v", rolled, err)
	}
	sealed := l.SealedSegments()
	if len(sealed) != 1 || sealed[0].NextOffset != end {
		t.Fatalf("sealed %+v, want one segment ending at %d", sealed, end)
	}
	if _, ok := l.ProducerSnapshotAt(end); !ok {
		t.Fatal("no producer snapshot at the roll point")
	}
	if rolled, _ := l.RollIfOlder(clock.Now().Add(time.Hour), age, end); rolled {
		t.Fatal("the new, empty active segment rolled")
	}
	if _, ok := l.FirstAppendAt(end); ok {
		t.Fatal("FirstAppendAt past the log end")
	}
}

// TestFirstAppendAtDatesTheRecord: in a segment that has taken appends for
// long, a recent record is dated by its own arrival (within a second), not
// by the segment's first append, as a follower's segment is when the
// follower becomes leader.
func TestFirstAppendAtDatesTheRecord(t *testing.T) {
	clock := &fakeClock{now: time.UnixMilli(5_000_000)}
	cfg := testConfig(t, t.TempDir())
	cfg.Now, cfg.SegmentBytes = clock.Now, 1<<20
	l := mustOpen(t, cfg)
	defer l.Close()
	var last AppendResult
	for range 300 { // five minutes of appends, one every second
		last = mustAppend(t, l, simpleBatch(t, 1, clock.Now().UnixMilli(), 10), 1)
		clock.Advance(time.Second)
	}
	at, ok := l.FirstAppendAt(last.BaseOffset)
	if want := clock.Now().Add(-time.Second).UnixMilli(); !ok || at != want {
		t.Fatalf("last record dated %d, want its arrival %d", at, want)
	}
	if at, _ := l.FirstAppendAt(0); at != 5_000_000 {
		t.Fatalf("first record dated %d, want 5000000", at)
	}
	if n := len(l.mu.segments[0].arrivals.samples); n > maxArrivals {
		t.Fatalf("%d samples kept, at most %d", n, maxArrivals)
	}
	// Thinned but still in order: every record is dated at or before its
	// arrival.
	for off := int64(0); off <= last.BaseOffset; off += 37 {
		if at, _ := l.FirstAppendAt(off); at > 5_000_000+off*1000 {
			t.Fatalf("record %d dated %d, after its arrival %d", off, at, 5_000_000+off*1000)
		}
	}
}
