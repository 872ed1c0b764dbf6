package tier

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
)

// holdEntries are four objects of 100 bytes: offsets 0-9, 10-19, 20-29 and
// 30-39, with newest records at 0, 1000, 2000 and 3000 ms.
func holdEntries() []metadata.TierEntry {
	var out []metadata.TierEntry
	for i := int64(0); i < 4; i++ {
		out = append(out, metadata.TierEntry{BaseOffset: i * 10, LastOffset: i*10 + 9, MaxTimestamp: i * 1000, Size: 100})
	}
	return out
}

// committed is a hold committed ageMs before the test's now.
type committed struct {
	group  string
	offset int64
	ageMs  int64
}

func TestDecideHold(t *testing.T) {
	const retentionMs = 60_000
	timed := holdRule{ms: 5000, retentionMs: retentionMs, window: time.Hour}
	capped := holdRule{bytes: 150, retentionMs: retentionMs, window: time.Hour}
	g := func(offset int64) []committed { return []committed{{"g", offset, 0}} }
	cases := []struct {
		name     string
		doomed   int
		logStart int64
		holds    []committed
		rule     holdRule
		nowMs    int64
		want     int
		wantHeld HeldStatus // checked when wantHeld.Objects > 0
	}{
		{name: "no group: every doomed entry goes", doomed: 3, rule: timed, nowMs: 62_500, want: 3},
		{name: "group past the doomed entries: nothing held", doomed: 2, holds: g(25), rule: timed, nowMs: 62_500, want: 2},
		{name: "group in the first entry: every doomed entry held", doomed: 3, holds: g(5), rule: timed, nowMs: 62_500, want: 0,
			wantHeld: HeldStatus{Objects: 3, Bytes: 300, By: []RetentionHolder{{"g", 5}}}},
		{name: "group in the second entry: the first goes", doomed: 3, holds: g(15), rule: timed, nowMs: 62_500, want: 1},
		{name: "group at an entry's first offset holds it", doomed: 3, holds: g(10), rule: timed, nowMs: 62_500, want: 1},
		{name: "the lowest group counts; both are named", doomed: 3, holds: []committed{{"b", 25, 0}, {"a", 15, 0}},
			rule: timed, nowMs: 62_500, want: 1,
			wantHeld: HeldStatus{Objects: 2, Bytes: 200, By: []RetentionHolder{{"a", 15}, {"b", 25}}}},
		{name: "a group past the held entries is not named", doomed: 2, holds: []committed{{"a", 5, 0}, {"b", 35, 0}},
			rule: timed, nowMs: 62_500, want: 0, wantHeld: HeldStatus{Objects: 2, Bytes: 200, By: []RetentionHolder{{"a", 5}}}},
		// Entry 0 is released at 0 + retention.ms 60000 + hold.ms 5000.
		{name: "one ms before retention.ms + hold.ms: held", doomed: 3, holds: g(5), rule: timed, nowMs: 64_999, want: 0},
		{name: "at retention.ms + hold.ms: released", doomed: 3, holds: g(5), rule: timed, nowMs: 65_000, want: 1},
		{name: "later entries are released in turn", doomed: 3, holds: g(5), rule: timed, nowMs: 66_000, want: 2},
		{name: "all released once the last is due", doomed: 3, holds: g(5), rule: timed, nowMs: 67_000, want: 3},
		// 300 bytes held, cap 150: the two oldest go, 100 bytes stay.
		{name: "byte cap: oldest released until within", doomed: 3, holds: g(5), rule: capped, nowMs: 1 << 40, want: 2,
			wantHeld: HeldStatus{Objects: 1, Bytes: 100, By: []RetentionHolder{{"g", 5}}}},
		{name: "byte cap exactly met: all held", doomed: 3, holds: g(5), rule: holdRule{bytes: 300, retentionMs: retentionMs, window: time.Hour},
			nowMs: 1 << 40, want: 0},
		{name: "byte cap and time: the first bound to release wins", doomed: 3, holds: g(5),
			rule: holdRule{ms: 5000, bytes: 250, retentionMs: retentionMs, window: time.Hour}, nowMs: 62_500, want: 1},
		{name: "byte cap and time: time releases within the cap", doomed: 3, holds: g(5),
			rule: holdRule{ms: 5000, bytes: 1000, retentionMs: retentionMs, window: time.Hour}, nowMs: 65_000, want: 1},
		{name: "both bounds off: nothing held", doomed: 3, holds: g(5), rule: holdRule{retentionMs: retentionMs, window: time.Hour},
			nowMs: 62_500, want: 3},
		{name: "a group below the log start holds nothing", doomed: 3, logStart: 20, holds: g(5), rule: timed, nowMs: 62_500, want: 3},
		{name: "a group below the log start is passed over for one above", doomed: 3, logStart: 20,
			holds: []committed{{"lost", 5, 0}, {"g", 25, 0}}, rule: timed, nowMs: 62_500, want: 2,
			wantHeld: HeldStatus{Objects: 1, Bytes: 100, By: []RetentionHolder{{"g", 25}}}},
		{name: "a stale group holds nothing", doomed: 3, holds: []committed{{"g", 5, 3_600_001}}, rule: timed, nowMs: 62_500, want: 3},
		{name: "a group committed exactly a window ago still holds", doomed: 3, holds: []committed{{"g", 5, 3_600_000}},
			rule: timed, nowMs: 62_500, want: 0},
		// DeleteRecords moved the log start to 20: entries 0 and 1 go at once.
		{name: "below the log start (DeleteRecords) never held", doomed: 2, logStart: 20, holds: g(20), rule: timed, nowMs: 0, want: 2},
		{name: "below the log start goes, the rest is held", doomed: 4, logStart: 20, holds: g(20),
			rule: holdRule{ms: 1 << 40, retentionMs: retentionMs, window: time.Hour}, nowMs: 62_500, want: 2},
		// retention.ms -1: retention.bytes doomed the entries; the hold
		// time counts from the newest record.
		{name: "retention.ms -1 with a byte cap", doomed: 3, holds: g(5), rule: holdRule{bytes: 150, retentionMs: -1, window: time.Hour},
			nowMs: 62_500, want: 2},
		{name: "retention.ms -1 with hold.ms", doomed: 3, holds: g(5), rule: holdRule{ms: 5000, retentionMs: -1, window: time.Hour},
			nowMs: 5000, want: 1},
		{name: "huge hold.ms does not wrap", doomed: 3, holds: g(5), rule: holdRule{ms: 1<<63 - 1, retentionMs: retentionMs, window: time.Hour},
			nowMs: 1 << 50, want: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := time.UnixMilli(c.nowMs)
			var holds []metadata.RetentionHold
			for _, h := range c.holds {
				holds = append(holds, metadata.RetentionHold{Group: h.group, Offset: h.offset, CommitMs: c.nowMs - h.ageMs})
			}
			d := decideHold(holdEntries(), c.doomed, c.logStart, holds, c.rule, now)
			if d.deletable != c.want {
				t.Fatalf("deletable %d, want %d", d.deletable, c.want)
			}
			if d.held.Objects != c.doomed-c.want {
				t.Fatalf("held %+v, want %d objects", d.held, c.doomed-c.want)
			}
			if c.wantHeld.Objects > 0 && !reflect.DeepEqual(d.held, c.wantHeld) {
				t.Fatalf("held %+v, want %+v", d.held, c.wantHeld)
			}
		})
	}
}

func TestEffectiveHold(t *testing.T) {
	broker := Config{RetentionHold: time.Minute, RetentionHoldBytes: 1 << 20}
	topic := func(policy string, ms, bytes int64) metadata.TopicConfig {
		return metadata.TopicConfig{CleanupPolicy: policy, RetentionHoldMs: ms, RetentionHoldBytes: bytes}
	}
	cases := []struct {
		name          string
		broker        Config
		topic         metadata.TopicConfig
		wantMs, wantB int64
		wantHolds     bool
	}{
		{"unset: the broker's defaults", broker, topic("delete", -1, -1), 60_000, 1 << 20, true},
		{"the topic's 0s turn it off", broker, topic("delete", 0, 0), 0, 0, false},
		{"the topic's own time, the broker's bytes", broker, topic("delete", 5000, -1), 5000, 1 << 20, true},
		{"time only", Config{}, topic("delete", 5000, -1), 5000, 0, true},
		{"bytes only", Config{}, topic("compact,delete", -1, 100), 0, 100, true},
		{"broker defaults off", Config{}, topic("delete", -1, -1), 0, 0, false},
		{"compact-only topics have no retention to hold", broker, topic("compact", 1000, -1), 1000, 1 << 20, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ms, b := c.broker.EffectiveHold(c.topic)
			if ms != c.wantMs || b != c.wantB || c.broker.Holds(c.topic) != c.wantHolds {
				t.Fatalf("EffectiveHold %d ms %d B, Holds %v; want %d ms %d B, %v", ms, b, c.broker.Holds(c.topic),
					c.wantMs, c.wantB, c.wantHolds)
			}
		})
	}
}

// Remote retention deletes the entries before a group's committed offset,
// keeps the rest until retention.ms + retention.hold.ms (shown in Status),
// then deletes them; it reads the holds once per pass and only for a held
// topic.
func TestServiceRetentionHold(t *testing.T) {
	f := newServiceFixture(t, Config{})
	f.appendBatches(t, 20) // records at 1000-1002 ms
	ctx := context.Background()
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	entries := f.man.Segments(testTopicID, 0)
	if len(entries) < 4 {
		t.Fatalf("%d entries; the test needs several", len(entries))
	}
	const holdMs = 600_000
	f.part.cfg.RetentionMs, f.part.cfg.RetentionHoldMs, f.part.cfg.RetentionHoldBytes = 1, holdMs, -1
	now := time.UnixMilli(300_000) // every record is past retention.ms
	need := entries[2].BaseOffset + 1
	f.store.holds = []metadata.RetentionHold{{TopicID: testTopicID, Partition: 0, Group: "g", Offset: need, CommitMs: now.UnixMilli()}}
	f.svc.ApplyRetention(ctx, now)
	if left := f.man.Segments(testTopicID, 0); len(left) != len(entries)-2 || left[0].BaseOffset != entries[2].BaseOffset {
		t.Fatalf("%d of %d entries left, want all from the group's (offset %d) on", len(left), len(entries), need)
	}
	if f.store.holdReads != 1 {
		t.Fatalf("holds read %d times in one pass", f.store.holdReads)
	}
	held := f.svc.Status(f.part).Held
	if held.Objects != len(entries)-2 || held.Bytes == 0 || !reflect.DeepEqual(held.By, []RetentionHolder{{"g", need}}) {
		t.Fatalf("status shows held %+v, want %d objects held by g", held, len(entries)-2)
	}

	// The hold expires at the newest record (1002 ms) + retention.ms + hold.ms.
	expiry := time.UnixMilli(1002 + 1 + holdMs)
	f.store.holds[0].CommitMs = expiry.UnixMilli()
	f.svc.ApplyRetention(ctx, expiry.Add(-time.Millisecond))
	if n := len(f.man.Segments(testTopicID, 0)); n != len(entries)-2 {
		t.Fatalf("%d entries left one ms before the hold expires", n)
	}
	f.svc.ApplyRetention(ctx, expiry)
	if n := len(f.man.Segments(testTopicID, 0)); n != 0 {
		t.Fatalf("%d entries left after the hold expired", n)
	}
	if held := f.svc.Status(f.part).Held; held.Objects != 0 {
		t.Fatalf("status still shows held %+v", held)
	}
}

// A topic without a hold never reads the holds, even with holds published.
func TestServiceRetentionWithoutHoldReadsNoHolds(t *testing.T) {
	f := newServiceFixture(t, Config{})
	f.appendBatches(t, 20)
	ctx := context.Background()
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	f.part.cfg.RetentionMs, f.part.cfg.RetentionHoldMs, f.part.cfg.RetentionHoldBytes = 1, -1, -1 // broker default: off
	f.store.holds = []metadata.RetentionHold{{TopicID: testTopicID, Partition: 0, Group: "g", Offset: 0, CommitMs: 300_000}}
	f.svc.ApplyRetention(ctx, time.UnixMilli(300_000))
	if n := len(f.man.Segments(testTopicID, 0)); n != 0 || f.store.holdReads != 0 {
		t.Fatalf("%d entries left, holds read %d times; want all gone, none read", n, f.store.holdReads)
	}
}

// A pass that cannot read the holds deletes only what lies below the log
// start, and counts the failure once.
func TestServiceRetentionHoldFailsSafe(t *testing.T) {
	f := newServiceFixture(t, Config{})
	f.appendBatches(t, 20)
	ctx := context.Background()
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	entries := f.man.Segments(testTopicID, 0)
	f.part.cfg.RetentionMs, f.part.cfg.RetentionHoldMs = 1, 600_000
	f.store.holdsErr = errors.New("etcd unreachable")
	now := time.UnixMilli(300_000)
	f.svc.ApplyRetention(ctx, now)
	if n := len(f.man.Segments(testTopicID, 0)); n != len(entries) {
		t.Fatalf("%d of %d entries left while the holds were unreadable", n, len(entries))
	}
	if c := f.svc.Counters(); c.RetentionHoldReadFailures != 1 || f.store.holdReads != 1 {
		t.Fatalf("counters %+v, %d reads; want one failed read", c, f.store.holdReads)
	}
	if held := f.svc.Status(f.part).Held; held.Objects != len(entries) || len(held.By) != 0 {
		t.Fatalf("status shows held %+v, want every entry, no group named", held)
	}
	// DeleteRecords past the first two entries: they go whatever the holds.
	if err := f.svc.DeleteRecords(ctx, f.part, entries[1].LastOffset+1); err != nil {
		t.Fatal(err)
	}
	if left := f.man.Segments(testTopicID, 0); len(left) != len(entries)-2 {
		t.Fatalf("%d of %d entries left after DeleteRecords with the holds unreadable", len(left), len(entries))
	}
}
