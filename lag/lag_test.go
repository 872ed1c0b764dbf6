package lag

import (
	"math"
	"testing"
	"time"
)

var now = time.UnixMilli(10_000_000)

// three segments of 100 bytes: offsets 0-9, 10-19, 20-29, max timestamps
// 1000 s, 500 s and 100 s before now.
func threeSegments() []Segment {
	ms := now.UnixMilli()
	return []Segment{
		{BaseOffset: 0, LastOffset: 9, MaxTimestamp: ms - 1_000_000, Bytes: 100},
		{BaseOffset: 10, LastOffset: 19, MaxTimestamp: ms - 500_000, Bytes: 100},
		{BaseOffset: 20, LastOffset: 29, MaxTimestamp: ms - 100_000, Bytes: 100},
	}
}

func TestRetentionMarginByTime(t *testing.T) {
	p := Partition{HighWatermark: 30, Segments: threeSegments(), Delete: true, RetentionMs: 3_600_000, RetentionBytes: -1}
	cases := []struct {
		committed int64
		seconds   float64
	}{
		{0, 3600 - 1000}, {9, 3600 - 1000}, {10, 3600 - 500}, {25, 3600 - 100},
		{30, 3600}, // caught up: the next record lives retention.ms
	}
	for _, c := range cases {
		m := RetentionMargin(p, c.committed, now)
		if !m.Limited || m.Lost || m.Seconds != c.seconds || m.Bytes != math.MaxInt64 {
			t.Errorf("committed %d: %+v, want %v s and no byte limit", c.committed, m, c.seconds)
		}
	}
	// A retention hold adds its time.
	held := p
	held.HoldMs = 600_000
	if m := RetentionMargin(held, 0, now); m.Seconds != 3600-1000+600 {
		t.Errorf("held: %+v, want the hold's 600 s more", m)
	}
	// Past due (retention is about to run): never negative.
	p.RetentionMs = 600_000
	if m := RetentionMargin(p, 0, now); m.Seconds != 0 || m.Lost {
		t.Errorf("past-due segment: %+v, want 0 s, not lost yet", m)
	}
}

func TestRetentionMarginBySize(t *testing.T) {
	p := Partition{HighWatermark: 30, Segments: threeSegments(), Delete: true, RetentionMs: -1, RetentionBytes: 250}
	// The first segment goes once the rest (200 B) is >= 250: 50 B more.
	if m := RetentionMargin(p, 5, now); m.Bytes != 50 || !math.IsInf(m.Seconds, 1) {
		t.Errorf("no produce: %+v, want 50 B and no time limit", m)
	}
	p.BytesPerSecond = 10
	if m := RetentionMargin(p, 5, now); m.Bytes != 50 || m.Seconds != 5 {
		t.Errorf("10 B/s: %+v, want 50 B, 5 s", m)
	}
	if m := RetentionMargin(p, 15, now); m.Bytes != 150 || m.Seconds != 15 {
		t.Errorf("second segment at 10 B/s: %+v, want 150 B, 15 s", m)
	}
	if m := RetentionMargin(p, 30, now); m.Bytes != 250 {
		t.Errorf("caught up: %+v, want the whole retention.bytes", m)
	}
	// Both rules: the earlier wins.
	p.RetentionMs = 3_600_000
	if m := RetentionMargin(p, 5, now); m.Seconds != 5 {
		t.Errorf("both rules: %+v, want the size rule's 5 s", m)
	}
}

func TestRetentionMarginNotApplicable(t *testing.T) {
	compacted := Partition{HighWatermark: 30, Segments: threeSegments(), RetentionMs: 1000, RetentionBytes: 10}
	if m := RetentionMargin(compacted, 0, now); m.Limited {
		t.Errorf("compact-only topic: %+v, want no limit", m)
	}
	unlimited := Partition{HighWatermark: 30, Segments: threeSegments(), Delete: true, RetentionMs: -1, RetentionBytes: -1}
	if m := RetentionMargin(unlimited, 0, now); m.Limited || !math.IsInf(m.Seconds, 1) {
		t.Errorf("retention.ms=-1, retention.bytes=-1: %+v, want no limit", m)
	}
}

func TestRetentionMarginLostAndEmpty(t *testing.T) {
	p := Partition{LogStart: 10, HighWatermark: 30, Segments: threeSegments()[1:], Delete: true, RetentionMs: 3_600_000, RetentionBytes: -1}
	if m := RetentionMargin(p, 4, now); !m.Lost || m.Seconds != 0 {
		t.Errorf("below the log start: %+v, want lost", m)
	}
	empty := Partition{LogStart: 7, HighWatermark: 7, Delete: true, RetentionMs: 60_000, RetentionBytes: 1000}
	if m := RetentionMargin(empty, 7, now); m.Lost || m.Seconds != 60 || m.Bytes != 1000 {
		t.Errorf("empty partition: %+v, want 60 s and 1000 B", m)
	}
}

func TestRecordsAndSeconds(t *testing.T) {
	if Records(5, 30) != 25 || Records(30, 30) != 0 || Records(40, 30) != 0 {
		t.Error("records behind")
	}
	ts := now.UnixMilli() - 90_000
	if got := Seconds(5, 30, ts, now); got != 90 {
		t.Errorf("seconds behind %v, want 90", got)
	}
	if Seconds(30, 30, ts, now) != 0 || Seconds(5, 30, 0, now) != 0 || Seconds(5, 30, now.UnixMilli()+5000, now) != 0 {
		t.Error("caught up, unknown timestamp and a future timestamp are 0 s behind")
	}
}

func TestRate(t *testing.T) {
	r := Rate{HalfLife: time.Minute}
	at := now
	if got := r.Observe(at, 0, 0, 0); got != 0 {
		t.Fatalf("one sample: %v, want 0", got)
	}
	// 100 records/s of 50 bytes.
	at = at.Add(10 * time.Second)
	if got := r.Observe(at, 1000, 50_000, 1000); got != 5000 {
		t.Fatalf("second sample: %v B/s, want 5000", got)
	}
	// Produce stops: the estimate halves after one half-life.
	at = at.Add(time.Minute)
	if got := r.Observe(at, 1000, 50_000, 1000); math.Abs(got-2500) > 1e-6 {
		t.Fatalf("a half-life idle: %v B/s, want 2500", got)
	}
	// Same instant: unchanged.
	if got := r.Observe(at, 1000, 50_000, 1000); math.Abs(got-2500) > 1e-6 {
		t.Fatalf("same instant: %v", got)
	}
	// The log was recreated (end went backwards): start over.
	at = at.Add(time.Second)
	if got := r.Observe(at, 3, 150, 3); got != 0 {
		t.Fatalf("recreated log: %v, want 0", got)
	}
}
