// Package lag is the arithmetic of consumer-group lag and of retention
// margins: how far a group's committed offset is behind a partition's high
// watermark, in records and in time, and how long (and how many produced
// bytes) until retention deletes the record at the committed offset. It is
// pure: callers gather a partition's state (Partition) and get numbers.
//
// # Margin rules
//
// Retention deletes whole segments (locally) and whole objects (in the
// bucket, total retention) from the oldest, so the record at the committed
// offset c goes when the segment holding it goes:
//
//   - by time: when the segment's max timestamp is older than retention.ms,
//     so the time margin is maxTimestamp + retention.ms - now. For the
//     newest segment (still growing) this is a lower bound.
//   - by size: when the log without the segments up to and including c's is
//     still at least retention.bytes, so the byte margin is retention.bytes
//   - (bytes of the segments up to and including c's) - (log bytes). The
//     time margin of the size rule is the byte margin over the partition's
//     recent produce rate; with no produce the size rule never fires.
//
// The margin is the smaller of the two. A retention hold (HoldMs) moves
// the time rule's deadline by its hold time. A committed offset at or past the
// end (nothing to read yet) is bounded by the next record's life:
// retention.ms, and retention.bytes of new bytes beyond the current log. A
// topic without the delete policy (compact only), or with both limits at
// -1, has no margin (Limited false). A committed offset below the log start
// has lost data already (Lost, margin 0).
package lag

import (
	"math"
	"time"
)

// Segment is one stretch of a partition's log, oldest first: an object in
// the bucket or a local segment above the bucket's range.
type Segment struct {
	BaseOffset   int64
	LastOffset   int64
	MaxTimestamp int64 // unix ms
	Bytes        int64
}

// Partition is what the margin arithmetic needs of one partition.
type Partition struct {
	LogStart      int64
	HighWatermark int64
	// Segments cover the log from the log start, oldest first.
	Segments []Segment
	// Delete: cleanup.policy includes delete (retention applies).
	Delete         bool
	RetentionMs    int64 // -1: no time limit
	RetentionBytes int64 // -1: no size limit
	// HoldMs is the retention hold's time past retention.ms for a group
	// that needs the record (tier's retention.hold.ms; 0: no hold).
	HoldMs int64
	// BytesPerSecond is the recent produce rate (Rate); 0: none.
	BytesPerSecond float64
}

// Margin is how long, and how many more produced bytes, until retention
// deletes the record at a committed offset.
type Margin struct {
	// Limited: some retention rule applies; otherwise Seconds and Bytes
	// are meaningless (no loss is coming).
	Limited bool
	// Lost: the committed offset is below the log start already.
	Lost bool
	// Seconds until the loss; +Inf when only the size rule applies and
	// nothing is produced.
	Seconds float64
	// Bytes that may still be produced before the size rule deletes the
	// record; math.MaxInt64 when there is no size limit.
	Bytes int64
}

// Records is how many records the committed offset is behind the high
// watermark (0 when at or past it).
func Records(committed, highWatermark int64) int64 { return max(highWatermark-committed, 0) }

// Seconds is how far behind in time a group is: now minus the timestamp
// of the record at its committed offset, 0 when it is caught up or the
// timestamp is unknown (ts <= 0) or ahead of now.
func Seconds(committed, highWatermark, recordTimestamp int64, now time.Time) float64 {
	if committed >= highWatermark || recordTimestamp <= 0 {
		return 0
	}
	return max(float64(now.UnixMilli()-recordTimestamp)/1000, 0)
}

// RetentionMargin is the margin of the record at committed in p.
func RetentionMargin(p Partition, committed int64, now time.Time) Margin {
	if !p.Delete || (p.RetentionMs < 0 && p.RetentionBytes < 0) {
		return Margin{Seconds: math.Inf(1), Bytes: math.MaxInt64}
	}
	if committed < p.LogStart {
		return Margin{Limited: true, Lost: true}
	}
	m := Margin{Limited: true, Seconds: math.Inf(1), Bytes: math.MaxInt64}
	at, prefix, total := locate(p.Segments, committed)
	if p.RetentionMs >= 0 {
		deadline := now.UnixMilli() + p.RetentionMs // a record not yet written
		if at >= 0 {
			deadline = p.Segments[at].MaxTimestamp + p.RetentionMs
		}
		deadline += p.HoldMs
		m.Seconds = max(float64(deadline-now.UnixMilli())/1000, 0)
	}
	if p.RetentionBytes >= 0 {
		m.Bytes = max(p.RetentionBytes+prefix-total, 0)
		if at < 0 { // past the end: every byte now in the log goes first
			m.Bytes = p.RetentionBytes
		}
		if p.BytesPerSecond > 0 {
			m.Seconds = min(m.Seconds, float64(m.Bytes)/p.BytesPerSecond)
		}
	}
	return m
}

// locate finds the segment holding offset (-1: none, the offset is past
// the end), the bytes of the segments up to and including it, and the
// bytes of every segment.
func locate(segs []Segment, offset int64) (at int, prefix, total int64) {
	at = -1
	for i, s := range segs {
		total += s.Bytes
		if at < 0 && s.LastOffset >= offset {
			at, prefix = i, total
		}
	}
	return at, prefix, total
}
