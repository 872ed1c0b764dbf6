package tier

// The bucket's recovery point: tier.upload.max.lag.ms bounds how long a
// committed record stays out of the bucket. The leader rolls its active
// segment once the segment's first batch is half the bound old and part
// of it is committed and stable; the sealed segment is then uploaded by
// the ordinary path as soon as the high watermark passes its end (within
// the uploader's interval), which leaves the other half of the bound for
// the PUT, its verification and the etcd commit. Rolling rather than
// uploading a part of the active segment keeps one rule for everything
// that reads objects: each object is a whole local segment, with an exact
// producer snapshot at its end (hotlog writes one at every roll). The
// small objects this makes are merged in the bucket later (merger.go).

import (
	"time"

	"github.com/strata-log/strata/metadata"
)

// UploadMaxLagMs is the broker's default for tier.upload.max.lag.ms, in
// milliseconds; -1 when the bound is off.
func (c Config) UploadMaxLagMs() int64 {
	if c.UploadMaxLag < 0 {
		return -1
	}
	return c.UploadMaxLag.Milliseconds()
}

// UploadMaxLagOf is a topic's bound: its own tier.upload.max.lag.ms, else
// the broker's; ok is false when the bound is off.
func (c Config) UploadMaxLagOf(cfg metadata.TopicConfig) (bound time.Duration, ok bool) {
	ms := cfg.TierUploadMaxLagMs
	if ms == 0 {
		ms = c.UploadMaxLagMs()
	}
	return time.Duration(ms) * time.Millisecond, ms > 0
}

// rollForUploadBound rolls p's active segment when its committed records
// would otherwise stay out of the bucket longer than the bound allows.
// REQUIRES: p is led here and tiered.
func (s *Service) rollForUploadBound(p Partition, now time.Time) {
	bound, ok := s.cfg.UploadMaxLagOf(p.Config())
	if !ok {
		return
	}
	stable := min(p.HighWatermark(), p.LastStableOffset())
	rolled, err := p.Log().RollIfOlder(now, bound/2, stable)
	if err != nil {
		s.log.Warn("rolling for tier.upload.max.lag.ms", "topic", p.Topic(), "partition", p.Key().Partition, "err", err)
		return
	}
	if rolled {
		s.count(func(c *Counters) { c.BoundRolls++ })
	}
}

// bucketLag is how far the bucket is behind p's committed, stable end: the
// age of the oldest such record not in the bucket (from its local arrival,
// hotlog.Log.FirstAppendAt: an upper bound, tight to about a second even on
// a leader whose segment it appended as a follower) and the local bytes
// from it on. Zero when the bucket holds everything committed and stable.
func (s *Service) bucketLag(p Partition, now time.Time) (lag time.Duration, bytes int64) {
	k, log := p.Key(), p.Log()
	covered, _ := s.manifest.ContiguousEnd(k.TopicID, k.Partition)
	covered = max(covered, s.logStart(p))
	if covered >= min(p.HighWatermark(), p.LastStableOffset()) {
		return 0, 0
	}
	if at, ok := log.FirstAppendAt(covered); ok {
		lag = max(now.Sub(time.UnixMilli(at)), 0)
	}
	bytes = log.Size()
	for _, seg := range log.SealedSegments() {
		if seg.NextOffset <= covered {
			bytes -= seg.Size
		}
	}
	return lag, bytes
}
