package diskless

import (
	"context"
	"fmt"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// ApplyRetention applies the topic's retention.ms and retention.bytes to
// the partition's merged objects (doc.go, "Merge and retention"): the
// head's start moves past the doomed ones, their manifest entries go, and
// the deleter deletes their objects after its delay. Runs are never
// removed; holds do not apply. The start and the runs come from the
// index: one that lags etcd (a start just raised, a run just committed)
// delays deletions to a later pass.
func (m *Merger) ApplyRetention(ctx context.Context, p MergePartition) error {
	if !m.reader.ix.Loaded() {
		return nil // without the runs, the log's size is unknown
	}
	cfg, err := metadata.ParseTopicConfig(p.Configs)
	if err != nil {
		return fmt.Errorf("topic config: %w", err)
	}
	entries, err := m.store.TierEntries(ctx, p.Part.TopicID, p.Part.Partition)
	if err != nil {
		return err
	}
	entries = m.belowRuns(p.Part, entries)
	if len(entries) == 0 {
		return nil
	}
	now := m.cfg.Now()
	start, _, _ := m.reader.ix.Positions(p.Part)
	n := tier.RetentionDoomed(entries, start, cfg, m.reader.ix.runBytes(p.Part), now)
	if n == 0 {
		return nil
	}
	doomed := entries[:n]
	newStart := doomed[n-1].LastOffset + 1
	if _, err := RaiseStart(ctx, m.store, p.Part, newStart); err != nil {
		return fmt.Errorf("raise the log start to %d: %w", newStart, err)
	}
	if err := m.store.DeleteTierEntries(ctx, p.Part.TopicID, p.Part.Partition, doomed); err != nil {
		return fmt.Errorf("delete manifest entries: %w", err)
	}
	keys := make([]string, n)
	for i, e := range doomed {
		keys[i] = e.Key
	}
	m.deleter.DeleteObjectsLater(keys, now)
	m.stats.retained.Add(int64(n))
	m.cfg.Logger.Info("diskless retention removed merged objects", "topic", p.Topic, "partition", p.Part.Partition,
		"objects", n, "log_start", newStart)
	return nil
}

// belowRuns is the prefix of entries wholly below the partition's first
// run. An entry a run still covers (a merge that committed it and has not
// deleted the runs yet) stays until that merge finishes.
func (m *Merger) belowRuns(tp metadata.TierPartition, entries []metadata.TierEntry) []metadata.TierEntry {
	first, ok := m.reader.ix.firstRunBase(tp)
	if !ok {
		return entries
	}
	n := 0
	for n < len(entries) && entries[n].LastOffset < first {
		n++
	}
	return entries[:n]
}
