package compaction

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

func newTestCleaner(t *testing.T, cfg CleanerConfig, deps CleanerDeps) *Cleaner {
	t.Helper()
	if deps.Manifest == nil {
		deps.Manifest = &twinManifest{}
	}
	c, err := NewCleaner(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkLatestOnly fails unless live holds each key of latest once, at its
// latest offset, in increasing offset order (filler keys aside).
func checkLatestOnly(t *testing.T, live []liveRecord, latest map[string]int64) {
	t.Helper()
	seen := map[string]bool{}
	last := int64(-1)
	for _, r := range live {
		if r.offset <= last {
			t.Fatalf("offset %d after %d", r.offset, last)
		}
		last = r.offset
		want, ok := latest[r.key]
		if !ok {
			continue
		}
		if r.offset != want || seen[r.key] {
			t.Fatalf("key %s at offset %d: its latest version is at %d (seen before: %v)", r.key, r.offset, want, seen[r.key])
		}
		seen[r.key] = true
	}
	if len(seen) != len(latest) {
		t.Fatalf("%d of %d keys left after cleaning", len(seen), len(latest))
	}
}

// TestCleanerLocalPasses: a partition with 40 versions of 30 keys, cleaned
// with an offset map of a few dozen keys, takes several passes and keeps
// exactly the latest version of each key at its offset; the checkpoint
// reaches the sealed end and a further round finds nothing to do.
func TestCleanerLocalPasses(t *testing.T) {
	p := newTwinPartition(t, "keyed")
	latest := appendVersions(t, p.log, 30, 40)
	c := newTestCleaner(t, CleanerConfig{DedupeBufferBytes: 1 << 10}, CleanerDeps{Partitions: twinPartitions{p}})
	for i := 0; c.CleanOnce(context.Background(), time.Now()); i++ {
		if i == 100 {
			t.Fatal("still cleaning after 100 passes")
		}
	}
	totals := p.state.Totals()
	if totals.Passes < 2 || totals.BytesOut >= totals.BytesIn || totals.LastMs == 0 {
		t.Fatalf("totals %+v: want several passes that shrank the log", totals)
	}
	checkLatestOnly(t, sealedRecords(t, p.log), latest)
	if got, want := p.log.CleanerCheckpoint(), sealedEnd(p.log); got != want {
		t.Fatalf("cleaner checkpoint %d, want the sealed end %d", got, want)
	}
	if _, err := c.CleanPartition(context.Background(), p, time.Now()); !errors.Is(err, ErrNothingToClean) {
		t.Fatalf("a pass over a clean log: %v, want ErrNothingToClean", err)
	}
}

// TestCleanerCandidates: only compacted partitions whose dirty ratio
// reaches min.cleanable.dirty.ratio are due, dirtiest first.
func TestCleanerCandidates(t *testing.T) {
	dirtiest, dirty, deleted, lazy := newTwinPartition(t, "a"), newTwinPartition(t, "b"),
		newTwinPartition(t, "c"), newTwinPartition(t, "d")
	for _, p := range []*twinPartition{dirtiest, dirty, deleted, lazy} {
		appendVersions(t, p.log, 10, 20)
	}
	deleted.cfg.CleanupPolicy = "delete"
	lazy.cfg.MinCleanableDirtyRatio = 1.5 // never reached
	c := newTestCleaner(t, CleanerConfig{}, CleanerDeps{Partitions: twinPartitions{deleted, lazy, dirty, dirtiest}})
	// Cleaned once, dirty holds clean bytes: its ratio drops below 1.
	if _, err := c.CleanPartition(context.Background(), dirty, time.Now()); err != nil {
		t.Fatal(err)
	}
	appendVersions(t, dirty.log, 10, 20)
	cands := c.candidates(time.Now())
	var got []string
	for _, cand := range cands {
		got = append(got, cand.p.Topic())
	}
	if fmt.Sprint(got) != "[a b]" || cands[0].ratio != 1 || cands[1].ratio >= 1 {
		t.Fatalf("candidates %v (ratios %v, %v), want [a b] with a at 1", got, cands[0].ratio, cands[len(cands)-1].ratio)
	}
	if !c.CleanOnce(context.Background(), time.Now()) || dirtiest.state.Totals().Passes != 1 || dirty.state.Totals().Passes != 0 {
		t.Fatalf("CleanOnce did not clean the dirtiest partition: passes %d and %d",
			dirtiest.state.Totals().Passes, dirty.state.Totals().Passes)
	}
}

// TestCleanerFirstUncleanable: a local pass stops at the HW, at the end of
// what the bucket holds for a tiered partition (nothing when it holds
// nothing), and before the first segment younger than
// min.compaction.lag.ms.
func TestCleanerFirstUncleanable(t *testing.T) {
	p := newTwinPartition(t, "fu")
	appendVersions(t, p.log, 10, 20)
	manifest := &twinManifest{}
	c := newTestCleaner(t, CleanerConfig{}, CleanerDeps{Partitions: twinPartitions{p}, Manifest: manifest})
	now := time.Now()
	if got, want := c.FirstUncleanable(p, now), p.log.LogEndOffset(); got != want {
		t.Fatalf("untiered: %d, want the HW %d", got, want)
	}
	p.tiered = true
	if got := c.FirstUncleanable(p, now); got != 0 {
		t.Fatalf("tiered, empty bucket: %d, want 0", got)
	}
	manifest.entries = []metadata.TierEntry{{BaseOffset: 0, LastOffset: 99}}
	if got := c.FirstUncleanable(p, now); got != 100 {
		t.Fatalf("tiered up to 99: %d, want 100", got)
	}
	p.tiered = false
	p.cfg.MinCompactionLagMs = 1
	young := now.Add(-time.Hour) // every batch has timestamp 0: all old
	if got, want := c.FirstUncleanable(p, young), p.log.LogEndOffset(); got != want {
		t.Fatalf("old records: %d, want %d", got, want)
	}
	segs := p.log.CleanableSegments(p.log.LogEndOffset())
	p.cfg.MinCompactionLagMs = time.Now().UnixMilli() + 1 // every batch is too young
	if got := c.FirstUncleanable(p, now); got != segs[0].BaseOffset {
		t.Fatalf("young records: %d, want the first segment's base %d", got, segs[0].BaseOffset)
	}
}

// uploadVersions puts rounds of one batch of keys per object in the twin
// bucket, from offset 0, and returns each key's latest offset.
func uploadVersions(t *testing.T, bucket *twinTier, keys, rounds, batchesPerObject int) map[string]int64 {
	t.Helper()
	latest := map[string]int64{}
	var object []byte
	offset := int64(0)
	for r := range rounds {
		var kv []string
		for k := range keys {
			key := fmt.Sprintf("key-%02d", k)
			kv = append(kv, key, fmt.Sprintf("round-%03d", r))
			latest[key] = offset + int64(k)
		}
		object = append(object, buildBatch(t, testBatch{base: offset, records: keyed(kv...)})...)
		offset += int64(keys)
		if (r+1)%batchesPerObject == 0 || r == rounds-1 {
			bucket.upload(t, object)
			object = nil
		}
	}
	return latest
}

// TestCleanerTieredPass: the leader of a tiered compacted partition cleans
// the bucket's copy: the run is rewritten and swapped as one object holding
// each key's latest version, the tier checkpoint moves to the end, and a
// leader that forgot its checkpoint cleans again without swapping
// anything. Followers and topics that keep their local log are left alone.
func TestCleanerTieredPass(t *testing.T) {
	bucket := newTwinTier()
	latest := uploadVersions(t, bucket, 20, 30, 5)
	p := newTwinPartition(t, "tiered")
	p.tiered, p.leader = true, false
	p.cfg.SegmentBytes = 1 << 20
	c := newTestCleaner(t, CleanerConfig{}, CleanerDeps{Partitions: twinPartitions{p}, Manifest: bucket.manifest,
		Tier: bucket, SpoolDir: spoolDir(t)})
	if c.CleanTierOnce(context.Background(), time.Now()) {
		t.Fatal("a follower cleaned the bucket")
	}
	p.leader, p.keepsLocal = true, true
	if c.CleanTierOnce(context.Background(), time.Now()) {
		t.Fatal("a topic that keeps its local log was cleaned in the bucket")
	}
	p.keepsLocal = false
	if !c.TierDue(p, time.Now()) || !c.CleanTierOnce(context.Background(), time.Now()) {
		t.Fatal("the leader did not clean the bucket")
	}
	checkLatestOnly(t, bucket.bucketRecords(t), latest)
	end := int64(20 * 30)
	if entries := bucket.manifest.Segments(p.id, 0); len(entries) != 1 || bucket.swaps != 1 ||
		p.state.TierCheckpoint() != end || p.state.Totals().Passes != 1 {
		t.Fatalf("%d objects after %d swaps, tier checkpoint %d (want %d), %d passes",
			len(entries), bucket.swaps, p.state.TierCheckpoint(), end, p.state.Totals().Passes)
	}
	if c.TierDue(p, time.Now()) {
		t.Fatal("a clean bucket is still due")
	}
	clean, dirty := c.TierCleanableBytes(p)
	if clean == 0 || dirty != 0 {
		t.Fatalf("clean %d, dirty %d bytes after the pass", clean, dirty)
	}
	p.state.SetTierCheckpoint(0)
	if _, err := c.CleanTiered(context.Background(), p, time.Now()); err != nil {
		t.Fatal(err)
	}
	if bucket.swaps != 1 || p.state.TierCheckpoint() != end {
		t.Fatalf("re-cleaning a clean bucket swapped (%d swaps) or left the checkpoint at %d", bucket.swaps,
			p.state.TierCheckpoint())
	}
}

// TestCleanerTieredPassStopsAtTierCleanEnd: objects reaching the
// partition's TierCleanEnd (a diskless partition's unmerged runs begin
// there) are neither read into the map nor rewritten; those below are
// cleaned and the checkpoint stops at the bound.
func TestCleanerTieredPassStopsAtTierCleanEnd(t *testing.T) {
	bucket := newTwinTier()
	uploadVersions(t, bucket, 10, 20, 5) // 4 objects of 50 offsets
	p := newTwinPartition(t, "bounded")
	p.tiered, p.leader = true, true
	p.cfg.SegmentBytes = 1 << 20
	before := bucket.manifest.Segments(p.id, 0)
	if len(before) != 4 {
		t.Fatalf("%d objects uploaded, want 4", len(before))
	}
	p.tierEnd = before[2].BaseOffset + 10 // inside the third object
	c := newTestCleaner(t, CleanerConfig{}, CleanerDeps{Partitions: twinPartitions{p}, Manifest: bucket.manifest,
		Tier: bucket, SpoolDir: spoolDir(t)})
	if !c.CleanTierOnce(context.Background(), time.Now()) {
		t.Fatal("the objects below the bound were not cleaned")
	}
	after := bucket.manifest.Segments(p.id, 0)
	if len(after) != 3 || after[1].Key != before[2].Key || after[2].Key != before[3].Key {
		t.Fatalf("after the pass: %+v; want the first two objects merged and the last two untouched", after)
	}
	if got := p.state.TierCheckpoint(); got != before[2].BaseOffset {
		t.Fatalf("tier checkpoint %d, want %d (the first object at the bound)", got, before[2].BaseOffset)
	}
	if _, dirty := c.TierCleanableBytes(p); dirty != 0 {
		t.Fatalf("%d dirty bytes counted past the bound", dirty)
	}
}

// TestCleanerRunStops: Run cleans, deletes replaced objects every round,
// and returns when its context ends.
func TestCleanerRunStops(t *testing.T) {
	bucket := newTwinTier()
	p := newTwinPartition(t, "run")
	latest := appendVersions(t, p.log, 10, 20)
	c := newTestCleaner(t, CleanerConfig{Backoff: 10 * time.Millisecond}, CleanerDeps{Partitions: twinPartitions{p},
		Manifest: bucket.manifest, Tier: bucket, SpoolDir: spoolDir(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for p.state.Totals().Passes == 0 || bucket.deleteRounds() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %d passes, %d delete rounds", p.state.Totals().Passes, bucket.deleteRounds())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	checkLatestOnly(t, sealedRecords(t, p.log), latest)
}

// TestCleanerTierDueDisabled: a disabled cleaner is never due, so the merge
// pass does not wait for it.
func TestCleanerTierDueDisabled(t *testing.T) {
	bucket := newTwinTier()
	uploadVersions(t, bucket, 5, 5, 5)
	p := newTwinPartition(t, "off")
	p.tiered = true
	c := newTestCleaner(t, CleanerConfig{Disable: true}, CleanerDeps{Partitions: twinPartitions{p}, Manifest: bucket.manifest,
		Tier: bucket, SpoolDir: t.TempDir()})
	if c.TierDue(p, time.Now()) {
		t.Fatal("a disabled cleaner is due")
	}
}

func TestCleanerConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg CleanerConfig
		ok  bool
	}{
		{CleanerConfig{}, true},
		{CleanerConfig{DedupeBufferBytes: 1 << 10, IOBytesPerSecond: 1}, true},
		{CleanerConfig{DedupeBufferBytes: 1<<10 - 1}, false},
		{CleanerConfig{IOBytesPerSecond: -1}, false},
		{CleanerConfig{Backoff: -time.Second}, false},
		{CleanerConfig{ObjectDeleteGrace: -time.Second}, false},
	} {
		err := c.cfg.WithDefaults().Validate()
		if (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ok %v", c.cfg, err, c.ok)
		}
	}
}

func TestGroupSegments(t *testing.T) {
	seg := func(base, end, size int64) hotlog.SegmentInfo {
		return hotlog.SegmentInfo{BaseOffset: base, RangeEnd: end, NextOffset: end, Size: size}
	}
	run := []hotlog.SegmentInfo{seg(0, 10, 0), seg(10, 20, 400), seg(20, 30, 700), seg(30, 40, 100), seg(40, 50, 2000), seg(50, 60, 0)}
	var got [][]int64
	for _, g := range groupSegments(run, 1000) {
		var bases []int64
		for _, s := range g {
			bases = append(bases, s.BaseOffset)
		}
		got = append(got, bases)
	}
	want := [][]int64{{0, 10}, {20, 30}, {40}, {50}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	// Offsets too far apart for one segment's 32-bit relative index.
	far := []hotlog.SegmentInfo{seg(0, 10, 1), seg(10, 1<<32, 1)}
	if n := len(groupSegments(far, 1<<30)); n != 2 {
		t.Fatalf("%d groups for a run spanning 2^32 offsets, want 2", n)
	}
}

// TestCleanerSkipsUncleanable: a partition whose local pass fails for good
// (here a batch with more keys than the offset map holds) is marked
// uncleanable at its first failure and skipped from then on, as Kafka does,
// so the other compacted partitions still get cleaned.
func TestCleanerSkipsUncleanable(t *testing.T) {
	stuck, other := newTwinPartition(t, "stuck"), newTwinPartition(t, "other")
	appendVersions(t, stuck.log, 200, 5)
	appendVersions(t, other.log, 10, 20)
	c := newTestCleaner(t, CleanerConfig{DedupeBufferBytes: 1 << 10}, CleanerDeps{Partitions: twinPartitions{stuck, other}})
	ctx, now := context.Background(), time.Now()
	if _, err := c.CleanPartition(ctx, stuck, now); !errors.Is(err, ErrMapTooSmall) {
		t.Fatalf("stuck partition: %v, want ErrMapTooSmall", err)
	}
	if _, err := c.CleanPartition(ctx, other, now); err != nil {
		t.Fatal(err)
	}
	appendVersions(t, other.log, 10, 20) // dirty again, less than stuck
	if cands := c.candidates(now); len(cands) != 2 || cands[0].p != stuck {
		t.Fatalf("want stuck as the dirtiest of two candidates, got %d", len(cands))
	}
	for range 5 {
		c.CleanOnce(ctx, now)
	}
	if passes := other.state.Totals().Passes; passes < 1 {
		t.Fatal("the other partition was never cleaned: the failing one took every turn")
	}
	if !stuck.state.Uncleanable() || other.state.Uncleanable() {
		t.Fatalf("uncleanable: stuck %v, other %v", stuck.state.Uncleanable(), other.state.Uncleanable())
	}
}
