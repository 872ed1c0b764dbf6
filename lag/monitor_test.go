package lag

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

type fakeSource struct {
	offsets    []Committed
	parts      map[string]Partition // by topic, partition 0
	logEnd     int64
	tsLookups  int
	timestamps map[int64]int64
}

func (f *fakeSource) CommittedOffsets() []Committed { return f.offsets }

func (f *fakeSource) Partition(topic string, partition int32) (Partition, int64, bool) {
	p, ok := f.parts[topic]
	return p, f.logEnd, ok && partition == 0
}

func (f *fakeSource) RecordTimestamp(_ string, _ int32, offset int64) (int64, bool) {
	f.tsLookups++
	ts, ok := f.timestamps[offset]
	return ts, ok
}

func TestMonitor(t *testing.T) {
	at := time.UnixMilli(50_000_000)
	ms := at.UnixMilli()
	src := &fakeSource{
		offsets: []Committed{
			{Group: "slow", Topic: "t", Offset: 5},
			{Group: "fast", Topic: "t", Offset: 30},
			{Group: "elsewhere", Topic: "not-here", Offset: 1},
		},
		parts: map[string]Partition{"t": {HighWatermark: 30, Delete: true, RetentionMs: 3_600_000, RetentionBytes: -1,
			Segments: []Segment{{0, 9, ms - 3_000_000, 100}, {10, 29, ms - 60_000, 100}}}},
		logEnd:     30,
		timestamps: map[int64]int64{5: ms - 3_100_000},
	}
	var logs bytes.Buffer
	m := NewMonitor(MonitorConfig{WarnMargin: time.Hour, WarnEvery: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, src)
	m.Refresh(at)
	got := m.Series()
	if len(got) != 2 {
		t.Fatalf("series %+v, want the two groups of the partition held here", got)
	}
	slow, fast := got[0], got[1]
	if slow.Records != 25 || slow.Seconds != 3100 || slow.Margin.Seconds != 600 {
		t.Fatalf("slow group %+v, want 25 records, 3100 s behind, 600 s margin", slow)
	}
	if fast.Records != 0 || fast.Seconds != 0 || fast.Margin.Seconds != 3600 {
		t.Fatalf("caught-up group %+v", fast)
	}
	if n := strings.Count(logs.String(), "will lose data"); n != 1 || !strings.Contains(logs.String(), "group=slow") {
		t.Fatalf("want one warning for the slow group, got:\n%s", logs.String())
	}

	// Within WarnEvery: no new warning; the timestamp comes from the cache.
	m.Refresh(at.Add(10 * time.Second))
	if n := strings.Count(logs.String(), "will lose data"); n != 1 {
		t.Fatalf("warned again within WarnEvery:\n%s", logs.String())
	}
	if src.tsLookups != 1 {
		t.Fatalf("%d timestamp lookups, want 1 (cached while the offset stays)", src.tsLookups)
	}
	if m.Series()[0].Margin.Seconds != 590 {
		t.Fatalf("margin did not count down: %+v", m.Series()[0])
	}
	m.Refresh(at.Add(2 * time.Minute))
	if n := strings.Count(logs.String(), "will lose data"); n != 2 {
		t.Fatalf("no warning after WarnEvery:\n%s", logs.String())
	}

	// The log start passes the slow group: lost, logged at once.
	p := src.parts["t"]
	p.LogStart, p.Segments = 10, p.Segments[1:]
	src.parts["t"] = p
	m.Refresh(at.Add(2*time.Minute + time.Second))
	if !m.Series()[0].Margin.Lost || !strings.Contains(logs.String(), "has lost data") {
		t.Fatalf("lost data not reported: %+v\n%s", m.Series()[0], logs.String())
	}
}

func TestMonitorBoundsSeries(t *testing.T) {
	src := &fakeSource{parts: map[string]Partition{"t": {HighWatermark: 10}}, logEnd: 10}
	for range 5 {
		src.offsets = append(src.offsets, Committed{Group: "g", Topic: "t"})
	}
	var logs bytes.Buffer
	m := NewMonitor(MonitorConfig{MaxSeries: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, src)
	m.Refresh(time.Now())
	if len(m.Series()) != 3 || !strings.Contains(logs.String(), "too many") {
		t.Fatalf("%d series, logs %q: want 3 and a warning", len(m.Series()), logs.String())
	}
}
