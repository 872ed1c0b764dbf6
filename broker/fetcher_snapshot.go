package broker

// Producer state for a follower that restarts its log at the leader's
// local log start S (resetToLeaderStart). Starting with empty state would
// let this replica, once leader, accept a retry of an idempotent batch
// written below S as new data. The uploader stores in each segment object
// the producer state as of the object's end (tier/doc.go, "Producer
// snapshot"), so the object of the manifest ending exactly at S carries
// the state at S. Only an exact end is safe: the state at an earlier end
// misses the batches between it and S, which the follower cannot replay
// (they are not in its new log). Without one the reset starts empty, as
// before, with a warning. A replica about to lead below the tiered end
// restarts the same way (tier_restart.go).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// snapshotReadTimeout bounds the bucket read of a producer snapshot; on
// timeout the reset goes ahead with empty state rather than stall the
// fetcher.
const snapshotReadTimeout = 10 * time.Second

// errNoTieredSnapshot: no tiered producer state at the reset offset.
var errNoTieredSnapshot = errors.New("broker: no tiered producer snapshot at the reset offset")

// tieredProducerSnapshot returns the producer state as of offset from the
// producer-snapshot section of p's tiered object whose end (LastOffset+1)
// is exactly offset, read through the cold reader (its index read includes
// the section, checked by tier.DecodeIndexSections). Errors wrap
// errNoTieredSnapshot or say why the read failed.
func (b *Broker) tieredProducerSnapshot(ctx context.Context, p *partition, offset int64) ([]byte, error) {
	if b.cold == nil {
		return nil, fmt.Errorf("%w: tiering is off", errNoTieredSnapshot)
	}
	e, ok := p.manifest.Find(p.topicID, p.index, offset-1)
	if !ok || e.LastOffset+1 != offset {
		return nil, fmt.Errorf("%w: no manifest entry ends at %d", errNoTieredSnapshot, offset)
	}
	ctx, cancel := context.WithTimeout(ctx, snapshotReadTimeout)
	defer cancel()
	x, err := b.cold.Index(ctx, coldObject(e))
	if err != nil {
		return nil, fmt.Errorf("reading the index of %s: %w", e.Key, err)
	}
	if at, ok := x.ProducerSnapshotOffset(); !ok || at != offset {
		return nil, fmt.Errorf("%w: object %s carries none", errNoTieredSnapshot, e.Key)
	}
	return x.ProducerSnapshot, nil
}

// producerSnapshotAt fetches the tiered producer state at start for s's
// partition, or nil (logged) when there is none to be had.
func (f *peerFetcher) producerSnapshotAt(s taskSnapshot, start int64) []byte {
	return restartSnapshot(f.ctx, f.m.log, f.m.producerSnapshot, s.p, start, "follower log restart")
}

// resetLog restarts s's log at start, installing snap as the producer
// state when given (restartLog).
// REQUIRES: the replica mutex (called from withReplica).
func (f *peerFetcher) resetLog(s taskSnapshot, start int64, snap []byte) error {
	return restartLog(f.m.log, s.p, start, snap, "follower log restart")
}

// restartSnapshot reads, through read (Broker.tieredProducerSnapshot or a
// test seam; nil: none), the producer state as of start for a log restart
// of p at start; nil (logged as a warning naming why, the restart then
// starts with empty producer state) when there is none to be had.
func restartSnapshot(ctx context.Context, log *slog.Logger, read func(context.Context, *partition, int64) ([]byte, error),
	p *partition, start int64, why string) []byte {
	if read == nil {
		return nil
	}
	snap, err := read(ctx, p, start)
	if err != nil {
		log.Warn(why+": no producer state at the new start; idempotent retries of older batches go undetected here",
			"topic", p.topic, "partition", p.index, "offset", start, "err", err)
		return nil
	}
	return snap
}

// restartLog restarts p's log empty at start, installing snap as the
// producer state when given. A snapshot the log rejects (it leaves the log
// untouched then) falls back to empty state, logged with why.
// REQUIRES: p's replica mutex (no append or truncation interleaves).
func restartLog(log *slog.Logger, p *partition, start int64, snap []byte, why string) error {
	if snap == nil {
		return p.log.ResetTo(start)
	}
	err := p.log.ResetToWithProducerSnapshot(start, snap)
	if !errors.Is(err, hotlog.ErrBadProducerSnapshot) {
		return err
	}
	log.Warn(why+": tiered producer snapshot rejected; starting with empty producer state",
		"topic", p.topic, "partition", p.index, "offset", start, "err", err)
	return p.log.ResetTo(start)
}
