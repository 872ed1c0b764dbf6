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
// before, with a warning.

import (
	"context"
	"errors"
	"fmt"
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
	if f.m.producerSnapshot == nil {
		return nil
	}
	snap, err := f.m.producerSnapshot(f.ctx, s.p, start)
	if err != nil {
		f.m.log.Warn("follower log restart: no producer state at the new start; idempotent retries of older batches go undetected here",
			"topic", s.p.topic, "partition", s.p.index, "offset", start, "err", err)
		return nil
	}
	return snap
}

// resetLog restarts s's log at start, installing snap as the producer
// state when given. A snapshot the log rejects (it leaves the log
// untouched then) falls back to empty state.
// REQUIRES: the replica mutex (called from withReplica).
func (f *peerFetcher) resetLog(s taskSnapshot, start int64, snap []byte) error {
	if snap == nil {
		return s.p.log.ResetTo(start)
	}
	err := s.p.log.ResetToWithProducerSnapshot(start, snap)
	if !errors.Is(err, hotlog.ErrBadProducerSnapshot) {
		return err
	}
	f.m.log.Warn("follower log restart: tiered producer snapshot rejected; starting with empty producer state",
		"topic", s.p.topic, "partition", s.p.index, "offset", start, "err", err)
	return s.p.log.ResetTo(start)
}
