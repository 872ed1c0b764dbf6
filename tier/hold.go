package tier

// The retention hold: remote (total) retention of a topic with
// retention.hold.ms or retention.hold.bytes does not delete an object a
// consumer group still needs (the group's committed offset is in it or
// before it), for at most hold.ms past the object's retention.ms, and for
// at most hold.bytes of such objects. Only groups that committed within
// HoldActiveWindow (the offsets retention) count, so a forgotten group
// cannot pin the bucket. Entries below the log start (DeleteRecords) are
// never held, nor is local retention: the hot disk never fills because of
// a slow group. Holds come from etcd (metadata.RetentionHold), published by
// the brokers coordinating the groups.

import (
	"context"
	"slices"
	"time"

	"github.com/strata-log/strata/metadata"
)

// HoldOf is a topic's effective hold: its own retention.hold.ms and
// retention.hold.bytes where set, else the broker's defaults; 0 turns
// that bound off, and the hold is off when both are.
func (c Config) HoldOf(cfg metadata.TopicConfig) (ms, bytes int64) {
	ms, bytes = cfg.RetentionHoldMs, cfg.RetentionHoldBytes
	if ms < 0 {
		ms = c.RetentionHold.Milliseconds()
	}
	if bytes < 0 {
		bytes = c.RetentionHoldBytes
	}
	return max(ms, 0), max(bytes, 0)
}

// Holds reports whether a topic's retention is held for its groups.
func (c Config) Holds(cfg metadata.TopicConfig) bool {
	ms, bytes := c.HoldOf(cfg)
	return cfg.HasDelete() && (ms > 0 || bytes > 0)
}

// hold is what holds one partition's oldest objects past retention.
type hold struct {
	ms, bytes int64 // the topic's effective bounds; 0: that bound off
	need      int64 // the lowest offset a counting group still needs
	groups    []RetentionHolder
}

// RetentionHolder is a group that holds objects, at its committed offset.
type RetentionHolder struct {
	Group  string `json:"group"`
	Offset int64  `json:"offset"`
}

// holdFor gathers the counting holds of a partition: committed within
// window of now and at or above the log start (a group below it has lost
// those records already). ok is false when none counts.
func holdFor(holds []metadata.RetentionHold, logStart int64, window time.Duration, now time.Time) (need int64, groups []RetentionHolder, ok bool) {
	since := now.Add(-window).UnixMilli()
	for _, h := range holds {
		if h.CommitMs < since || h.Offset < logStart {
			continue
		}
		if !ok || h.Offset < need {
			need = h.Offset
		}
		ok = true
		groups = append(groups, RetentionHolder{Group: h.Group, Offset: h.Offset})
	}
	slices.SortFunc(groups, func(a, b RetentionHolder) int { return int(a.Offset - b.Offset) })
	return need, groups, ok
}

// heldCount is how many of the n entries retention would delete may go
// under h: the floor entries (wholly below the log start) always go; from
// the first entry a group needs on, entries go oldest first only once
// their hold time has passed (max timestamp + retention.ms + hold.ms) or
// while the held bytes exceed hold.bytes. The manifest stays gap-free, so
// an entry kept keeps every later one.
func heldCount(entries []metadata.TierEntry, floor, n int, h hold, retentionMs int64, now time.Time) int {
	k := floor
	for k < n && entries[k].LastOffset < h.need {
		k++
	}
	var held int64
	for _, e := range entries[k:n] {
		held += e.Size
	}
	for ; k < n; k++ {
		expired := h.ms > 0 && now.UnixMilli() >= entries[k].MaxTimestamp+max(retentionMs, 0)+h.ms
		over := h.bytes > 0 && held > h.bytes
		if !expired && !over {
			break
		}
		held -= entries[k].Size
	}
	return k
}

// HeldStatus is what a partition's hold keeps in the bucket now.
type HeldStatus struct {
	Objects int               `json:"objects"`
	Bytes   int64             `json:"bytes"`
	By      []RetentionHolder `json:"by,omitempty"`
}

// holdsLoader loads every partition's holds at most once per retention
// pass, and only when a partition asks.
type holdsLoader struct {
	store  Store
	loaded bool
	holds  map[metadata.TierPartition][]metadata.RetentionHold
	err    error
}

func (l *holdsLoader) of(ctx context.Context, k metadata.TierPartition) ([]metadata.RetentionHold, error) {
	if !l.loaded {
		l.loaded = true
		l.holds, l.err = l.store.RetentionHolds(ctx)
	}
	return l.holds[k], l.err
}
