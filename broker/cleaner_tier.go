package broker

// Tiered cleaning (issue 7): the leader of a tiered, compacted partition
// also cleans what the bucket holds. A pass:
//
//  1. The bucket's dirty range starts at the partition's tier checkpoint
//     (in memory: 0 after a restart or a leadership change, so the first
//     pass then re-cleans everything once; cleaning is idempotent).
//  2. The offset map is filled from the dirty objects (downloaded and
//     verified, tier.NewObjectBatches) up to the end of what the bucket
//     holds, or less when the map fills up.
//  3. The objects from the bucket's first one to the one holding mapEnd-1
//     are rewritten in runs of at most tier.DefaultMaxRunObjects objects by
//     tier.Compactor: each run's batches are spooled to a temporary file so
//     the rewriter can make its two passes, the output is cut into objects
//     of about segment.bytes (small ones merged), and the manifest entries
//     are swapped in one etcd transaction; the old objects are deleted
//     after a grace period (cold reads in flight finish; a reader that
//     finds an object gone looks the offset up again, tier.ColdSource).
//  4. The tier checkpoint moves to mapEnd.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// cleanTierOnce runs one tiered pass on the dirtiest eligible partition;
// it reports whether one ran.
func (b *Broker) cleanTierOnce(ctx context.Context, now time.Time) bool {
	if b.compactor == nil {
		return false
	}
	var best *partition
	bestRatio := -1.0
	for _, p := range b.parts.localPartitions() {
		cfg := p.config()
		if !cfg.HasCompact() || !b.tieringEnabled(p.topic, cfg) || keepsLocalLog(p.topic) || !p.isLeader() {
			continue
		}
		clean, dirty := tierCleanableBytes(p)
		due := tombstonesDue(&p.cleaned.tierKeptTombstoneTs, now, cfg.DeleteRetentionMs)
		if dirty == 0 && !due {
			continue
		}
		ratio := float64(dirty) / float64(max(clean+dirty, 1))
		if (ratio >= cfg.MinCleanableDirtyRatio || due) && ratio > bestRatio {
			best, bestRatio = p, ratio
		}
	}
	if best == nil {
		return false
	}
	stats, err := b.cleanTiered(ctx, best, now)
	if err != nil {
		if ctx.Err() == nil {
			b.log.Warn("tiered cleaning failed", "topic", best.topic, "partition", best.index, "err", err)
		}
		return false
	}
	best.cleaned.add(stats)
	b.log.Info("cleaned tiered objects", "topic", best.topic, "partition", best.index,
		"dirty_ratio", fmt.Sprintf("%.2f", bestRatio), "bytes_in", stats.BytesIn, "bytes_out", stats.BytesOut,
		"records_in", stats.RecordsIn, "records_out", stats.RecordsOut)
	return true
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

// tierCleanableBytes splits the bucket's bytes of p at its tier checkpoint.
func tierCleanableBytes(p *partition) (clean, dirty int64) {
	checkpoint := p.cleaned.tierCheckpoint.Load()
	for _, e := range p.manifest.Segments(p.topicID, p.index) {
		if e.LastOffset < checkpoint {
			clean += e.Size
		} else {
			dirty += e.Size
		}
	}
	return clean, dirty
}

// cleanTiered runs one tiered pass over p's objects.
func (b *Broker) cleanTiered(ctx context.Context, p *partition, now time.Time) (compaction.Stats, error) {
	entries := p.manifest.Segments(p.topicID, p.index)
	if len(entries) == 0 {
		return compaction.Stats{}, errNothingToClean
	}
	checkpoint := p.cleaned.tierCheckpoint.Load()
	entries = withinCompactionLag(entries, p.config().MinCompactionLagMs, now)
	if len(entries) == 0 || entries[len(entries)-1].LastOffset < checkpoint {
		return compaction.Stats{}, errNothingToClean
	}
	end := entries[len(entries)-1].LastOffset + 1
	aborted, err := b.tierAborted(ctx, p, entries)
	if err != nil {
		return compaction.Stats{}, err
	}
	var dirty []metadata.TierEntry
	for _, e := range entries {
		if e.LastOffset >= checkpoint {
			dirty = append(dirty, e)
		}
	}
	m := compaction.NewOffsetMap(offsetMapBudget(b.cfg.Cleaner.DedupeBufferBytes, end-max(checkpoint, entries[0].BaseOffset)))
	src := tier.NewObjectBatches(ctx, b.objects, dirty)
	mapEnd, err := compaction.BuildMap(m, src, checkpoint, end, aborted, maxCleanerBatch)
	src.Close()
	if err != nil {
		return compaction.Stats{}, fmt.Errorf("building the offset map from the bucket: %w", err)
	}
	cfg := p.config()
	policy := compaction.Policy{Map: m, MapEnd: mapEnd, NowMs: now.UnixMilli(), DeleteRetentionMs: max(cfg.DeleteRetentionMs, 0),
		Aborted: aborted}
	total, err := b.compactTierRuns(ctx, p, entries, mapEnd, policy, cfg.SegmentBytes)
	if err != nil {
		return total, err
	}
	p.cleaned.tierKeptTombstoneTs.Store(keptTombstones(total))
	p.cleaned.tierCheckpoint.Store(mapEnd)
	return total, nil
}

// compactTierRuns rewrites the objects up to the one holding mapEnd-1, in
// runs a swap can hold.
func (b *Broker) compactTierRuns(ctx context.Context, p *partition, entries []metadata.TierEntry, mapEnd int64,
	policy compaction.Policy, targetBytes int64,
) (compaction.Stats, error) {
	var total compaction.Stats
	for i := 0; i < len(entries) && entries[i].BaseOffset < mapEnd; {
		n := min(tier.DefaultMaxRunObjects, len(entries)-i)
		run := entries[i : i+n]
		pol := policy
		pol.FromLogStart = i == 0
		stats, err := b.compactTierRun(ctx, p, run, pol, targetBytes)
		addStats(&total, stats)
		if err != nil && !errors.Is(err, tier.ErrCompactedEmpty) && !errors.Is(err, errRunUnchanged) {
			return total, err
		}
		i += n
	}
	return total, nil
}

// errRunUnchanged: cleaning would rewrite a run into the same batches and
// no fewer objects, so it is left as it is (no upload, no swap): a leader
// that re-cleans the bucket after a restart costs GETs only.
var errRunUnchanged = errors.New("broker: cleaning changes nothing in this run")

// mergeable: run's objects would fit in fewer objects of targetBytes.
func mergeable(run []metadata.TierEntry, targetBytes int64) bool {
	var total int64
	for _, e := range run {
		total += e.Size
	}
	return len(run) > 1 && total <= int64(len(run)-1)*targetBytes
}

// compactTierRun rewrites one run of objects and swaps it in.
func (b *Broker) compactTierRun(ctx context.Context, p *partition, run []metadata.TierEntry, policy compaction.Policy,
	targetBytes int64,
) (compaction.Stats, error) {
	var stats compaction.Stats
	rewrite := func(src tier.BatchSource, sink func([]byte) error) error {
		s, err := b.rewriteSpooled(src, sink, policy)
		stats = s
		if err == nil && s.BatchesOut == s.BatchesIn && s.BytesOut == s.BytesIn && !mergeable(run, targetBytes) {
			return errRunUnchanged // nothing to upload or swap
		}
		return err
	}
	_, err := b.compactor.Compact(ctx, tier.CompactRun{Topic: p.topic, UploadEpoch: max(p.leaderEpoch(), 0),
		Entries: run, TargetBytes: max(targetBytes, 1), Rewrite: rewrite})
	return stats, err
}

// rewriteSpooled copies src's batches to a temporary file, then runs the
// rewriter's two passes over it, feeding the kept batches to sink.
func (b *Broker) rewriteSpooled(src tier.BatchSource, sink func([]byte) error, policy compaction.Policy) (compaction.Stats, error) {
	f, err := os.CreateTemp(b.cfg.DataDir, ".clean-spool-*")
	if err != nil {
		return compaction.Stats{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var size int64
	for {
		batch, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return compaction.Stats{}, err
		}
		if _, err := f.Write(batch); err != nil {
			return compaction.Stats{}, err
		}
		size += int64(len(batch))
	}
	rw := compaction.NewRewriter(policy)
	defer rw.Close()
	spooled := func() compaction.BatchSource {
		return compaction.NewBatchReader(io.NewSectionReader(f, 0, size), maxCleanerBatch)
	}
	if err := eachBatch(spooled(), rw.Plan); err != nil {
		return rw.Stats(), err
	}
	err = eachBatch(spooled(), func(batch []byte) error {
		out, kept, err := rw.Batch(batch)
		if err != nil || !kept {
			return err
		}
		return sink(out)
	})
	return rw.Stats(), err
}

// eachBatch calls fn with every batch of src.
func eachBatch(src compaction.BatchSource, fn func([]byte) error) error {
	for {
		batch, err := src.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(batch); err != nil {
			return err
		}
	}
}

// tierAborted lists the aborts of p's objects (their index sections, read
// through the cold reader's cache) and of the local log.
func (b *Broker) tierAborted(ctx context.Context, p *partition, entries []metadata.TierEntry) ([]hotlog.AbortedTxn, error) {
	var out []hotlog.AbortedTxn
	for _, e := range entries {
		x, err := b.cold.Index(ctx, coldObject(e))
		if err != nil {
			return nil, err
		}
		out = append(out, hotlogAborted(x.Aborted)...)
	}
	return append(out, p.log.AbortedTxns(0, p.log.LogEndOffset())...), nil
}

func addStats(total *compaction.Stats, s compaction.Stats) {
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

// startCompactor creates the tiered compactor (tiering on).
func (b *Broker) startCompactor() error {
	if b.objects == nil {
		return nil
	}
	// A crash mid-pass leaves its spool and upload files behind.
	for _, pattern := range []string{".clean-spool-*", "strata-compact-*.log"} {
		stale, _ := filepath.Glob(filepath.Join(b.cfg.DataDir, pattern))
		for _, f := range stale {
			if err := os.Remove(f); err != nil {
				b.log.Warn("removing a stale cleaning file", "file", f, "err", err)
			}
		}
	}
	c, err := tier.NewCompactor(tier.CompactorConfig{Store: b.objects, Swapper: b.store, Manifest: b.manifest,
		Cluster: b.store.Cluster(), TempDir: b.cfg.DataDir, DeleteGrace: b.cfg.Cleaner.ObjectDeleteGrace, Logger: b.log})
	if err != nil {
		return err
	}
	b.compactor = c
	return nil
}

// deleteCompactedObjects deletes the old objects whose grace period ended
// and forgets them in the cold reader's cache.
func (b *Broker) deleteCompactedObjects(ctx context.Context) {
	if b.compactor == nil {
		return
	}
	keys, err := b.compactor.DeleteDue(ctx)
	if err != nil && ctx.Err() == nil {
		b.log.Warn("deleting compacted objects", "err", err)
	}
	for _, k := range keys {
		b.cold.Forget(k)
	}
}
