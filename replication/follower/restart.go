package follower

// Producer state for a follower that restarts its log at the leader's
// local log start S (resetToLeaderStart). Starting with empty state would
// let this replica, once leader, accept a retry of an idempotent batch
// written below S as new data. The tier uploader stores in each segment
// object the producer state as of the object's end (tier/doc.go, "Producer
// snapshot"), so the object of the manifest ending exactly at S carries
// the state at S; ProducerSnapshots reads it. Only an exact end is safe:
// the state at an earlier end misses the batches between it and S, which
// the follower cannot replay (they are not in its new log). Without one
// the reset starts empty, with a warning. A replica about to lead below
// the tiered end restarts the same way (PrepareLeaderRestart,
// RestartBeforeLeading).

import (
	"context"
	"errors"
	"log/slog"

	"github.com/strata-log/strata/hotlog"
)

// producerSnapshotAt fetches the tiered producer state at start for s's
// partition, or nil (logged) when there is none to be had.
func (f *leaderFollower) producerSnapshotAt(s taskSnapshot, start int64) []byte {
	var read func(context.Context, int64) ([]byte, error)
	if snaps := f.m.cfg.ProducerSnapshots; snaps != nil {
		read = func(ctx context.Context, offset int64) ([]byte, error) {
			return snaps.ProducerSnapshot(ctx, s.p, offset)
		}
	}
	return RestartSnapshot(f.ctx, f.m.log, read, s.p.Topic(), s.p.Index(), start, "follower log restart")
}

// resetLog restarts s's log at start, installing snap as the producer
// state when given (RestartLog).
// REQUIRES: the replica mutex (called from WithReplica).
func (f *leaderFollower) resetLog(s taskSnapshot, start int64, snap []byte) error {
	return RestartLog(f.m.log, s.p.Log(), s.p.Topic(), s.p.Index(), start, snap, "follower log restart")
}

// RestartSnapshot reads, through read (nil: there is no source), the
// producer state as of start for a log restart of topic-partition at
// start; nil (logged as a warning naming why, the restart then starts with
// empty producer state) when there is none to be had.
func RestartSnapshot(ctx context.Context, log *slog.Logger, read func(ctx context.Context, offset int64) ([]byte, error),
	topic string, partition int32, start int64, why string) []byte {
	if read == nil {
		return nil
	}
	snap, err := read(ctx, start)
	if err != nil {
		log.Warn(why+": no producer state at the new start; idempotent retries of older batches go undetected here",
			"topic", topic, "partition", partition, "offset", start, "err", err)
		return nil
	}
	return snap
}

// RestartLog restarts l empty at start, installing snap as the producer
// state when given. A snapshot the log rejects (it leaves the log
// untouched then) falls back to empty state, logged with why.
// REQUIRES: the partition's replica mutex (no append or truncation interleaves).
func RestartLog(log *slog.Logger, l Log, topic string, partition int32, start int64, snap []byte, why string) error {
	if snap == nil {
		return l.ResetTo(start)
	}
	err := l.ResetToWithProducerSnapshot(start, snap)
	if !errors.Is(err, hotlog.ErrBadProducerSnapshot) {
		return err
	}
	log.Warn(why+": tiered producer snapshot rejected; starting with empty producer state",
		"topic", topic, "partition", partition, "offset", start, "err", err)
	return l.ResetTo(start)
}

// A replica that becomes leader while its local log ends below the
// partition's tiered end (an empty disk after a restore or a disk loss)
// first restarts its log at that end, so its first new record gets the
// next offset after the bucket's and never reuses a tiered offset; the
// cold path serves everything below it from the bucket.

// TieredEnd says where a partition whose local log ends at logEnd must
// restart it before leading (tier.Manifest.RestartOffset); false if it
// need not.
type TieredEnd func(logEnd int64) (offset int64, restart bool)

// LeaderRestart is the log restart a replica about to lead needs: at
// Offset, with Snap as the producer state there (nil: empty). The zero
// value (Offset 0) means none.
type LeaderRestart struct {
	Offset int64
	Snap   []byte
}

const leaderRestartWhy = "leader log restart at the tiered end"

// PrepareLeaderRestart decides, before the replica mutex is taken, whether
// p must restart its log before leading, and reads the producer state at
// the restart offset through snaps (nil: none; a bucket read bounded by
// tier.SnapshotReadTimeout, without one the restart starts with empty
// producer state, logged). A slow bucket delays the caller by at most that
// bound, and only when a restart is due (rare: an empty or lagging disk
// taking leadership).
func PrepareLeaderRestart(ctx context.Context, log *slog.Logger, p Partition, end TieredEnd, snaps ProducerSnapshots) LeaderRestart {
	offset, need := end(p.Log().LogEndOffset())
	if !need {
		return LeaderRestart{}
	}
	var read func(context.Context, int64) ([]byte, error)
	if snaps != nil {
		read = func(ctx context.Context, offset int64) ([]byte, error) { return snaps.ProducerSnapshot(ctx, p, offset) }
	}
	return LeaderRestart{Offset: offset, Snap: RestartSnapshot(ctx, log, read, p.Topic(), p.Index(), offset, leaderRestartWhy)}
}

// RestartBeforeLeading restarts p's log at the tiered end when it still
// ends below it. prep is PrepareLeaderRestart's answer; if the end moved
// since, the restart goes to the new end without a snapshot.
// REQUIRES: p's replica mutex held, the replica not leading.
func RestartBeforeLeading(log *slog.Logger, p Partition, end TieredEnd, prep LeaderRestart) error {
	from := p.Log().LogEndOffset()
	offset, need := end(from)
	if !need {
		return nil
	}
	snap := prep.Snap
	if prep.Offset != offset {
		snap = nil
	}
	if err := RestartLog(log, p.Log(), p.Topic(), p.Index(), offset, snap, leaderRestartWhy); err != nil {
		return err
	}
	log.Info("log restarted at the tiered end before leading: history below it is in the bucket",
		"topic", p.Topic(), "partition", p.Index(), "from", from, "to", offset, "producer_state", snap != nil)
	return nil
}
