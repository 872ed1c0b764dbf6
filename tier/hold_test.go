package tier

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
)

// four objects of 100 bytes: offsets 0-9, 10-19, 20-29, 30-39; max
// timestamps at 0, 1000, 2000 and 3000 ms.
func holdEntries() []metadata.TierEntry {
	var out []metadata.TierEntry
	for i := int64(0); i < 4; i++ {
		out = append(out, metadata.TierEntry{BaseOffset: i * 10, LastOffset: i*10 + 9, MaxTimestamp: i * 1000, Size: 100})
	}
	return out
}

func TestHeldCount(t *testing.T) {
	const retentionMs = 60_000
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	cases := []struct {
		name   string
		floor  int
		n      int
		h      hold
		now    time.Time
		retain int64
		want   int
	}{
		{"need past the doomed: nothing held", 0, 2, hold{ms: 5000, need: 25}, at(62_000), retentionMs, 2},
		{"need in the first: all doomed held", 0, 3, hold{ms: 5000, need: 5}, at(62_500), retentionMs, 0},
		{"need in the second: the first goes", 0, 3, hold{ms: 5000, need: 15}, at(62_500), retentionMs, 1},
		// Entry 0 is due at 0+60000+5000: held one ms before, gone at.
		{"one ms before retention.ms + hold.ms", 0, 3, hold{ms: 5000, need: 5}, at(64_999), retentionMs, 0},
		{"at retention.ms + hold.ms", 0, 3, hold{ms: 5000, need: 5}, at(65_000), retentionMs, 1},
		{"later entries expire in turn", 0, 3, hold{ms: 5000, need: 5}, at(67_000), retentionMs, 3},
		{"retention.ms -1 (size retention): held hold.ms past the max timestamp", 0, 2, hold{ms: 5000, need: 5}, at(5000), -1, 1},
		// Byte cap: 300 bytes doomed and held, cap 150: the two oldest go.
		{"byte cap only", 0, 3, hold{bytes: 150, need: 5}, at(62_500), retentionMs, 2},
		{"byte cap within", 0, 3, hold{bytes: 300, need: 5}, at(62_500), retentionMs, 0},
		{"byte cap and time", 0, 3, hold{ms: 5000, bytes: 250, need: 5}, at(62_500), retentionMs, 1},
		{"below the log start always goes", 2, 3, hold{ms: 5000, need: 25}, at(62_500), retentionMs, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := heldCount(holdEntries(), c.floor, c.n, c.h, c.retain, c.now); got != c.want {
				t.Fatalf("deletable %d, want %d", got, c.want)
			}
		})
	}
}

func TestHoldFor(t *testing.T) {
	now := time.UnixMilli(100_000_000)
	ms := now.UnixMilli()
	holds := []metadata.RetentionHold{
		{Group: "fresh", Offset: 40, CommitMs: ms - 1000},
		{Group: "early", Offset: 25, CommitMs: ms - 5000},
		{Group: "stale", Offset: 5, CommitMs: ms - 2*3_600_000}, // older than the window
		{Group: "lost", Offset: 12, CommitMs: ms},               // below the log start
	}
	need, groups, ok := holdFor(holds, 20, time.Hour, now)
	if !ok || need != 25 {
		t.Fatalf("need %d ok %v, want 25", need, ok)
	}
	if want := []RetentionHolder{{"early", 25}, {"fresh", 40}}; !slices.Equal(groups, want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	if _, _, ok := holdFor(holds[2:], 20, time.Hour, now); ok {
		t.Fatal("stale and lost groups hold nothing")
	}
}

func TestHoldOf(t *testing.T) {
	c := Config{RetentionHold: time.Minute, RetentionHoldBytes: 1 << 20}
	unset := metadata.TopicConfig{CleanupPolicy: "delete", RetentionHoldMs: -1, RetentionHoldBytes: -1}
	if ms, b := c.HoldOf(unset); ms != 60_000 || b != 1<<20 || !c.Holds(unset) {
		t.Fatalf("broker defaults: %d ms %d B", ms, b)
	}
	off := metadata.TopicConfig{CleanupPolicy: "delete", RetentionHoldMs: 0, RetentionHoldBytes: 0}
	if c.Holds(off) {
		t.Fatal("a topic's 0s turn the hold off")
	}
	compacted := metadata.TopicConfig{CleanupPolicy: "compact", RetentionHoldMs: 1000, RetentionHoldBytes: -1}
	if c.Holds(compacted) {
		t.Fatal("compact-only topics have no retention to hold")
	}
}

// Remote retention keeps the objects a group needs until the hold expires,
// shows them in Status, and deletes nothing that may be held when the
// holds cannot be read.
func TestServiceRetentionHold(t *testing.T) {
	f := newServiceFixture(t, Config{})
	f.appendBatches(t, 20) // records at 1000-1002 ms
	ctx := context.Background()
	if err := f.svc.UploadPartition(ctx, f.part); err != nil {
		t.Fatal(err)
	}
	objects := len(f.man.Segments(testTopicID, 0))
	f.part.cfg.RetentionMs, f.part.cfg.RetentionHoldMs, f.part.cfg.RetentionHoldBytes = 1, 600_000, -1
	now := time.UnixMilli(300_000) // past retention.ms, within the hold
	f.store.holdsErr = errors.New("etcd down")
	f.svc.ApplyRetention(ctx, now)
	if n := len(f.man.Segments(testTopicID, 0)); n != objects {
		t.Fatalf("%d of %d entries left while the holds were unreadable", n, objects)
	}
	f.store.holdsErr = nil
	f.store.holds = []metadata.RetentionHold{{TopicID: testTopicID, Partition: 0, Group: "g", Offset: 0, CommitMs: now.UnixMilli()}}
	f.svc.ApplyRetention(ctx, now)
	if n := len(f.man.Segments(testTopicID, 0)); n != objects {
		t.Fatalf("%d of %d entries left: a held object was deleted", n, objects)
	}
	held := f.svc.Status(f.part).Held
	if held.Objects != objects || held.Bytes == 0 || len(held.By) != 1 || held.By[0].Group != "g" {
		t.Fatalf("status shows held %+v, want %d objects held by g", held, objects)
	}
	// The hold expires at max timestamp + retention.ms + hold.ms.
	later := time.UnixMilli(1002 + 1 + 600_000)
	f.store.holds[0].CommitMs = later.UnixMilli()
	f.svc.ApplyRetention(ctx, later)
	if n := len(f.man.Segments(testTopicID, 0)); n != 0 {
		t.Fatalf("%d entries left after the hold expired", n)
	}
	if held := f.svc.Status(f.part).Held; held.Objects != 0 {
		t.Fatalf("status still shows held %+v", held)
	}
}
