package tier

import (
	"testing"

	"github.com/strata-log/strata/metadata"
)

func mEntry(base, last, version int64, key string) metadata.TierEntry {
	return metadata.TierEntry{TopicID: testTopicID, Partition: 3, BaseOffset: base, LastOffset: last,
		LeaderEpoch: 1, Key: key, Size: 100, Version: version}
}

// swapEvents are the watch events of metadata.SwapTierEntriesRev, in its
// operation order: puts of new keys, puts over reused keys, deletes.
func swapEvents(olds, news []metadata.TierEntry, rev int64) []metadata.Event {
	oldBases, newBases := map[int64]bool{}, map[int64]bool{}
	for _, e := range olds {
		oldBases[e.BaseOffset] = true
	}
	var fresh, reused, deletes []metadata.Event
	for _, e := range news {
		e.Version = rev
		newBases[e.BaseOffset] = true
		ev := metadata.Event{Kind: metadata.TierPut, TopicID: e.TopicID, Partition: e.Partition, Tier: &e, Revision: rev}
		if oldBases[e.BaseOffset] {
			reused = append(reused, ev)
		} else {
			fresh = append(fresh, ev)
		}
	}
	for _, e := range olds {
		if !newBases[e.BaseOffset] {
			e := e
			deletes = append(deletes, metadata.Event{Kind: metadata.TierDeleted, TopicID: e.TopicID, Partition: e.Partition, Tier: &e, Revision: rev})
		}
	}
	return append(append(fresh, reused...), deletes...)
}

// checkNoGap: every offset of [from, to) is in the entry Find returns.
func checkNoGap(t *testing.T, m *Manifest, from, to int64, step string) {
	t.Helper()
	for o := from; o < to; o++ {
		e, ok := m.Find(testTopicID, 3, o)
		if !ok || e.BaseOffset > o || e.LastOffset < o {
			t.Fatalf("%s: offset %d found in %+v (%v)", step, o, e, ok)
		}
	}
	if start, end, ok := m.Range(testTopicID, 3); !ok || start != from || end != to {
		t.Fatalf("%s: range [%d, %d) %v", step, start, end, ok)
	}
	if end, ok := m.ContiguousEnd(testTopicID, 3); !ok || end != to {
		t.Fatalf("%s: contiguous end %d %v, want %d", step, end, ok, to)
	}
}

func keysOf(entries []metadata.TierEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Key)
	}
	return out
}

// TestManifestSwapEventsNeverGap applies two swaps' watch events one by one
// (the first reuses a base with a shorter entry, the second lands below
// the offsets the first deleted) and checks after every event that every
// offset is still covered, and at the end the exact entries.
func TestManifestSwapEventsNeverGap(t *testing.T) {
	olds := []metadata.TierEntry{mEntry(0, 99, 1, "o1"), mEntry(100, 199, 2, "o2"), mEntry(200, 299, 3, "o3")}
	tail := mEntry(300, 399, 4, "o4")
	m := NewManifest()
	m.Load(append(append([]metadata.TierEntry(nil), olds...), tail))
	news := []metadata.TierEntry{mEntry(0, 49, 0, "n1"), mEntry(50, 249, 0, "n2"), mEntry(250, 299, 0, "n3")}
	for i, ev := range swapEvents(olds, news, 10) {
		m.Apply(ev)
		checkNoGap(t, m, 0, 400, "swap 1 event "+string(rune('0'+i)))
	}
	if got := keysOf(m.Segments(testTopicID, 3)); len(got) != 4 || got[0] != "n1" || got[1] != "n2" || got[2] != "n3" || got[3] != "o4" {
		t.Fatalf("after swap 1: %v", got)
	}
	// A second swap below the offsets swap 1 deleted: not a stale put.
	olds2 := m.Segments(testTopicID, 3)[:2]
	news2 := []metadata.TierEntry{mEntry(0, 249, 0, "m1")}
	for i, ev := range swapEvents(olds2, news2, 20) {
		m.Apply(ev)
		checkNoGap(t, m, 0, 400, "swap 2 event "+string(rune('0'+i)))
	}
	if got := keysOf(m.Segments(testTopicID, 3)); len(got) != 3 || got[0] != "m1" || got[1] != "n3" {
		t.Fatalf("after swap 2: %v", got)
	}
}

// TestManifestSwappedThenLateEvents: the compacting broker applies its swap
// at once; the watch then delivers older commits and the swap's own
// events, none of which may bring an old entry back or drop a new one.
func TestManifestSwappedThenLateEvents(t *testing.T) {
	olds := []metadata.TierEntry{mEntry(0, 99, 1, "o1"), mEntry(100, 199, 2, "o2")}
	m := NewManifest()
	m.Load(olds)
	news := []metadata.TierEntry{mEntry(0, 149, 10, "n1"), mEntry(150, 199, 10, "n2")}
	m.Swapped(olds, news)
	checkNoGap(t, m, 0, 200, "swapped")
	// Late: the old commit of o2, then the swap's events.
	stale := olds[1]
	m.Apply(metadata.Event{Kind: metadata.TierPut, Tier: &stale, Revision: 2})
	for _, ev := range swapEvents(olds, news, 10) {
		m.Apply(ev)
	}
	// A stale delete of base 0 (an older entry there) must not drop n1.
	older := olds[0]
	m.Apply(metadata.Event{Kind: metadata.TierDeleted, Tier: &older, Revision: 5})
	checkNoGap(t, m, 0, 200, "late events")
	if got := keysOf(m.Segments(testTopicID, 3)); len(got) != 2 || got[0] != "n1" || got[1] != "n2" {
		t.Fatalf("after late events: %v", got)
	}
	// Retention still raises the floor: a deleted entry's stale put stays out.
	m.Removed([]metadata.TierEntry{m.Segments(testTopicID, 3)[0]})
	again := news[0]
	m.Apply(metadata.Event{Kind: metadata.TierPut, Tier: &again, Revision: 10})
	if got := keysOf(m.Segments(testTopicID, 3)); len(got) != 1 || got[0] != "n2" {
		t.Fatalf("after retention: %v", got)
	}
}
