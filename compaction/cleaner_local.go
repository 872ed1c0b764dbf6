package compaction

// The local pass (DESIGN.md §7): cleanup.policy=compact topics keep the
// latest record per key. Each round picks the dirtiest eligible partition
// this broker holds a replica of (every replica cleans its own log, as in
// Kafka; cleaning never changes offsets, so followers and leaders stay
// consistent) and runs one pass:
//
//  1. firstUncleanable = min(HW, LSO, start of the segments younger than
//     min.compaction.lag.ms) and, for a tiered partition, the end of what
//     the bucket holds (segments are cleaned locally only once uploaded, so
//     an object never has a gap that the manifest would see; the bucket's
//     copy is cleaned by the tiered pass, cleaner_tier.go).
//  2. The offset map (OffsetMap, CleanerConfig.DedupeBufferBytes) is filled
//     from the cleaner checkpoint over the dirty sealed segments; a
//     partition whose dirty range does not fit is cleaned in several passes
//     (the map ends at a batch boundary, mapEnd).
//  3. Every cleanable segment from the first one up to the one holding
//     mapEnd-1 is rewritten, consecutive segments grouped up to
//     segment.bytes (so the producer snapshots, taken at rolls, stay at
//     segment boundaries), and the run is swapped in by
//     hotlog.ReplaceSegments (crash-safe).
//  4. The checkpoint moves to mapEnd.
//
// Reads and writes of a pass are paced by CleanerConfig.IOBytesPerSecond.
// A pass that finds its segments changed (retention, truncation) gives up
// and the partition is picked again later.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier"
)

// candidate is a partition that needs a local pass.
type candidate struct {
	p                Partition
	firstUncleanable int64
	ratio            float64
}

// CleanOnce runs one local pass on the dirtiest eligible partition; it
// reports whether one ran.
func (c *Cleaner) CleanOnce(ctx context.Context, now time.Time) bool {
	cands := c.candidates(now)
	if len(cands) == 0 {
		return false
	}
	best := cands[0]
	stats, err := c.cleanPartition(ctx, best.p, best.firstUncleanable, now)
	switch {
	case errors.Is(err, hotlog.ErrSegmentsChanged), errors.Is(err, ErrNothingToClean):
		return false
	case err != nil && ctx.Err() != nil:
		return false
	case err != nil:
		best.p.State().uncleanable.Store(true)
		c.log.Error("cleaning failed: partition marked uncleanable until restart, other partitions are cleaned on",
			"topic", best.p.Topic(), "partition", best.p.Index(), "err", err)
		return false
	}
	best.p.State().add(stats)
	c.logPass("cleaned", best.p, best.ratio, stats,
		"tombstones_dropped", stats.TombstonesDropped, "tombstones_kept", stats.TombstonesKept)
	return true
}

// candidates lists the compacted partitions due for a pass, dirtiest
// first: dirty ratio at least min.cleanable.dirty.ratio, or a dirty segment
// older than max.compaction.lag.ms, or kept tombstones now due.
func (c *Cleaner) candidates(now time.Time) []candidate {
	var out []candidate
	for _, p := range c.parts.Local() {
		cfg := p.Config()
		if !cfg.HasCompact() || p.State().Uncleanable() {
			continue
		}
		fu := c.FirstUncleanable(p, now)
		clean, dirty := p.Log().CleanableBytes(fu)
		due := p.State().tombstonesDue(now, cfg.DeleteRetentionMs)
		if dirty == 0 && !due {
			continue
		}
		r := ratio(clean, dirty)
		if r >= cfg.MinCleanableDirtyRatio || due || pastMaxCompactionLag(p, fu, now) {
			out = append(out, candidate{p: p, firstUncleanable: fu, ratio: r})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ratio > out[j].ratio })
	return out
}

// pastMaxCompactionLag: the oldest dirty segment holds a record older than
// max.compaction.lag.ms (its first batch's age is bounded by the segment's
// max timestamp; a segment is judged by that, conservatively late).
func pastMaxCompactionLag(p Partition, fu int64, now time.Time) bool {
	lag := p.Config().MaxCompactionLagMs
	if lag <= 0 || lag == math.MaxInt64 {
		return false
	}
	checkpoint := p.Log().CleanerCheckpoint()
	for _, s := range p.Log().CleanableSegments(fu) {
		if s.RangeEnd > checkpoint {
			return s.MaxTimestamp < now.UnixMilli()-lag
		}
	}
	return false
}

// FirstUncleanable is the first offset a local pass on p may not touch
// (see the pass's step 1 above).
func (c *Cleaner) FirstUncleanable(p Partition, now time.Time) int64 {
	fu := min(p.HighWatermark(), p.LastStableOffset())
	if p.Tiered() {
		covered, ok := c.manifest.ContiguousEnd(p.TopicID(), p.Index())
		if !ok {
			return 0
		}
		fu = min(fu, covered)
	}
	if lag := p.Config().MinCompactionLagMs; lag > 0 {
		for _, s := range p.Log().CleanableSegments(fu) {
			if s.MaxTimestamp > now.UnixMilli()-lag {
				return min(fu, s.BaseOffset)
			}
		}
	}
	return fu
}

// offsetMapBudget sizes a pass's offset map by the offsets of its dirty
// range (at most one key each: a compressed batch holds far more records
// than its bytes suggest), with the map's 90% fill. Never above the
// configured buffer (a larger range is cleaned in several passes), never
// tiny.
func offsetMapBudget(limit, dirtyOffsets int64) int64 {
	return min(limit, max(dirtyOffsets*SlotBytes*10/9+SlotBytes, 64<<10))
}

// CleanPartition runs one local pass over p's log, whether or not p is due,
// without counting it in p's totals (CleanOnce does); ErrNothingToClean
// when its dirty range is empty and no kept tombstone is due.
func (c *Cleaner) CleanPartition(ctx context.Context, p Partition, now time.Time) (Stats, error) {
	return c.cleanPartition(ctx, p, c.FirstUncleanable(p, now), now)
}

func (c *Cleaner) cleanPartition(ctx context.Context, p Partition, fu int64, now time.Time) (Stats, error) {
	log, state := p.Log(), p.State()
	segs := log.CleanableSegments(fu)
	checkpoint := log.CleanerCheckpoint()
	if len(segs) == 0 || segs[len(segs)-1].RangeEnd <= checkpoint &&
		!state.tombstonesDue(now, p.Config().DeleteRetentionMs) {
		return Stats{}, ErrNothingToClean
	}
	pace := newPacer(ctx, c.tuning().IOBytesPerSecond)
	aborted := log.AbortedTxns(segs[0].BaseOffset, log.LogEndOffset())
	dirtyOffsets := segs[len(segs)-1].RangeEnd - max(checkpoint, segs[0].BaseOffset)
	m := NewOffsetMap(offsetMapBudget(c.tuning().DedupeBufferBytes, dirtyOffsets))
	mapEnd, err := BuildMap(m, segmentBatches(log, segs, checkpoint, pace), checkpoint,
		segs[len(segs)-1].RangeEnd, aborted, maxCleanerBatch)
	if err != nil {
		return Stats{}, fmt.Errorf("building the offset map: %w", err)
	}
	run := segs
	for i, s := range segs {
		if s.RangeEnd >= mapEnd {
			run = segs[:i+1]
			break
		}
	}
	cfg := p.Config()
	// CleanableSegments starts at the first segment holding data above the
	// local log start, so the run starts at the log start unless the
	// bucket holds older offsets.
	fromLogStart := true
	if start, _, ok := c.manifest.Range(p.TopicID(), p.Index()); ok && start < run[0].BaseOffset {
		fromLogStart = false
	}
	policy := Policy{Map: m, MapEnd: mapEnd, NowMs: now.UnixMilli(), DeleteRetentionMs: max(cfg.DeleteRetentionMs, 0),
		Aborted: aborted, FromLogStart: fromLogStart}
	if !policy.FromLogStart {
		// Older values of a key may live below the local log (in the
		// bucket): a tombstone dropped here could bring them back.
		policy.DeleteRetentionMs = math.MaxInt64 / 2
	}
	stats, err := rewriteRun(log, run, cfg.SegmentBytes, policy, pace)
	if err != nil {
		return stats, err
	}
	if policy.FromLogStart {
		state.keptTombstoneTs.Store(keptTombstones(stats))
	}
	return stats, log.SetCleanerCheckpoint(mapEnd)
}

// rewriteRun rewrites run (two passes of the rewriter) into cleaned
// segments and swaps them in. Consecutive old segments whose input fits in
// segmentBytes become one cleaned segment (as Kafka groups them), so
// segments emptied by cleaning do not pile up; each cleaned segment still
// ends where an old one did, at a roll point with a producer snapshot.
func rewriteRun(log Log, run []hotlog.SegmentInfo, segmentBytes int64, policy Policy, pace *pacer) (Stats, error) {
	rw := NewRewriter(policy)
	defer rw.Close()
	if err := forEachBatch(log, run, pace, rw.Plan); err != nil {
		return Stats{}, err
	}
	var cleaned []*hotlog.CleanedSegment
	defer func() {
		for _, c := range cleaned {
			c.Abort() // a no-op for segments the replace took
		}
	}()
	bases := make([]int64, len(run))
	for i, s := range run {
		bases[i] = s.BaseOffset
	}
	for i, group := range groupSegments(run, segmentBytes) {
		// A group whose output is empty gets no segment, except the first
		// (the replacement starts at the run's base): the segment before
		// then covers its range.
		var dst *hotlog.CleanedSegment
		open := func() error {
			var err error
			if dst, err = log.NewCleanedSegment(group[0].BaseOffset); err == nil {
				cleaned = append(cleaned, dst)
			}
			return err
		}
		if i == 0 {
			if err := open(); err != nil {
				return rw.Stats(), err
			}
		}
		err := forEachBatch(log, group, pace, func(batch []byte) error {
			out, kept, err := rw.Batch(batch)
			if err != nil || !kept {
				return err
			}
			if dst == nil {
				if err := open(); err != nil {
					return err
				}
			}
			pace.wait(len(out))
			return dst.Append(out)
		})
		if err != nil {
			return rw.Stats(), err
		}
	}
	return rw.Stats(), log.ReplaceSegments(bases, cleaned)
}

// groupSegments splits run into consecutive groups whose input bytes fit
// in segmentBytes (a group holds at least one segment) and whose offsets
// stay within a segment's 32-bit relative index.
func groupSegments(run []hotlog.SegmentInfo, segmentBytes int64) [][]hotlog.SegmentInfo {
	var groups [][]hotlog.SegmentInfo
	start, size := 0, int64(0)
	for i, s := range run {
		if i > start && (size+s.Size > segmentBytes || s.RangeEnd-run[start].BaseOffset > math.MaxInt32) {
			groups = append(groups, run[start:i])
			start, size = i, 0
		}
		size += s.Size
	}
	return append(groups, run[start:])
}

// forEachBatch calls fn with every batch of segs, in order.
func forEachBatch(log Log, segs []hotlog.SegmentInfo, pace *pacer, fn func([]byte) error) error {
	src := segmentBatches(log, segs, 0, pace)
	defer src.close()
	return tier.CopyBatches(src, fn)
}
