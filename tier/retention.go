package tier

// Retention across tiers: local retention of a tiered partition deletes
// only segments the manifest already holds; on the leader, retention.ms
// and retention.bytes then remove the oldest manifest entries (less those
// a retention hold keeps for consumer groups, hold.go), and their objects
// are deleted ObjectDeleteDelay later. Local retention is never held.
// Diskless partitions (package diskless) apply RetentionDoomed to their
// merged objects and hand those to DeleteObjectsLater.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// localDeleteLimit is the offset below which local retention may delete
// segments of a tiered partition: the end of the gap-free run of manifest
// entries when that run starts at or below the local log start, and never
// less than the tiered log start (offsets below it are deleted anyway).
// Nothing is deletable by time or size before its entry is committed.
func (s *Service) localDeleteLimit(p Partition) int64 {
	k := p.Key()
	limit := s.manifest.LogStart(k.TopicID, k.Partition)
	first, _, ok := s.manifest.Range(k.TopicID, k.Partition)
	if end, _ := s.manifest.ContiguousEnd(k.TopicID, k.Partition); ok && first <= p.Log().LogStartOffset() {
		limit = max(limit, end)
	}
	return limit
}

// ApplyRetention runs every local log's retention; tiered partitions keep
// every segment the manifest does not hold yet, and (on the leader) apply
// retention.ms/bytes to the bucket. ctx bounds the bucket's part.
// Holds are read from the store at most once per pass (holdsLoader).
func (s *Service) ApplyRetention(ctx context.Context, now time.Time) {
	holds := newHoldsLoader(s)
	led := map[metadata.TierPartition]bool{}
	for _, p := range s.reg.LocalPartitions() {
		if s.applyRetention(ctx, p, now, holds) {
			led[p.Key()] = true
		}
	}
	s.forgetHeldExcept(led)
}

// applyRetention runs p's local retention and, on the leader, its remote
// retention; it reports whether the remote part ran.
func (s *Service) applyRetention(ctx context.Context, p Partition, now time.Time, holds *holdsLoader) bool {
	tiered := p.Tiered()
	var n int
	var err error
	if tiered {
		n, err = p.Log().ApplyRetentionBelow(now, s.localDeleteLimit(p))
	} else {
		n, err = p.Log().ApplyRetention(now)
	}
	switch {
	case err != nil && !errors.Is(err, hotlog.ErrClosed):
		s.log.Warn("retention failed", "topic", p.Topic(), "partition", p.Key().Partition, "err", err)
	case n > 0:
		s.log.Info("retention deleted segments", "topic", p.Topic(), "partition", p.Key().Partition, "segments", n, "tiered", tiered)
	}
	if tiered && n > 0 {
		s.count(func(c *Counters) { c.LocalSegmentsFreed += int64(n) })
	}
	if s.objects == nil || !p.Leads() {
		return false
	}
	if err := s.applyRemoteRetention(ctx, p, now, holds); err != nil && ctx.Err() == nil {
		s.log.Warn("remote retention failed", "topic", p.Topic(), "partition", p.Key().Partition, "err", err)
	}
	return true
}

// remoteDoomed counts the oldest manifest entries that retention removes
// from p (RetentionDoomed over the whole log: tiered bytes plus the local
// bytes above the tiered range).
func (s *Service) remoteDoomed(p Partition, entries []metadata.TierEntry, cfg metadata.TopicConfig, now time.Time) int {
	return RetentionDoomed(entries, s.logStart(p), cfg, localBytesAbove(p.Log(), entries), now)
}

// RetentionDoomed counts the oldest of a partition's manifest entries
// (sorted by base offset) that total retention removes: those wholly below
// logStart, then, when cfg.cleanup.policy has delete, by retention.ms (max
// timestamp older than now - retention.ms), then by retention.bytes: the
// next oldest goes while the whole log without it (the entries' sizes plus
// bytesAbove, the log's bytes above the last entry) is still at least
// retention.bytes. Pure; diskless partitions apply the same rule to their
// merged objects.
func RetentionDoomed(entries []metadata.TierEntry, logStart int64, cfg metadata.TopicConfig, bytesAbove int64, now time.Time) int {
	n := 0
	for n < len(entries) && entries[n].LastOffset < logStart {
		n++
	}
	if !cfg.HasDelete() {
		return n
	}
	if cfg.RetentionMs >= 0 {
		limit := now.UnixMilli() - cfg.RetentionMs
		for n < len(entries) && entries[n].MaxTimestamp < limit {
			n++
		}
	}
	if cfg.RetentionBytes >= 0 {
		total := bytesAbove
		for _, e := range entries[n:] {
			total += e.Size
		}
		for n < len(entries) && total-entries[n].Size >= cfg.RetentionBytes {
			total -= entries[n].Size
			n++
		}
	}
	return n
}

// localBytesAbove is the size of the local segments above the tiered
// range (entries not empty).
func localBytesAbove(log *hotlog.Log, entries []metadata.TierEntry) int64 {
	var total int64
	tieredEnd := entries[len(entries)-1].LastOffset + 1
	for _, seg := range log.SealedSegments() {
		if seg.BaseOffset >= tieredEnd {
			total += seg.Size
		}
	}
	return total + activeSegmentBytes(log)
}

// activeSegmentBytes is the hot log's size minus its sealed segments.
func activeSegmentBytes(log *hotlog.Log) int64 {
	size := log.Size()
	for _, seg := range log.SealedSegments() {
		size -= seg.Size
	}
	return max(size, 0)
}

// applyRemoteRetention removes the entries remoteDoomed picks, less those
// a retention hold keeps (hold.go): first the log start moves past them,
// then the entries go from etcd (CAS on their versions), and their objects
// are deleted ObjectDeleteDelay later.
func (s *Service) applyRemoteRetention(ctx context.Context, p Partition, now time.Time, holds *holdsLoader) error {
	k := p.Key()
	entries := s.manifest.Segments(k.TopicID, k.Partition)
	n, held := 0, HeldStatus{}
	if len(entries) > 0 {
		cfg := p.Config()
		n = s.remoteDoomed(p, entries, cfg, now)
		if s.cfg.Holds(cfg) {
			n, held = s.applyHold(ctx, p, entries, n, cfg, now, holds)
		}
	}
	s.setHeld(k, held)
	if n == 0 {
		return nil
	}
	doomed := entries[:n]
	if err := s.RaiseLogStart(ctx, p, doomed[n-1].LastOffset+1); err != nil {
		return err
	}
	if err := s.store.DeleteTierEntries(ctx, k.TopicID, k.Partition, doomed); err != nil {
		return fmt.Errorf("delete manifest entries: %w", err)
	}
	s.manifest.Removed(doomed)
	keys := make([]string, n)
	for i, e := range doomed {
		keys[i] = e.Key
	}
	s.DeleteObjectsLater(keys, now)
	s.count(func(c *Counters) { c.RemoteEntriesGone += int64(n) })
	s.log.Info("remote retention removed tiered segments", "topic", p.Topic(), "partition", k.Partition,
		"segments", n, "log_start", doomed[n-1].LastOffset+1)
	return nil
}

// applyHold lowers doomed, the count of entries retention would delete,
// to what the partition's groups allow (decideHold), and says what stays.
// Holds are read only when some doomed entry lies at or above the log
// start. If they cannot be read, only the entries below the log start go,
// for this pass: the hold fails safe.
func (s *Service) applyHold(ctx context.Context, p Partition, entries []metadata.TierEntry, doomed int,
	cfg metadata.TopicConfig, now time.Time, holds *holdsLoader) (int, HeldStatus) {
	k := p.Key()
	start := s.logStart(p)
	lost := belowOffset(entries[:doomed], start)
	if lost == doomed {
		return doomed, HeldStatus{}
	}
	published, err := holds.of(ctx, k)
	if err != nil {
		return lost, heldStatus(entries[lost:doomed], nil)
	}
	rule := holdRule{retentionMs: cfg.RetentionMs, window: s.cfg.HoldActiveWindow}
	rule.ms, rule.bytes = s.cfg.EffectiveHold(cfg)
	d := decideHold(entries, doomed, start, published, rule, now)
	return d.deletable, d.held
}

// setHeld records the partition's hold as of this pass (Status shows it).
func (s *Service) setHeld(k metadata.TierPartition, st HeldStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.Objects == 0 {
		delete(s.held, k)
		return
	}
	s.held[k] = st
}

// forgetHeldExcept drops the hold records of partitions this broker no
// longer leads (or holds at all), so Status shows no stale hold.
func (s *Service) forgetHeldExcept(led map[metadata.TierPartition]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.held {
		if !led[k] {
			delete(s.held, k)
		}
	}
}

// DeleteObjectsLater queues objects whose manifest entries are gone for
// deletion ObjectDeleteDelay after now, so cold reads that found an entry
// just before finish first; the janitor deletes them once due (and the
// orphan sweeper leaves them alone meanwhile). Diskless retention hands
// its merged objects here too.
func (s *Service) DeleteObjectsLater(keys []string, now time.Time) {
	due := now.Add(s.cfg.ObjectDeleteDelay)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range keys {
		s.pendingDeletes = append(s.pendingDeletes, dueDelete{key: key, due: due})
	}
}

// deleteDueObjects deletes the objects whose delay has passed; failures
// stay queued (and the sweeper catches what a crash forgets).
func (s *Service) deleteDueObjects(ctx context.Context, now time.Time) {
	s.mu.Lock()
	var due, keep []dueDelete
	for _, d := range s.pendingDeletes {
		if now.Before(d.due) {
			keep = append(keep, d)
		} else {
			due = append(due, d)
		}
	}
	s.pendingDeletes = keep
	s.mu.Unlock()
	for _, d := range due {
		err := s.objects.Delete(ctx, d.key)
		s.mu.Lock()
		if err != nil {
			s.pendingDeletes = append(s.pendingDeletes, d)
		} else {
			s.counters.ObjectsDeleted++
		}
		s.mu.Unlock()
		if err != nil {
			s.log.Warn("deleting tiered object", "key", d.key, "err", err)
			return
		}
	}
}

// RaiseLogStart moves the partition's log start up to offset across both
// tiers: for a tiered partition the etcd record first (so a restart cannot
// bring deleted offsets back from the bucket), then the hot log.
// REQUIRES: offset <= HW.
func (s *Service) RaiseLogStart(ctx context.Context, p Partition, offset int64) error {
	k := p.Key()
	_, _, hasTiered := s.manifest.Range(k.TopicID, k.Partition)
	if p.Tiered() || hasTiered {
		stored, err := s.store.RaiseTierLogStart(ctx, k.TopicID, k.Partition, offset)
		if err != nil {
			return fmt.Errorf("raise tiered log start: %w", err)
		}
		s.manifest.SetLogStart(k.TopicID, k.Partition, stored)
	}
	log := p.Log()
	if offset <= log.LogStartOffset() {
		return nil
	}
	return log.DeleteRecordsBefore(min(offset, log.LogEndOffset()))
}

// DeleteRecords moves p's log start up to offset across both tiers
// (Kafka's DeleteRecords), then removes the manifest entries wholly below
// it at once rather than at the next retention check; a failure of that
// second step is logged (retention retries it).
// REQUIRES: offset <= HW.
func (s *Service) DeleteRecords(ctx context.Context, p Partition, offset int64) error {
	if err := s.RaiseLogStart(ctx, p, offset); err != nil {
		return err
	}
	if s.objects != nil {
		if err := s.applyRemoteRetention(ctx, p, time.Now(), newHoldsLoader(s)); err != nil {
			s.log.Warn("delete records: removing tiered segments", "topic", p.Topic(), "partition", p.Key().Partition, "err", err)
		}
	}
	return nil
}
