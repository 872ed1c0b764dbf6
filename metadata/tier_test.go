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

func tierEntry(id metadata.TopicID, p int32, base, last int64, key string) metadata.TierEntry {
	return metadata.TierEntry{TopicID: id, Partition: p, BaseOffset: base, LastOffset: last,
		FirstTimestamp: 10, MaxTimestamp: 20, LeaderEpoch: 1, Key: key, Size: 1000}
}

func TestTierManifest(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	s := openStore(t, endpoints, fmt.Sprintf("tier-%d", time.Now().UnixNano()))
	ctx := testCtx(t)
	topic, err := s.CreateTopic(ctx, metadata.CreateTopicRequest{Name: "t", Replicas: [][]int32{{1}, {1}}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	events := s.Watch(watchCtx, snap.Revision+1)
	id := topic.ID
	first := tierEntry(id, 1, 0, 99, "k0")
	if err := s.CommitTierEntry(ctx, first); err != nil {
		t.Fatal(err)
	}
	ev := nextEvent(t, events, "TierPut", func(ev metadata.Event) bool { return ev.Kind == metadata.TierPut })
	if ev.Tier == nil || ev.TopicID != id || ev.Partition != 1 || ev.Tier.Key != "k0" || ev.Tier.LastOffset != 99 || ev.Tier.Version == 0 {
		t.Fatalf("TierPut %+v %+v", ev, ev.Tier)
	}
	// A retried commit of the same object is fine; another object at the
	// same base is refused.
	if err := s.CommitTierEntry(ctx, first); err != nil {
		t.Fatalf("idempotent commit: %v", err)
	}
	if err := s.CommitTierEntry(ctx, tierEntry(id, 1, 0, 99, "other")); !errors.Is(err, metadata.ErrTierEntryExists) {
		t.Fatalf("duplicate base: %v", err)
	}
	if err := s.CommitTierEntry(ctx, tierEntry(id, 1, 100, 50, "bad")); !errors.Is(err, metadata.ErrTierEntryInvalid) {
		t.Fatalf("last < base: %v", err)
	}
	if err := s.CommitTierEntry(ctx, tierEntry(metadata.TopicID{1}, 0, 0, 1, "x")); !errors.Is(err, metadata.ErrTopicNotFound) {
		t.Fatalf("unknown topic: %v", err)
	}
	second := tierEntry(id, 1, 100, 199, "k1")
	if err := s.CommitTierEntry(ctx, second); err != nil {
		t.Fatal(err)
	}
	entries, err := s.TierEntries(ctx, id, 1)
	if err != nil || len(entries) != 2 || entries[0].Key != "k0" || entries[1].Key != "k1" {
		t.Fatalf("entries %+v, %v", entries, err)
	}
	if other, _ := s.TierEntries(ctx, id, 0); len(other) != 0 {
		t.Fatalf("partition 0 entries %+v", other)
	}
	// Log start: raised, never lowered; carried by watch and snapshot.
	if got, err := s.RaiseTierLogStart(ctx, id, 1, 50); err != nil || got != 50 {
		t.Fatalf("raise: %d %v", got, err)
	}
	if got, _ := s.RaiseTierLogStart(ctx, id, 1, 10); got != 50 {
		t.Fatalf("lowered to %d", got)
	}
	ev = nextEvent(t, events, "TierLogStartPut", func(ev metadata.Event) bool { return ev.Kind == metadata.TierLogStartPut })
	if ev.TierLogStart != 50 || ev.Partition != 1 {
		t.Fatalf("TierLogStartPut %+v", ev)
	}
	snap, err = s.Snapshot(ctx)
	if err != nil || len(snap.Tier) != 2 || snap.TierLogStarts[metadata.TierPartition{TopicID: id, Partition: 1}] != 50 {
		t.Fatalf("snapshot tier %+v starts %+v, %v", snap.Tier, snap.TierLogStarts, err)
	}
	// Deletion is guarded by the version read.
	stale := entries[0]
	stale.Version--
	if err := s.DeleteTierEntries(ctx, id, 1, []metadata.TierEntry{stale}); !errors.Is(err, metadata.ErrCASFailed) {
		t.Fatalf("stale delete: %v", err)
	}
	if err := s.DeleteTierEntries(ctx, id, 1, entries[:1]); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, events, "TierDeleted", func(ev metadata.Event) bool { return ev.Kind == metadata.TierDeleted })
	if ev.Tier == nil || ev.Tier.BaseOffset != 0 || ev.Tier.LastOffset != 99 || ev.Tier.Key != "k0" {
		t.Fatalf("TierDeleted %+v", ev.Tier)
	}
	if left, _ := s.TierEntries(ctx, id, 1); len(left) != 1 || left[0].Key != "k1" {
		t.Fatalf("after delete %+v", left)
	}
	// Deleting the topic takes its manifest with it.
	if err := s.DeleteTopic(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	all, starts, err := s.AllTierEntries(ctx)
	if err != nil || len(all) != 0 || len(starts) != 0 {
		t.Fatalf("after topic delete: %+v %+v %v", all, starts, err)
	}
}
