package compaction

import (
	"sync/atomic"
	"time"
)

// PartitionState is what the cleaner remembers of one partition, in memory
// only. The cleaner's goroutine is its only writer (SetTierCheckpoint
// aside); anyone may read it (status, metrics, the merge pass), hence the
// atomics. The zero value is ready: nothing cleaned yet.
type PartitionState struct {
	passes, bytesIn, bytesOut, recordsIn, recordsOut atomic.Int64
	lastMs                                           atomic.Int64
	// keptTombstoneTs is the largest batch timestamp of the tombstones the
	// last local pass had to keep (younger than delete.retention.ms; 0:
	// none): once it is delete.retention.ms old, as configured then, a
	// pass runs even with no new dirty data. After a restart the next pass
	// with dirty data drops them.
	keptTombstoneTs atomic.Int64
	// tierCheckpoint and tierKeptTombstoneTs are the same for the bucket's
	// copy (cleaner_tier.go), kept by the leader. tierCheckpoint is the
	// first offset of the bucket's dirty range: 0 after a restart or on a
	// new leader, so that leader's first pass re-cleans everything once.
	tierCheckpoint      atomic.Int64
	tierKeptTombstoneTs atomic.Int64
	// uncleanable is set when a local pass failed other than by a race
	// with the log or shutdown (a corrupt batch, a batch with more keys
	// than the offset map holds): a retry would fail the same way, so the
	// cleaner skips the partition until the broker restarts, as Kafka does
	// with its uncleanable partitions, and one bad partition never takes
	// every turn from the others.
	uncleanable atomic.Bool
}

// Uncleanable reports whether the cleaner gave up on the partition's local
// log (see PartitionState.uncleanable).
func (s *PartitionState) Uncleanable() bool { return s.uncleanable.Load() }

// Totals are a partition's cleaning passes, local and tiered, added up.
type Totals struct {
	Passes                int64
	BytesIn, BytesOut     int64
	RecordsIn, RecordsOut int64
	// LastMs is the wall-clock time of the last pass in Unix ms (0: none).
	LastMs int64
}

// Totals returns what the cleaner did to the partition so far.
func (s *PartitionState) Totals() Totals {
	return Totals{Passes: s.passes.Load(), BytesIn: s.bytesIn.Load(), BytesOut: s.bytesOut.Load(),
		RecordsIn: s.recordsIn.Load(), RecordsOut: s.recordsOut.Load(), LastMs: s.lastMs.Load()}
}

// TierCheckpoint is the first offset of the bucket's dirty range: every
// object below it was cleaned by this replica's tiered passes.
func (s *PartitionState) TierCheckpoint() int64 { return s.tierCheckpoint.Load() }

// SetTierCheckpoint moves the tier checkpoint, for tests that stage a
// partition as cleaned up to offset (or forgotten, at 0).
func (s *PartitionState) SetTierCheckpoint(offset int64) { s.tierCheckpoint.Store(offset) }

func (s *PartitionState) add(st Stats) {
	s.passes.Add(1)
	s.bytesIn.Add(st.BytesIn)
	s.bytesOut.Add(st.BytesOut)
	s.recordsIn.Add(st.RecordsIn)
	s.recordsOut.Add(st.RecordsOut)
	s.lastMs.Store(time.Now().UnixMilli())
}

// tombstonesDue: the tombstones kept by the last local pass are past
// delete.retention.ms now.
func (s *PartitionState) tombstonesDue(now time.Time, retentionMs int64) bool {
	return tombstonesDue(&s.keptTombstoneTs, now, retentionMs)
}

// tierTombstonesDue is tombstonesDue for the bucket's copy.
func (s *PartitionState) tierTombstonesDue(now time.Time, retentionMs int64) bool {
	return tombstonesDue(&s.tierKeptTombstoneTs, now, retentionMs)
}

// tombstonesDue: the tombstones kept by the last pass (ts their newest
// batch timestamp) are past delete.retention.ms now.
func tombstonesDue(ts *atomic.Int64, now time.Time, retentionMs int64) bool {
	kept := ts.Load()
	return kept > 0 && retentionMs >= 0 && now.UnixMilli()-kept > retentionMs
}

// keptTombstones is what a pass leaves for tombstonesDue.
func keptTombstones(s Stats) int64 {
	if s.TombstonesKept == 0 {
		return 0
	}
	return max(s.KeptTombstoneMaxTimestamp, 1)
}
