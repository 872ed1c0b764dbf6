package broker

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
func (b *Broker) localDeleteLimit(p *partition) int64 {
	limit := p.manifest.LogStart(p.topicID, p.index)
	first, _, ok := p.manifest.Range(p.topicID, p.index)
	if end, _ := p.manifest.ContiguousEnd(p.topicID, p.index); ok && first <= p.log.LogStartOffset() {
		limit = max(limit, end)
	}
	return limit
}

// applyRetention runs every local log's retention; tiered partitions keep
// every segment the manifest does not hold yet, and (on the leader) apply
// retention.ms/bytes to the bucket.
func (b *Broker) applyRetention(now time.Time) {
	for _, p := range b.parts.localPartitions() {
		tiered := b.tieringEnabled(p.topic, p.config())
		var n int
		var err error
		if tiered {
			n, err = p.log.ApplyRetentionBelow(now, b.localDeleteLimit(p))
		} else {
			n, err = p.log.ApplyRetention(now)
		}
		switch {
		case err != nil && !errors.Is(err, hotlog.ErrClosed):
			b.log.Warn("retention failed", "topic", p.topic, "partition", p.index, "err", err)
		case n > 0:
			b.log.Info("retention deleted segments", "topic", p.topic, "partition", p.index, "segments", n, "tiered", tiered)
		}
		if tiered && n > 0 {
			b.tiering.mu.Lock()
			b.tiering.counters.LocalSegmentsFreed += int64(n)
			b.tiering.mu.Unlock()
		}
		if b.objects != nil && p.leader() == b.cfg.NodeID {
			if err := b.applyRemoteRetention(b.lifetime, p, now); err != nil && b.lifetime.Err() == nil {
				b.log.Warn("remote retention failed", "topic", p.topic, "partition", p.index, "err", err)
			}
		}
	}
}

// remoteDoomed counts the oldest manifest entries that retention removes:
// those wholly below the log start, then by retention.ms (max timestamp
// older than now - retention.ms), then by retention.bytes over the whole
// log (tiered bytes plus local bytes above the tiered range).
func remoteDoomed(p *partition, entries []metadata.TierEntry, cfg metadata.TopicConfig, now time.Time) int {
	n := 0
	start := p.logStartOffset()
	for n < len(entries) && entries[n].LastOffset < start {
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
		total := totalLogBytes(p, entries)
		for _, e := range entries[:n] {
			total -= e.Size
		}
		for n < len(entries) && total-entries[n].Size >= cfg.RetentionBytes {
			total -= entries[n].Size
			n++
		}
	}
	return n
}

// totalLogBytes is the size of the whole log: every tiered object plus the
// local segments above the tiered range.
func totalLogBytes(p *partition, entries []metadata.TierEntry) int64 {
	var total int64
	for _, e := range entries {
		total += e.Size
	}
	tieredEnd := entries[len(entries)-1].LastOffset + 1
	for _, s := range p.log.SealedSegments() {
		if s.BaseOffset >= tieredEnd {
			total += s.Size
		}
	}
	return total + activeSegmentBytes(p)
}

// activeSegmentBytes is the hot log's size minus its sealed segments.
func activeSegmentBytes(p *partition) int64 {
	size := p.log.Size()
	for _, s := range p.log.SealedSegments() {
		size -= s.Size
	}
	return max(size, 0)
}

// applyRemoteRetention removes the entries remoteDoomed picks: first the
// log start moves past them, then the entries go from etcd (CAS on their
// versions), and their objects are deleted ObjectDeleteDelay later.
func (b *Broker) applyRemoteRetention(ctx context.Context, p *partition, now time.Time) error {
	entries := p.manifest.Segments(p.topicID, p.index)
	if len(entries) == 0 {
		return nil
	}
	n := remoteDoomed(p, entries, p.config(), now)
	if n == 0 {
		return nil
	}
	doomed := entries[:n]
	if err := b.raiseLogStart(ctx, p, doomed[n-1].LastOffset+1); err != nil {
		return err
	}
	if err := b.store.DeleteTierEntries(ctx, p.topicID, p.index, doomed); err != nil {
		return fmt.Errorf("delete manifest entries: %w", err)
	}
	p.manifest.Removed(doomed)
	due := now.Add(b.cfg.Tier.ObjectDeleteDelay)
	b.tiering.mu.Lock()
	for _, e := range doomed {
		b.tiering.pendingDeletes = append(b.tiering.pendingDeletes, pendingDelete{key: e.Key, due: due})
	}
	b.tiering.counters.RemoteEntriesGone += int64(n)
	b.tiering.mu.Unlock()
	b.log.Info("remote retention removed tiered segments", "topic", p.topic, "partition", p.index,
		"segments", n, "log_start", doomed[n-1].LastOffset+1)
	return nil
}

// deleteDueObjects deletes the objects whose delay has passed; failures
// stay queued (and the sweeper catches what a crash forgets).
func (b *Broker) deleteDueObjects(ctx context.Context, now time.Time) {
	t := &b.tiering
	t.mu.Lock()
	var due, keep []pendingDelete
	for _, d := range t.pendingDeletes {
		if now.Before(d.due) {
			keep = append(keep, d)
		} else {
			due = append(due, d)
		}
	}
	t.pendingDeletes = keep
	t.mu.Unlock()
	for _, d := range due {
		err := b.objects.Delete(ctx, d.key)
		t.mu.Lock()
		if err != nil {
			t.pendingDeletes = append(t.pendingDeletes, d)
		} else {
			t.counters.ObjectsDeleted++
		}
		t.mu.Unlock()
		if err != nil {
			b.log.Warn("deleting tiered object", "key", d.key, "err", err)
			return
		}
	}
}

// raiseLogStart moves the partition's log start up to offset across both
// tiers: for a tiered partition the etcd record first (so a restart cannot
// bring deleted offsets back from the bucket), then the hot log.
// REQUIRES: offset <= HW.
func (b *Broker) raiseLogStart(ctx context.Context, p *partition, offset int64) error {
	_, _, hasTiered := p.tieredRange()
	if b.tieringEnabled(p.topic, p.config()) || hasTiered {
		stored, err := b.store.RaiseTierLogStart(ctx, p.topicID, p.index, offset)
		if err != nil {
			return fmt.Errorf("raise tiered log start: %w", err)
		}
		p.manifest.SetLogStart(p.topicID, p.index, stored)
	}
	if offset <= p.log.LogStartOffset() {
		return nil
	}
	return p.log.DeleteRecordsBefore(min(offset, p.log.LogEndOffset()))
}
