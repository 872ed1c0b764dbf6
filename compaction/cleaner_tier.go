package compaction

// Tiered cleaning: the leader of a tiered, compacted partition also cleans
// what the bucket holds. A pass:
//
//  1. The bucket's dirty range starts at the partition's tier checkpoint
//     (PartitionState, in memory: 0 after a restart or a leadership
//     change, so the first pass then re-cleans everything once; cleaning is
//     idempotent).
//  2. The offset map is filled from the dirty objects (downloaded and
//     verified, TierStore.ObjectBatches) up to the end of what the bucket
//     holds, or less when the map fills up.
//  3. The objects from the bucket's first one to the one holding mapEnd-1
//     are rewritten in runs of at most tier.DefaultMaxRunObjects objects by
//     TierStore.Compact: each run's batches are spooled to a temporary file
//     so the rewriter can make its two passes, the output is cut into
//     objects of about segment.bytes (small ones merged), and the manifest
//     entries are swapped in one etcd transaction; the old objects are
//     deleted after a grace period (cold reads in flight finish; a reader
//     that finds an object gone looks the offset up again).
//  4. The tier checkpoint moves to mapEnd.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// spoolPattern names the temporary files of tiered passes in SpoolDir.
const spoolPattern = ".clean-spool-*"

// errRunUnchanged: cleaning would rewrite a run into the same batches and
// no fewer objects, so it is left as it is (no upload, no swap): a leader
// that re-cleans the bucket after a restart costs GETs only.
var errRunUnchanged = errors.New("compaction: cleaning changes nothing in this run")

// CleanTierOnce runs one tiered pass on the dirtiest eligible partition;
// it reports whether one ran. Without a TierStore it does nothing.
func (c *Cleaner) CleanTierOnce(ctx context.Context, now time.Time) bool {
	if c.tier == nil {
		return false
	}
	var best Partition
	bestRatio := -1.0
	for _, p := range c.parts.Local() {
		cfg := p.Config()
		if !cfg.HasCompact() || !p.Tiered() || p.KeepsLocalLog() || !p.IsLeader() {
			continue
		}
		clean, dirty := c.TierCleanableBytes(p)
		due := p.State().tierTombstonesDue(now, cfg.DeleteRetentionMs)
		if dirty == 0 && !due {
			continue
		}
		r := ratio(clean, dirty)
		if (r >= cfg.MinCleanableDirtyRatio || due) && r > bestRatio {
			best, bestRatio = p, r
		}
	}
	if best == nil {
		return false
	}
	stats, err := c.CleanTiered(ctx, best, now)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("tiered cleaning failed", "topic", best.Topic(), "partition", best.Index(), "err", err)
		}
		return false
	}
	best.State().add(stats)
	c.logPass("cleaned tiered objects", best, bestRatio, stats)
	return true
}

// TierDue reports whether a tiered pass would pick p now (dirty ratio or
// kept tombstones due), whatever other partitions need: a merge of p's
// objects would race with that pass. p is compacted, tiered and led here.
func (c *Cleaner) TierDue(p Partition, now time.Time) bool {
	if c.cfg.Disable || p.KeepsLocalLog() {
		return false
	}
	cfg := p.Config()
	clean, dirty := c.TierCleanableBytes(p)
	return (dirty > 0 && ratio(clean, dirty) >= cfg.MinCleanableDirtyRatio) ||
		p.State().tierTombstonesDue(now, cfg.DeleteRetentionMs)
}

// TierCleanableBytes splits the bucket's bytes of p at its tier checkpoint.
func (c *Cleaner) TierCleanableBytes(p Partition) (clean, dirty int64) {
	checkpoint := p.State().tierCheckpoint.Load()
	for _, e := range c.tierEntries(p) {
		if e.LastOffset < checkpoint {
			clean += e.Size
		} else {
			dirty += e.Size
		}
	}
	return clean, dirty
}

// tierEntries are p's objects in the bucket a tiered pass may rewrite: the
// manifest's, up to the first reaching p.TierCleanEnd().
func (c *Cleaner) tierEntries(p Partition) []metadata.TierEntry {
	entries := c.manifest.Segments(p.TopicID(), p.Index())
	end := p.TierCleanEnd()
	for i, e := range entries {
		if e.LastOffset >= end {
			return entries[:i]
		}
	}
	return entries
}

// withinCompactionLag drops the entries from the first one holding a batch
// younger than min.compaction.lag.ms (objects upload as soon as their
// segment is sealed, so the bucket has its own young tail).
func withinCompactionLag(entries []metadata.TierEntry, lagMs int64, now time.Time) []metadata.TierEntry {
	if lagMs <= 0 {
		return entries
	}
	for i, e := range entries {
		if e.MaxTimestamp > now.UnixMilli()-lagMs {
			return entries[:i]
		}
	}
	return entries
}

// CleanTiered runs one tiered pass over p's objects, whether or not p is
// due, and moves its tier checkpoint; it does not count the pass in p's
// totals (CleanTierOnce does). ErrNothingToClean when the bucket holds
// nothing dirty old enough. REQUIRES: a TierStore.
func (c *Cleaner) CleanTiered(ctx context.Context, p Partition, now time.Time) (Stats, error) {
	entries := c.tierEntries(p)
	if len(entries) == 0 {
		return Stats{}, ErrNothingToClean
	}
	state := p.State()
	checkpoint := state.tierCheckpoint.Load()
	cfg := p.Config()
	entries = withinCompactionLag(entries, cfg.MinCompactionLagMs, now)
	if len(entries) == 0 || entries[len(entries)-1].LastOffset < checkpoint {
		return Stats{}, ErrNothingToClean
	}
	end := entries[len(entries)-1].LastOffset + 1
	aborted, err := c.tierAborted(ctx, p, entries)
	if err != nil {
		return Stats{}, err
	}
	var dirty []metadata.TierEntry
	for _, e := range entries {
		if e.LastOffset >= checkpoint {
			dirty = append(dirty, e)
		}
	}
	m := NewOffsetMap(offsetMapBudget(c.tuning().DedupeBufferBytes, end-max(checkpoint, entries[0].BaseOffset)))
	src := c.tier.ObjectBatches(ctx, dirty)
	mapEnd, err := BuildMap(m, src, checkpoint, end, aborted, maxCleanerBatch)
	src.Close()
	if err != nil {
		return Stats{}, fmt.Errorf("building the offset map from the bucket: %w", err)
	}
	policy := Policy{Map: m, MapEnd: mapEnd, NowMs: now.UnixMilli(), DeleteRetentionMs: max(cfg.DeleteRetentionMs, 0),
		Aborted: aborted}
	total, err := c.compactTierRuns(ctx, p, entries, mapEnd, policy, cfg.SegmentBytes)
	if err != nil {
		return total, err
	}
	state.tierKeptTombstoneTs.Store(keptTombstones(total))
	state.tierCheckpoint.Store(mapEnd)
	return total, nil
}

// compactTierRuns rewrites the objects up to the one holding mapEnd-1, in
// runs a swap can hold.
func (c *Cleaner) compactTierRuns(ctx context.Context, p Partition, entries []metadata.TierEntry, mapEnd int64,
	policy Policy, targetBytes int64,
) (Stats, error) {
	var total Stats
	for i := 0; i < len(entries) && entries[i].BaseOffset < mapEnd; {
		n := min(tier.DefaultMaxRunObjects, len(entries)-i)
		run := entries[i : i+n]
		pol := policy
		pol.FromLogStart = i == 0
		stats, err := c.compactTierRun(ctx, p, run, pol, targetBytes)
		addStats(&total, stats)
		if err != nil && !errors.Is(err, tier.ErrCompactedEmpty) && !errors.Is(err, errRunUnchanged) {
			return total, err
		}
		i += n
	}
	return total, nil
}

// mergeable: run's objects would fit in fewer objects of targetBytes.
func mergeable(run []metadata.TierEntry, targetBytes int64) bool {
	var total int64
	for _, e := range run {
		total += e.Size
	}
	return len(run) > 1 && total <= int64(len(run)-1)*targetBytes
}

// compactTierRun rewrites one run of objects and swaps it in.
func (c *Cleaner) compactTierRun(ctx context.Context, p Partition, run []metadata.TierEntry, policy Policy,
	targetBytes int64,
) (Stats, error) {
	var stats Stats
	rewrite := func(src tier.BatchSource, sink func([]byte) error) error {
		s, err := c.rewriteSpooled(src, sink, policy)
		stats = s
		if err == nil && s.BatchesOut == s.BatchesIn && s.BytesOut == s.BytesIn && !mergeable(run, targetBytes) {
			return errRunUnchanged // nothing to upload or swap
		}
		return err
	}
	_, err := c.tier.Compact(ctx, tier.CompactRun{Topic: p.Topic(), UploadEpoch: max(p.LeaderEpoch(), 0),
		Entries: run, TargetBytes: max(targetBytes, 1), Rewrite: rewrite})
	return stats, err
}

// rewriteSpooled copies src's batches to a temporary file, then runs the
// rewriter's two passes over it, feeding the kept batches to sink.
func (c *Cleaner) rewriteSpooled(src tier.BatchSource, sink func([]byte) error, policy Policy) (Stats, error) {
	f, err := os.CreateTemp(c.spoolDir, spoolPattern)
	if err != nil {
		return Stats{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var size int64
	err = tier.CopyBatches(src, func(batch []byte) error {
		_, err := f.Write(batch)
		size += int64(len(batch))
		return err
	})
	if err != nil {
		return Stats{}, err
	}
	rw := NewRewriter(policy)
	defer rw.Close()
	spooled := func() tier.BatchSource {
		return NewBatchReader(io.NewSectionReader(f, 0, size), maxCleanerBatch)
	}
	if err := tier.CopyBatches(spooled(), rw.Plan); err != nil {
		return rw.Stats(), err
	}
	err = tier.CopyBatches(spooled(), func(batch []byte) error {
		out, kept, err := rw.Batch(batch)
		if err != nil || !kept {
			return err
		}
		return sink(out)
	})
	return rw.Stats(), err
}

// tierAborted lists the aborts of p's objects (their index sections) and of
// the local log.
func (c *Cleaner) tierAborted(ctx context.Context, p Partition, entries []metadata.TierEntry) ([]hotlog.AbortedTxn, error) {
	var out []hotlog.AbortedTxn
	for _, e := range entries {
		aborted, err := c.tier.AbortedTxns(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, aborted...)
	}
	log := p.Log()
	return append(out, log.AbortedTxns(0, log.LogEndOffset())...), nil
}

// removeStaleSpools deletes the spool files a crash mid-pass left behind.
func (c *Cleaner) removeStaleSpools() {
	stale, _ := filepath.Glob(filepath.Join(c.spoolDir, spoolPattern))
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			c.log.Warn("removing a stale cleaning file", "file", f, "err", err)
		}
	}
}

func addStats(total *Stats, s Stats) {
	total.BatchesIn += s.BatchesIn
	total.BatchesOut += s.BatchesOut
	total.RecordsIn += s.RecordsIn
	total.RecordsOut += s.RecordsOut
	total.BytesIn += s.BytesIn
	total.BytesOut += s.BytesOut
	total.TombstonesDropped += s.TombstonesDropped
	total.TombstonesKept += s.TombstonesKept
	total.KeptTombstoneMaxTimestamp = max(total.KeptTombstoneMaxTimestamp, s.KeptTombstoneMaxTimestamp)
}
