package broker

// The log cleaner (issue 7, DESIGN.md §7): cleanup.policy=compact topics
// keep the latest record per key. One goroutine per broker; each round it
// picks the dirtiest eligible partition this broker holds a replica of
// (every replica cleans its own log, as in Kafka; cleaning never changes
// offsets, so followers and leaders stay consistent) and runs one pass:
//
//  1. firstUncleanable = min(HW, LSO, start of the segments younger than
//     min.compaction.lag.ms) and, for a tiered partition, the end of what
//     the bucket holds (segments are cleaned locally only once uploaded, so
//     an object never has a gap that the manifest would see; the bucket's
//     copy is cleaned by the tiered pass, cleaner_tier.go).
//  2. The offset map (compaction.OffsetMap, CleanerConfig.DedupeBufferBytes)
//     is filled from the cleaner checkpoint over the dirty sealed segments;
//     a partition whose dirty range does not fit is cleaned in several
//     passes (the map ends at a batch boundary, mapEnd).
//  3. Every cleanable segment from the first one up to the one holding
//     mapEnd-1 is rewritten, one cleaned segment per old segment (so the
//     producer snapshots, taken at rolls, stay at segment boundaries), and
//     the run is swapped in by hotlog.ReplaceSegments (crash-safe).
//  4. The checkpoint moves to mapEnd.
//
// Reads and writes of a pass are paced by CleanerConfig.IOBytesPerSecond.
// A pass that finds its segments changed (retention, truncation) gives up
// and the partition is picked again later.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier"
)

// CleanerConfig configures the log cleaner. Zero values get Kafka's defaults.
type CleanerConfig struct {
	// Disable turns the cleaner off (log.cleaner.enable=false).
	Disable bool
	// DedupeBufferBytes is the memory of one pass's key→offset map
	// (log.cleaner.dedupe.buffer.size). Default 128 MiB.
	DedupeBufferBytes int64
	// IOBytesPerSecond caps the bytes a pass reads and writes per second
	// (log.cleaner.io.max.bytes.per.second). 0: unlimited.
	IOBytesPerSecond int64
	// Backoff is the pause when no partition needs cleaning
	// (log.cleaner.backoff.ms). Default 15s.
	Backoff time.Duration
	// ObjectDeleteGrace is how long a tiered object replaced by tiered
	// cleaning stays in the bucket, so cold reads in flight finish.
	// Default 5m.
	ObjectDeleteGrace time.Duration
}

func (c CleanerConfig) withDefaults() CleanerConfig {
	if c.DedupeBufferBytes == 0 {
		c.DedupeBufferBytes = 128 << 20
	}
	if c.Backoff == 0 {
		c.Backoff = 15 * time.Second
	}
	if c.ObjectDeleteGrace == 0 {
		c.ObjectDeleteGrace = tier.DefaultDeleteGrace
	}
	return c
}

func (c CleanerConfig) validate() error {
	if c.DedupeBufferBytes < 1<<10 || c.IOBytesPerSecond < 0 || c.Backoff < 0 || c.ObjectDeleteGrace < 0 {
		return fmt.Errorf("%w: cleaner: dedupe buffer %d (≥ 1 KiB), io rate %d, backoff %v",
			ErrInvalidConfig, c.DedupeBufferBytes, c.IOBytesPerSecond, c.Backoff)
	}
	return nil
}

// maxCleanerBatch bounds one stored batch read by the cleaner (a segment
// holds batches of at most message.max.bytes, far below this).
const maxCleanerBatch = 64 << 20

// cleanerLoop runs cleaning rounds until the broker stops.
func (b *Broker) cleanerLoop() {
	defer b.loops.Done()
	cfg := b.cfg.Cleaner
	for {
		cleaned := b.cleanOnce(b.lifetime, time.Now())
		cleaned = b.cleanTierOnce(b.lifetime, time.Now()) || cleaned
		b.deleteCompactedObjects(b.lifetime)
		wait := cfg.Backoff
		if cleaned {
			wait = 0
		}
		select {
		case <-b.lifetime.Done():
			return
		case <-time.After(wait):
		}
	}
}

// cleanCandidate is a partition that needs a pass.
type cleanCandidate struct {
	p                *partition
	firstUncleanable int64
	ratio            float64
}

// cleanOnce runs one pass on the dirtiest eligible partition; it reports
// whether one ran.
func (b *Broker) cleanOnce(ctx context.Context, now time.Time) bool {
	cands := b.cleanCandidates(now)
	if len(cands) == 0 {
		return false
	}
	c := cands[0]
	stats, err := b.cleanPartition(ctx, c.p, c.firstUncleanable, now)
	switch {
	case errors.Is(err, hotlog.ErrSegmentsChanged), errors.Is(err, errNothingToClean):
		return false
	case err != nil:
		if ctx.Err() == nil {
			b.log.Warn("cleaning failed", "topic", c.p.topic, "partition", c.p.index, "err", err)
		}
		return false
	}
	c.p.cleaned.add(stats)
	b.log.Info("cleaned", "topic", c.p.topic, "partition", c.p.index, "dirty_ratio", fmt.Sprintf("%.2f", c.ratio),
		"bytes_in", stats.BytesIn, "bytes_out", stats.BytesOut, "records_in", stats.RecordsIn, "records_out", stats.RecordsOut,
		"tombstones_dropped", stats.TombstonesDropped, "tombstones_kept", stats.TombstonesKept)
	return true
}

// cleanCandidates lists the compacted partitions due for a pass, dirtiest
// first: dirty ratio at least min.cleanable.dirty.ratio, or a dirty segment
// older than max.compaction.lag.ms.
func (b *Broker) cleanCandidates(now time.Time) []cleanCandidate {
	var out []cleanCandidate
	for _, p := range b.parts.localPartitions() {
		cfg := p.config()
		if !cfg.HasCompact() {
			continue
		}
		fu := b.firstUncleanable(p, now)
		clean, dirty := p.log.CleanableBytes(fu)
		due := tombstonesDue(&p.cleaned.keptTombstoneTs, now, cfg.DeleteRetentionMs)
		if dirty == 0 && !due {
			continue
		}
		ratio := float64(dirty) / float64(max(clean+dirty, 1))
		if ratio >= cfg.MinCleanableDirtyRatio || due || b.pastMaxCompactionLag(p, fu, now) {
			out = append(out, cleanCandidate{p: p, firstUncleanable: fu, ratio: ratio})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ratio > out[j].ratio })
	return out
}

// pastMaxCompactionLag: the oldest dirty segment holds a record older than
// max.compaction.lag.ms (its first batch's age is bounded by the segment's
// max timestamp; a segment is judged by that, conservatively late).
func (b *Broker) pastMaxCompactionLag(p *partition, fu int64, now time.Time) bool {
	lag := p.config().MaxCompactionLagMs
	if lag <= 0 || lag == math.MaxInt64 {
		return false
	}
	checkpoint := p.log.CleanerCheckpoint()
	for _, s := range p.log.CleanableSegments(fu) {
		if s.RangeEnd > checkpoint {
			return s.MaxTimestamp < now.UnixMilli()-lag
		}
	}
	return false
}

// firstUncleanable is the first offset a pass on p may not touch.
func (b *Broker) firstUncleanable(p *partition, now time.Time) int64 {
	fu := min(p.highWatermark(), p.lastStableOffset())
	if b.tieringEnabled(p.topic, p.config()) {
		covered, ok := p.manifest.ContiguousEnd(p.topicID, p.index)
		if !ok {
			return 0
		}
		fu = min(fu, covered)
	}
	if lag := p.config().MinCompactionLagMs; lag > 0 {
		for _, s := range p.log.CleanableSegments(fu) {
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
	return min(limit, max(dirtyOffsets*compaction.SlotBytes*10/9+compaction.SlotBytes, 64<<10))
}

// errNothingToClean: the partition's dirty range vanished (retention).
var errNothingToClean = errors.New("broker: nothing to clean")

// cleanPartition runs one pass over p's log.
func (b *Broker) cleanPartition(ctx context.Context, p *partition, fu int64, now time.Time) (compaction.Stats, error) {
	segs := p.log.CleanableSegments(fu)
	checkpoint := p.log.CleanerCheckpoint()
	if len(segs) == 0 || segs[len(segs)-1].RangeEnd <= checkpoint &&
		!tombstonesDue(&p.cleaned.keptTombstoneTs, now, p.config().DeleteRetentionMs) {
		return compaction.Stats{}, errNothingToClean
	}
	pace := newPacer(ctx, b.cfg.Cleaner.IOBytesPerSecond)
	aborted := p.log.AbortedTxns(segs[0].BaseOffset, p.log.LogEndOffset())
	dirtyOffsets := segs[len(segs)-1].RangeEnd - max(checkpoint, segs[0].BaseOffset)
	m := compaction.NewOffsetMap(offsetMapBudget(b.cfg.Cleaner.DedupeBufferBytes, dirtyOffsets))
	mapEnd, err := compaction.BuildMap(m, b.segmentBatches(p, segs, checkpoint, pace), checkpoint,
		segs[len(segs)-1].RangeEnd, aborted, maxCleanerBatch)
	if err != nil {
		return compaction.Stats{}, fmt.Errorf("building the offset map: %w", err)
	}
	run := segs
	for i, s := range segs {
		if s.RangeEnd >= mapEnd {
			run = segs[:i+1]
			break
		}
	}
	cfg := p.config()
	// CleanableSegments starts at the first segment holding data above the
	// local log start, so the run starts at the log start unless the
	// bucket holds older offsets.
	fromLogStart := true
	if start, _, ok := p.tieredRange(); ok && start < run[0].BaseOffset {
		fromLogStart = false
	}
	policy := compaction.Policy{Map: m, MapEnd: mapEnd, NowMs: now.UnixMilli(), DeleteRetentionMs: max(cfg.DeleteRetentionMs, 0),
		Aborted: aborted, FromLogStart: fromLogStart}
	if !policy.FromLogStart {
		// Older values of a key may live below the local log (in the
		// bucket): a tombstone dropped here could bring them back.
		policy.DeleteRetentionMs = math.MaxInt64 / 2
	}
	stats, err := b.rewriteRun(p, run, policy, pace)
	if err != nil {
		return stats, err
	}
	if policy.FromLogStart {
		p.cleaned.keptTombstoneTs.Store(keptTombstones(stats))
	}
	return stats, p.log.SetCleanerCheckpoint(mapEnd)
}

// rewriteRun rewrites run (two passes of the rewriter) into cleaned
// segments and swaps them in. Consecutive old segments whose input fits in
// segment.bytes become one cleaned segment (as Kafka groups them), so
// segments emptied by cleaning do not pile up; each cleaned segment still
// ends where an old one did, at a roll point with a producer snapshot.
func (b *Broker) rewriteRun(p *partition, run []hotlog.SegmentInfo, policy compaction.Policy, pace *pacer) (compaction.Stats, error) {
	rw := compaction.NewRewriter(policy)
	defer rw.Close()
	if err := b.forEachBatch(p, run, pace, rw.Plan); err != nil {
		return compaction.Stats{}, err
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
	for i, group := range groupSegments(run, p.config().SegmentBytes) {
		// A group whose output is empty gets no segment, except the first
		// (the replacement starts at the run's base): the segment before
		// then covers its range.
		var c *hotlog.CleanedSegment
		open := func() error {
			var err error
			if c, err = p.log.NewCleanedSegment(group[0].BaseOffset); err == nil {
				cleaned = append(cleaned, c)
			}
			return err
		}
		if i == 0 {
			if err := open(); err != nil {
				return rw.Stats(), err
			}
		}
		err := b.forEachBatch(p, group, pace, func(batch []byte) error {
			out, kept, err := rw.Batch(batch)
			if err != nil || !kept {
				return err
			}
			if c == nil {
				if err := open(); err != nil {
					return err
				}
			}
			pace.wait(len(out))
			return c.Append(out)
		})
		if err != nil {
			return rw.Stats(), err
		}
	}
	return rw.Stats(), p.log.ReplaceSegments(bases, cleaned)
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
func (b *Broker) forEachBatch(p *partition, segs []hotlog.SegmentInfo, pace *pacer, fn func([]byte) error) error {
	src := b.segmentBatches(p, segs, 0, pace)
	defer src.close()
	return eachBatch(src, fn)
}

// segmentSource chains the batches of several sealed segments (skipping
// segments wholly below from), paced.
type segmentSource struct {
	p    *partition
	segs []hotlog.SegmentInfo
	pace *pacer
	cur  *compaction.BatchReader
	done func()
	err  error
}

func (b *Broker) segmentBatches(p *partition, segs []hotlog.SegmentInfo, from int64, pace *pacer) *segmentSource {
	i := 0
	for i < len(segs) && segs[i].RangeEnd <= from {
		i++
	}
	return &segmentSource{p: p, segs: segs[i:], pace: pace}
}

// Next implements compaction.BatchSource.
func (s *segmentSource) Next() ([]byte, error) {
	for {
		if s.cur == nil {
			if len(s.segs) == 0 {
				return nil, io.EOF
			}
			f, size, err := s.p.log.OpenSealedSegment(s.segs[0].BaseOffset)
			if err != nil {
				return nil, err
			}
			s.segs = s.segs[1:]
			s.cur, s.done = compaction.NewBatchReader(io.NewSectionReader(f, 0, size), maxCleanerBatch), func() { f.Close() }
		}
		batch, err := s.cur.Next()
		if errors.Is(err, io.EOF) {
			s.close()
			continue
		}
		if err != nil {
			return nil, err
		}
		s.pace.wait(len(batch))
		return batch, nil
	}
}

func (s *segmentSource) close() {
	if s.done != nil {
		s.done()
	}
	s.cur, s.done = nil, nil
}

// pacer limits a pass's I/O to a byte rate (nil rate: no limit).
type pacer struct {
	ctx   context.Context
	rate  int64
	start time.Time
	bytes int64
}

func newPacer(ctx context.Context, rate int64) *pacer {
	return &pacer{ctx: ctx, rate: rate, start: time.Now()}
}

// wait accounts n bytes and sleeps until the average rate is within bounds.
func (p *pacer) wait(n int) {
	if p.rate <= 0 {
		return
	}
	p.bytes += int64(n)
	due := p.start.Add(time.Duration(float64(p.bytes) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		select {
		case <-time.After(d):
		case <-p.ctx.Done():
		}
	}
}

// cleanerTotals accumulates a partition's cleaning passes.
type cleanerTotals struct {
	passes, bytesIn, bytesOut, recordsIn, recordsOut atomic.Int64
	lastMs                                           atomic.Int64
	// keptTombstoneTs is the largest batch timestamp of the tombstones the
	// last pass had to keep (younger than delete.retention.ms; 0: none):
	// once it is delete.retention.ms old, as configured then, a pass runs
	// even with no new dirty data. In memory only: after a restart the next
	// pass with dirty data drops them.
	keptTombstoneTs atomic.Int64
	// tierCheckpoint and tierKeptTombstoneTs are the same for the bucket's
	// copy (cleaner_tier.go), kept by the leader in memory.
	tierCheckpoint      atomic.Int64
	tierKeptTombstoneTs atomic.Int64
}

// tombstonesDue: the tombstones kept by the last pass (ts their newest
// batch timestamp) are past delete.retention.ms now.
func tombstonesDue(ts *atomic.Int64, now time.Time, retentionMs int64) bool {
	kept := ts.Load()
	return kept > 0 && retentionMs >= 0 && now.UnixMilli()-kept > retentionMs
}

// keptTombstones is what a pass leaves for tombstonesDue.
func keptTombstones(s compaction.Stats) int64 {
	if s.TombstonesKept == 0 {
		return 0
	}
	return max(s.KeptTombstoneMaxTimestamp, 1)
}

func (t *cleanerTotals) add(s compaction.Stats) {
	t.passes.Add(1)
	t.bytesIn.Add(s.BytesIn)
	t.bytesOut.Add(s.BytesOut)
	t.recordsIn.Add(s.RecordsIn)
	t.recordsOut.Add(s.RecordsOut)
	t.lastMs.Store(time.Now().UnixMilli())
}
