package tier

// The retention hold (doc.go, "Retention hold"): remote (total) retention
// of a topic with retention.hold.ms or retention.hold.bytes does not
// delete an object a consumer group still needs, for at most hold.ms past
// the object's retention.ms and for at most hold.bytes of such objects.
// Only groups that committed within HoldActiveWindow (the offsets
// retention) count, so a forgotten group cannot pin the bucket. Entries
// wholly below the log start (DeleteRecords) are never held, nor is local
// retention: the hot disk never fills because of a slow group. Holds come
// from etcd (metadata.RetentionHold), published by the brokers
// coordinating the groups.

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/strata-log/strata/metadata"
)

// EffectiveHold is a topic's hold: its own retention.hold.ms and
// retention.hold.bytes where set (>= 0), else the broker's defaults
// (RetentionHold, RetentionHoldBytes). 0 turns that bound off.
func (c Config) EffectiveHold(cfg metadata.TopicConfig) (ms, bytes int64) {
	ms, bytes = cfg.RetentionHoldMs, cfg.RetentionHoldBytes
	if ms < 0 {
		ms = c.RetentionHold.Milliseconds()
	}
	if bytes < 0 {
		bytes = c.RetentionHoldBytes
	}
	return max(ms, 0), max(bytes, 0)
}

// Holds reports whether a topic's remote retention is held for its
// groups: a bound is on and time or size retention applies (a compact-only
// topic deletes nothing a group could need).
func (c Config) Holds(cfg metadata.TopicConfig) bool {
	ms, bytes := c.EffectiveHold(cfg)
	return cfg.HasDelete() && (ms > 0 || bytes > 0)
}

// RetentionHolder is a group whose committed offset holds objects.
type RetentionHolder struct {
	Group  string `json:"group"`
	Offset int64  `json:"offset"`
}

// HeldStatus is what a partition's hold kept in the bucket past retention
// at the leader's last retention pass.
type HeldStatus struct {
	Objects int   `json:"objects"`
	Bytes   int64 `json:"bytes"`
	// By are the counting groups whose committed offsets lie at or before
	// the last held object, lowest offset first (empty when the holds
	// could not be read and everything past the log start was kept).
	By []RetentionHolder `json:"by,omitempty"`
}

// holdRule is what decides a partition's hold besides its entries and
// holds.
type holdRule struct {
	ms, bytes   int64         // effective bounds (EffectiveHold); 0: that bound off
	retentionMs int64         // the topic's retention.ms; < 0: none
	window      time.Duration // holds committed longer ago than this do not count
}

// holdDecision is the outcome for one partition: entries[:deletable] go,
// entries[deletable:doomed] stay for the groups in held.By.
type holdDecision struct {
	deletable int
	held      HeldStatus
}

// decideHold lowers doomed, the count of oldest entries retention would
// delete, to what the partition's holds allow:
//
//   - the entries wholly below logStart always go (DeleteRecords, or
//     records already lost to retention): they hold nothing;
//   - need is the lowest committed offset at or above logStart among the
//     holds committed within r.window (a hold below the log start has lost
//     its records already and holds nothing);
//   - k is the first doomed entry with LastOffset >= need; entries k..doomed-1
//     are held, and since deletion takes a prefix, so is everything after;
//   - held entries are released oldest first while either the oldest is
//     due by time (r.ms > 0 and now >= its MaxTimestamp + retention.ms,
//     taken as 0 when -1, + r.ms) or the held bytes exceed r.bytes
//     (r.bytes > 0).
//
// With both bounds off nothing is held. Pure: the table tests drive it.
func decideHold(entries []metadata.TierEntry, doomed int, logStart int64, holds []metadata.RetentionHold,
	r holdRule, now time.Time) holdDecision {
	if r.ms <= 0 && r.bytes <= 0 {
		return holdDecision{deletable: doomed}
	}
	need, holders, ok := countingHolds(holds, logStart, r.window, now)
	if !ok {
		return holdDecision{deletable: doomed}
	}
	k := belowOffset(entries[:doomed], need)
	k = releaseHeld(entries[:doomed], k, r, now)
	return holdDecision{deletable: k, held: heldStatus(entries[k:doomed], holders)}
}

// countingHolds returns the holds that count: committed within window of
// now and at or above logStart, lowest offset first, and need, the lowest
// of their offsets. ok is false when none counts.
func countingHolds(holds []metadata.RetentionHold, logStart int64, window time.Duration, now time.Time) (
	need int64, holders []RetentionHolder, ok bool) {
	since := now.Add(-window).UnixMilli()
	for _, h := range holds {
		if h.CommitMs < since || h.Offset < logStart {
			continue
		}
		holders = append(holders, RetentionHolder{Group: h.Group, Offset: h.Offset})
	}
	if len(holders) == 0 {
		return 0, nil, false
	}
	slices.SortFunc(holders, func(a, b RetentionHolder) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), strings.Compare(a.Group, b.Group))
	})
	return holders[0].Offset, holders, true
}

// belowOffset counts the leading entries that end below offset.
func belowOffset(entries []metadata.TierEntry, offset int64) int {
	n := 0
	for n < len(entries) && entries[n].LastOffset < offset {
		n++
	}
	return n
}

// releaseHeld releases held entries entries[k:] oldest first while the
// oldest is due by time or the held bytes exceed the byte bound, and
// returns the new first held index (len(entries): all released).
func releaseHeld(entries []metadata.TierEntry, k int, r holdRule, now time.Time) int {
	var heldBytes int64
	for _, e := range entries[k:] {
		heldBytes += e.Size
	}
	for ; k < len(entries); k++ {
		due := r.ms > 0 && now.UnixMilli() >= holdExpiry(entries[k], r)
		over := r.bytes > 0 && heldBytes > r.bytes
		if !due && !over {
			break
		}
		heldBytes -= entries[k].Size
	}
	return k
}

// holdExpiry is when a held entry is released by time, in unix ms: its
// newest record's time plus retention.ms (none: 0) plus hold.ms,
// saturating rather than wrapping for huge configs.
func holdExpiry(e metadata.TierEntry, r holdRule) int64 {
	return saturatingAdd(saturatingAdd(e.MaxTimestamp, max(r.retentionMs, 0)), r.ms)
}

// saturatingAdd is a+b for b >= 0, capped at MaxInt64.
func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// heldStatus describes the held entries and the holders that need them
// (those at or before the last held entry).
func heldStatus(held []metadata.TierEntry, holders []RetentionHolder) HeldStatus {
	if len(held) == 0 {
		return HeldStatus{}
	}
	st := HeldStatus{Objects: len(held)}
	for _, e := range held {
		st.Bytes += e.Size
	}
	last := held[len(held)-1].LastOffset
	for _, h := range holders {
		if h.Offset <= last {
			st.By = append(st.By, h)
		}
	}
	return st
}

// holdsLoader reads every partition's holds from the store at most once
// per retention pass, and only when a partition with a hold asks, so a
// cluster without holds never reads them. A failed read is counted and
// logged once per pass.
type holdsLoader struct {
	svc    *Service
	loaded bool
	holds  map[metadata.TierPartition][]metadata.RetentionHold
	err    error
}

func newHoldsLoader(s *Service) *holdsLoader { return &holdsLoader{svc: s} }

// of returns k's holds, or the error of the pass's one read.
func (l *holdsLoader) of(ctx context.Context, k metadata.TierPartition) ([]metadata.RetentionHold, error) {
	if !l.loaded {
		l.loaded = true
		l.holds, l.err = l.svc.store.RetentionHolds(ctx)
		if l.err != nil {
			l.svc.count(func(c *Counters) { c.RetentionHoldReadFailures++ })
			l.svc.log.Warn("retention holds unreadable; remote retention keeps every object a group may need until the next pass",
				"err", l.err)
		}
	}
	return l.holds[k], l.err
}
