package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// TestSwapTierEntries: a run of three entries is replaced by two (one
// reusing the first base) in one revision, the watch delivers puts before
// deletes, a retry is idempotent, and stale or malformed swaps change
// nothing.
func TestSwapTierEntries(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	s := openStore(t, endpoints, fmt.Sprintf("swap-%d", time.Now().UnixNano()))
	ctx := testCtx(t)
	topic, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}}})
	if err != nil {
		t.Fatal(err)
	}
	id := topic.ID
	for i, base := range []int64{0, 100, 200, 300} {
		if err := s.CommitTierEntry(ctx, tierEntry(id, 0, base, base+99, fmt.Sprintf("old%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	olds, err := s.TierEntries(ctx, id, 0)
	if err != nil || len(olds) != 4 {
		t.Fatalf("entries %+v %v", olds, err)
	}
	olds = olds[:3] // [0, 299]; the entry at 300 stays
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	events := s.Watch(watchCtx, snap.Revision+1)

	news := []metadata.TierEntry{tierEntry(id, 0, 0, 180, "new0"), tierEntry(id, 0, 181, 299, "new1")}
	testSwapRejects(t, s, olds, news)
	rev, err := s.SwapTierEntriesRev(ctx, olds, news)
	if err != nil || rev == 0 {
		t.Fatalf("swap: rev %d, %v", rev, err)
	}
	got, _ := s.TierEntries(ctx, id, 0)
	if len(got) != 3 || got[0].Key != "new0" || got[1].Key != "new1" || got[2].Key != "old3" ||
		got[0].Version != rev || got[1].Version != rev {
		t.Fatalf("after swap (rev %d): %+v", rev, got)
	}
	// One revision, in the documented order: new key, reused key, deletes.
	want := []struct {
		kind metadata.EventKind
		base int64
	}{{metadata.TierPut, 181}, {metadata.TierPut, 0}, {metadata.TierDeleted, 100}, {metadata.TierDeleted, 200}}
	for i, w := range want {
		ev := nextEvent(t, events, "swap event", func(ev metadata.Event) bool { return ev.Tier != nil })
		if ev.Kind != w.kind || ev.Tier.BaseOffset != w.base || ev.Revision != rev {
			t.Fatalf("event %d: %v base %d rev %d; want %v base %d rev %d", i, ev.Kind, ev.Tier.BaseOffset, ev.Revision, w.kind, w.base, rev)
		}
	}
	// A retry whose first answer was lost succeeds with the same revision.
	if again, err := s.SwapTierEntriesRev(ctx, olds, news); err != nil || again != rev {
		t.Fatalf("retried swap: rev %d, %v; want %d", again, err, rev)
	}
	// The olds are gone: swapping them again (other news) fails and changes nothing.
	other := []metadata.TierEntry{tierEntry(id, 0, 0, 299, "other")}
	if err := s.SwapTierEntries(ctx, olds, other); !errors.Is(err, metadata.ErrTierEntriesChanged) {
		t.Fatalf("stale swap: %v", err)
	}
	if after, _ := s.TierEntries(ctx, id, 0); len(after) != 3 || after[0].Key != "new0" || after[0].Version != rev {
		t.Fatalf("stale swap changed the manifest: %+v", after)
	}
	if err := s.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := s.SwapTierEntries(ctx, got[:2], other); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("swap after topic delete: %v", err)
	}
}

// testSwapRejects: malformed swaps are ErrTierEntryInvalid, a stale
// version is ErrTierEntriesChanged, and none writes anything.
func testSwapRejects(t *testing.T, s *metadata.Store, olds, news []metadata.TierEntry) {
	t.Helper()
	ctx := testCtx(t)
	stale := append([]metadata.TierEntry(nil), olds...)
	stale[1].Version--
	noVersion := append([]metadata.TierEntry(nil), olds...)
	noVersion[2].Version = 0
	id := olds[0].TopicID
	invalid := map[string][2][]metadata.TierEntry{
		"no news":       {olds, nil},
		"no olds":       {nil, news},
		"short":         {olds, {news[0], tierEntry(id, 0, 181, 298, "x")}},
		"late start":    {olds, {tierEntry(id, 0, 1, 299, "x")}},
		"gap":           {olds, {news[0], tierEntry(id, 0, 182, 299, "x")}},
		"old gap":       {{olds[0], olds[2]}, {tierEntry(id, 0, 0, 299, "x")}},
		"no version":    {noVersion, news},
		"partitions":    {olds, {news[0], func() metadata.TierEntry { e := news[1]; e.Partition = 1; return e }()}},
		"invalid entry": {olds, {news[0], tierEntry(id, 0, 181, 299, "")}},
	}
	for name, c := range invalid {
		if err := s.SwapTierEntries(ctx, c[0], c[1]); !errors.Is(err, metadata.ErrTierEntryInvalid) {
			t.Errorf("%s: %v, want ErrTierEntryInvalid", name, err)
		}
	}
	if err := s.SwapTierEntries(ctx, stale, news); !errors.Is(err, metadata.ErrTierEntriesChanged) {
		t.Fatalf("stale version: %v", err)
	}
	got, _ := s.TierEntries(ctx, id, 0)
	for i := range olds {
		if got[i] != olds[i] {
			t.Fatalf("rejected swap changed entry %d: %+v, was %+v", i, got[i], olds[i])
		}
	}
}
