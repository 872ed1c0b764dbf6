package tier

import (
	"testing"

	"github.com/strata-log/strata/metadata"
)

func manifestEntry(base, last int64, version int64) metadata.TierEntry {
	return metadata.TierEntry{TopicID: metadata.TopicID{1}, Partition: 2, BaseOffset: base, LastOffset: last,
		Key: "k", Size: 1, Version: version}
}

func TestManifestApplyFindRange(t *testing.T) {
	m := NewManifest()
	id := metadata.TopicID{1}
	put := func(e metadata.TierEntry) { m.Apply(metadata.Event{Kind: metadata.TierPut, Tier: &e}) }
	put(manifestEntry(100, 199, 2))
	put(manifestEntry(0, 99, 1))
	put(manifestEntry(300, 399, 3)) // a gap at 200..299
	if s, e, ok := m.Range(id, 2); !ok || s != 0 || e != 400 {
		t.Fatalf("range %d %d %v", s, e, ok)
	}
	if end, ok := m.ContiguousEnd(id, 2); !ok || end != 200 {
		t.Fatalf("contiguous end %d %v", end, ok)
	}
	for _, c := range []struct {
		offset   int64
		wantBase int64
		found    bool
	}{{0, 0, true}, {99, 0, true}, {150, 100, true}, {250, 300, true}, {399, 300, true}, {400, 0, false}} {
		e, ok := m.Find(id, 2, c.offset)
		if ok != c.found || (ok && e.BaseOffset != c.wantBase) {
			t.Errorf("Find(%d) = %d %v, want %d %v", c.offset, e.BaseOffset, ok, c.wantBase, c.found)
		}
	}
	if _, ok := m.Find(id, 3, 0); ok {
		t.Fatal("found in an unknown partition")
	}
	// Deleting raises the floor: a late (stale) put of the deleted entry is ignored.
	del := manifestEntry(0, 99, 4)
	m.Apply(metadata.Event{Kind: metadata.TierDeleted, Tier: &del})
	put(manifestEntry(0, 99, 1))
	if segs := m.Segments(id, 2); len(segs) != 2 || segs[0].BaseOffset != 100 {
		t.Fatalf("segments after delete %+v", segs)
	}
	m.Apply(metadata.Event{Kind: metadata.TierLogStartPut, TopicID: id, Partition: 2, TierLogStart: 150})
	m.SetLogStart(id, 2, 120) // never lowered
	if m.LogStart(id, 2) != 150 {
		t.Fatalf("log start %d", m.LogStart(id, 2))
	}
	// Entries wholly below the log start do not count, and a gap below it
	// is no gap: with [100,199] deleted by DeleteRecords to 250, [300,399]
	// alone is contiguous.
	m.SetLogStart(id, 2, 250)
	if end, ok := m.ContiguousEnd(id, 2); !ok || end != 400 {
		t.Fatalf("contiguous end above the log start: %d %v", end, ok)
	}
	if _, ok := m.Keys()["k"]; !ok {
		t.Fatal("keys")
	}
	m.Apply(metadata.Event{Kind: metadata.TopicDeleted, TopicID: id})
	if _, _, ok := m.Range(id, 2); ok || m.LogStart(id, 2) != 0 {
		t.Fatal("topic delete kept entries")
	}
}

func TestManifestLoadSnapshot(t *testing.T) {
	m := NewManifest()
	id := metadata.TopicID{1}
	m.Committed(manifestEntry(500, 599, 9))
	snap := metadata.Snapshot{
		Tier:          []metadata.TierEntry{manifestEntry(100, 199, 2), manifestEntry(0, 99, 1)},
		TierLogStarts: map[metadata.TierPartition]int64{{TopicID: id, Partition: 2}: 10},
	}
	m.LoadSnapshot(snap)
	segs := m.Segments(id, 2)
	if len(segs) != 2 || segs[0].BaseOffset != 0 || segs[1].BaseOffset != 100 || m.LogStart(id, 2) != 10 {
		t.Fatalf("after load %+v start %d", segs, m.LogStart(id, 2))
	}
	m.Load(nil)
	if _, _, ok := m.Range(id, 2); ok || m.LogStart(id, 2) != 10 {
		t.Fatal("Load(nil) must clear entries and keep log starts")
	}
}
