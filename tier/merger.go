package tier

// Merging small objects (DESIGN.md §5, "The bucket is current"): rolling
// a trickling partition every half tier.upload.max.lag.ms (bound.go) puts
// one small object in the bucket per roll. Every MergeInterval the janitor
// runs a pass over each tiered partition led here, whatever its
// cleanup.policy:
//
//  1. PlanMerges picks runs of small objects (merge.go has the rules: old
//     enough by MergeGrace, at most segment.bytes and segment.ms per
//     merged object, each merge at least halving or filling).
//  2. Each run goes through the Compactor (shared with the tiered
//     cleaner) with CopyBatches: batches copied unchanged into one
//     object, indexes rebuilt, aborted entries kept, the last object's
//     producer snapshot carried over, the manifest swapped in one etcd
//     transaction, the old objects deleted after the compactor's grace
//     (Cleaning.DeleteCompactedObjects, from the janitor's delete tick).
//  3. The pass plans again from the swapped manifest until nothing is
//     left to merge, so a second pass finds nothing until new objects age.
//
// What a pass leaves alone:
//   - Objects not wholly below the leader's local log start. A follower
//     that restarts its log at that start reads the producer state from
//     the object ending exactly there; local retention moves the start one
//     local segment, that is one uploaded object, at a time, so merging
//     only what the leader no longer holds keeps every future start an
//     object boundary with its snapshot. __consumer_offsets keeps its
//     whole local log (Partition.KeepsLocalLog): its start does not move
//     with time, so everything may merge there except across that start.
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
)

// mergeTicks returns the channel of the janitor's merge ticks (nil, never
// ready, when merging is off or there is no compactor) and its stop function.
func (s *Service) mergeTicks() (<-chan time.Time, func()) {
	if s.cfg.MergeInterval < 0 || s.compactor == nil {
		return nil, func() {}
	}
	t := time.NewTicker(s.cfg.MergeInterval)
	return t.C, t.Stop
}

// MergeRound runs a merge pass over every tiered partition led here.
func (s *Service) MergeRound(ctx context.Context, now time.Time) {
	if s.compactor == nil {
		return
	}
	for _, p := range s.reg.LocalPartitions() {
		if ctx.Err() != nil {
			return
		}
		if !p.Leads() || !p.Tiered() {
			continue
		}
		in, out, err := s.mergePartition(ctx, p, now)
		s.count(func(c *Counters) {
			c.MergePasses++
			c.MergeObjectsIn += int64(in)
			c.MergeObjectsOut += int64(out)
		})
		idx := p.Key().Partition
		switch {
		case err != nil && errors.Is(err, metadata.ErrTierEntriesChanged):
			s.log.Info("merging tiered objects: the manifest changed meanwhile; next pass", "topic", p.Topic(),
				"partition", idx, "err", err)
		case err != nil && ctx.Err() == nil:
			s.log.Warn("merging tiered objects failed", "topic", p.Topic(), "partition", idx, "err", err)
		}
		if in > 0 {
			s.log.Info("merged small tiered objects", "topic", p.Topic(), "partition", idx,
				"objects_in", in, "objects_out", out)
		}
	}
}

// mergePartition merges p's small objects until nothing is left to merge
// (merged objects may form a run with their neighbours) and returns how
// many objects it replaced and wrote.
func (s *Service) mergePartition(ctx context.Context, p Partition, now time.Time) (in, out int, err error) {
	for {
		runs := s.PlanMerges(p, now)
		if len(runs) == 0 {
			return in, out, nil
		}
		for _, run := range runs {
			written, err := s.mergeRun(ctx, p, run)
			if err != nil {
				return in, out, err
			}
			in, out = in+len(run.Entries), out+written
			if written >= len(run.Entries) { // cannot happen (one object per run); never loop on it
				return in, out, fmt.Errorf("tier: merging %v wrote %d objects", run, written)
			}
		}
	}
}

// PlanMerges returns the runs of p's objects to merge now (none while the
// tiered cleaner is due on p).
func (s *Service) PlanMerges(p Partition, now time.Time) []MergeRun {
	cfg, k := p.Config(), p.Key()
	entries := s.manifest.Segments(k.TopicID, k.Partition)
	if len(entries) == 0 || (cfg.HasCompact() && s.cleaning != nil && s.cleaning.TierCleanerDue(p, cfg, now)) {
		return nil
	}
	entries = entries[s.remoteDoomed(p, entries, cfg, now):]
	localStart := p.Log().LogStartOffset()
	pol := MergePolicy{TargetBytes: cfg.SegmentBytes, Now: now, Grace: s.cfg.MergeGrace,
		MaxSpanMs: cfg.SegmentMs, Below: localStart}
	switch {
	case p.KeepsLocalLog(): // never tier-cleaned; its local start does not move with time
		pol.Below, pol.Keep = math.MaxInt64, []int64{localStart}
	case cfg.HasCompact() && s.cleaning != nil:
		pol.Keep = []int64{s.cleaning.TierCheckpoint(p)}
	}
	return PlanMerges(entries, pol)
}

// mergeRun merges one run into one object and swaps it in; it returns the
// number of objects written.
func (s *Service) mergeRun(ctx context.Context, p Partition, run MergeRun) (int, error) {
	res, err := s.compactor.Compact(ctx, CompactRun{Topic: p.Topic(), UploadEpoch: max(p.LeaderEpoch(), 0),
		Entries: run.Entries, TargetBytes: max(p.Config().SegmentBytes, 1), Rewrite: CopyBatches})
	if err != nil {
		return 0, fmt.Errorf("merging %v: %w", run, err)
	}
	return len(res.News), nil
}
