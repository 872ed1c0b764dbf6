package broker

// Merging small objects (DESIGN.md §5, "The bucket is current"): rolling
// a trickling partition every half tier.upload.max.lag.ms
// (tiering_bound.go) puts one small object in the bucket per roll. Every
// MergeInterval the janitor loop runs a pass over each tiered partition
// led here, whatever its cleanup.policy:
//
//  1. tier.PlanMerges picks runs of small objects (tier/merge.go has the
//     rules: old enough by MergeGrace, at most segment.bytes and segment.ms
//     per merged object, each merge at least halving or filling).
//  2. Each run goes through the tiered compactor (tier.Compactor, shared
//     with the cleaner, compaction/cleaner_tier.go) with tier.CopyBatches: batches
//     copied unchanged into one object, indexes rebuilt, aborted entries
//     kept, the last object's producer snapshot carried over, the manifest
//     swapped in one etcd transaction, the old objects deleted after
//     compaction.CleanerConfig.ObjectDeleteGrace (deleteCompactedObjects, from the
//     janitor's delete tick).
//  3. The pass plans again from the swapped manifest until nothing is
//     left to merge, so a second pass finds nothing until new objects age.
//
// What a pass leaves alone:
//   - Objects not wholly below the leader's local log start. A follower
//     that restarts its log at that start reads the producer state from
//     the object ending exactly there (fetcher_snapshot.go); local
//     retention moves the start one local segment, that is one uploaded
//     object, at a time, so merging only what the leader no longer holds
//     keeps every future start an object boundary with its snapshot.
//     __consumer_offsets keeps its whole local log (keepsLocalLog): its
//     start does not move with time, so everything may merge there except
//     across that start.
//   - Objects retention is about to remove (remoteDoomed).
//   - On compacted topics, a partition the tiered cleaner is due to clean:
//     its pass rewrites and merges the same objects, and two swaps of one
//     run race (the loser's guard fails and it retries later). Runs never
//     cross the cleaner's tier checkpoint, so the split between clean and
//     dirty bytes that decides its next pass is not changed by a merge.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// mergeTicks returns the channel of the janitor's merge ticks (nil, never
// ready, when merging is off or there is no bucket) and its stop function.
func (b *Broker) mergeTicks() (<-chan time.Time, func()) {
	if b.cfg.Tier.MergeInterval < 0 || b.compactor == nil {
		return nil, func() {}
	}
	t := time.NewTicker(b.cfg.Tier.MergeInterval)
	return t.C, t.Stop
}

// mergeTierRound runs a merge pass over every tiered partition led here.
func (b *Broker) mergeTierRound(ctx context.Context, now time.Time) {
	if b.compactor == nil {
		return
	}
	for _, p := range b.parts.localPartitions() {
		if ctx.Err() != nil {
			return
		}
		if !p.isLeader() || !b.tieringEnabled(p.topic, p.config()) {
			continue
		}
		in, out, err := b.mergePartition(ctx, p, now)
		b.tiering.mu.Lock()
		b.tiering.counters.MergePasses++
		b.tiering.counters.MergeObjectsIn += int64(in)
		b.tiering.counters.MergeObjectsOut += int64(out)
		b.tiering.mu.Unlock()
		switch {
		case err != nil && errors.Is(err, metadata.ErrTierEntriesChanged):
			b.log.Info("merging tiered objects: the manifest changed meanwhile; next pass", "topic", p.topic,
				"partition", p.index, "err", err)
		case err != nil && ctx.Err() == nil:
			b.log.Warn("merging tiered objects failed", "topic", p.topic, "partition", p.index, "err", err)
		}
		if in > 0 {
			b.log.Info("merged small tiered objects", "topic", p.topic, "partition", p.index,
				"objects_in", in, "objects_out", out)
		}
	}
}

// mergePartition merges p's small objects until nothing is left to merge
// (merged objects may form a run with their neighbours) and returns how
// many objects it replaced and wrote.
func (b *Broker) mergePartition(ctx context.Context, p *partition, now time.Time) (in, out int, err error) {
	for {
		runs := b.planMerges(p, now)
		if len(runs) == 0 {
			return in, out, nil
		}
		for _, run := range runs {
			written, err := b.mergeRun(ctx, p, run)
			if err != nil {
				return in, out, err
			}
			in, out = in+len(run.Entries), out+written
			if written >= len(run.Entries) { // cannot happen (one object per run); never loop on it
				return in, out, fmt.Errorf("broker: merging %v wrote %d objects", run, written)
			}
		}
	}
}

// planMerges returns the runs of p's objects to merge now (none while the
// tiered cleaner is due on p).
func (b *Broker) planMerges(p *partition, now time.Time) []tier.MergeRun {
	cfg := p.config()
	entries := p.manifest.Segments(p.topicID, p.index)
	if len(entries) == 0 || (cfg.HasCompact() && b.cleaner.TierDue(cleanerView{b, p}, now)) {
		return nil
	}
	entries = entries[remoteDoomed(p, entries, cfg, now):]
	localStart := p.localLogStartOffset()
	pol := tier.MergePolicy{TargetBytes: cfg.SegmentBytes, Now: now, Grace: b.cfg.Tier.MergeGrace,
		MaxSpanMs: cfg.SegmentMs, Below: localStart}
	switch {
	case keepsLocalLog(p.topic): // never tier-cleaned; its local start does not move with time
		pol.Below, pol.Keep = math.MaxInt64, []int64{localStart}
	case cfg.HasCompact():
		pol.Keep = []int64{p.cleaned.TierCheckpoint()}
	}
	return tier.PlanMerges(entries, pol)
}

// mergeRun merges one run into one object and swaps it in; it returns the
// number of objects written.
func (b *Broker) mergeRun(ctx context.Context, p *partition, run tier.MergeRun) (int, error) {
	res, err := b.compactor.Compact(ctx, tier.CompactRun{Topic: p.topic, UploadEpoch: max(p.leaderEpoch(), 0),
		Entries: run.Entries, TargetBytes: max(p.config().SegmentBytes, 1), Rewrite: tier.CopyBatches})
	if err != nil {
		return 0, fmt.Errorf("merging %v: %w", run, err)
	}
	return len(res.News), nil
}
