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
// the tiered end restarts the same way, through RestartSnapshot and
// RestartLog.

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
