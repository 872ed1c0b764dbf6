package hotlog

// STUB: the hotlog implementer replaces this file with the real Log. The
// method set below is the contract the broker codes against.

import (
	"context"
	"time"
)

// Log is one partition's local log: an ordered set of segments, the active
// one last. Safe for concurrent use: appends are serialized, reads run in
// parallel with appends.
type Log struct{}

// Open opens (creating if needed) and recovers the log in cfg.Dir.
func Open(cfg Config) (*Log, error) { panic("unimplemented") }

// Append assigns offsets to one or more validated RecordBatches (v2) laid end
// to end in batches, rewriting baseOffset and partitionLeaderEpoch in place
// (the caller hands over ownership of the slice), and writes them to the
// active segment, rolling first if needed. It does not wait for fsync.
func (l *Log) Append(batches []byte, leaderEpoch int32) (AppendResult, error) { panic("unimplemented") }

// WaitFlushed blocks until FlushedOffset() > offset, the context ends, or the
// log fails (ErrStorage). With DurabilityReplication it returns at once.
func (l *Log) WaitFlushed(ctx context.Context, offset int64) error { panic("unimplemented") }

// LogStartOffset is the first offset still readable.
func (l *Log) LogStartOffset() int64 { panic("unimplemented") }

// LogEndOffset (LEO) is the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 { panic("unimplemented") }

// FlushedOffset is the end of the durable prefix: every offset below it is on
// stable storage (DurabilityFsync) or equals LogEndOffset (DurabilityReplication).
func (l *Log) FlushedOffset() int64 { panic("unimplemented") }

// Changed returns a channel closed the next time LogEndOffset, FlushedOffset
// or LogStartOffset changes (long-poll waiters select on it, then call again).
func (l *Log) Changed() <-chan struct{} { panic("unimplemented") }

// Read returns whole batches, verbatim, starting with the batch that contains
// offset, stopping before any batch whose last offset is >= upTo (the HW) and
// once maxBytes is reached; but if the first batch alone exceeds maxBytes it
// is still returned (KIP-74). offset < LogStartOffset or > LogEndOffset gives
// ErrOffsetOutOfRange. offset == upTo gives an empty slice.
func (l *Log) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) { panic("unimplemented") }

// OffsetForTimestamp finds the first offset whose record timestamp is >= ts,
// looking in batches below upTo. ok is false if there is none.
func (l *Log) OffsetForTimestamp(ts int64, upTo int64) (res OffsetTime, ok bool, err error) {
	panic("unimplemented")
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp below upTo (ListOffsets -3). ok false if empty.
func (l *Log) MaxTimestamp(upTo int64) (res OffsetTime, ok bool, err error) { panic("unimplemented") }

// LatestEpoch returns the leader epoch of the last batch, or -1 if empty.
func (l *Log) LatestEpoch() int32 { panic("unimplemented") }

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the leader-epoch
// checkpoint: the largest epoch <= epoch and the start offset of the next
// larger epoch (or LogEndOffset). (-1, -1) if epoch is older than all known.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) { panic("unimplemented") }

// DeleteRecordsBefore moves LogStartOffset up to offset (never down, never
// past the given upTo bound the caller enforces) and deletes whole segments below
// it. The new start offset is checkpointed before returning.
func (l *Log) DeleteRecordsBefore(offset int64) error { panic("unimplemented") }

// ApplyRetention deletes sealed segments past RetentionMs/RetentionBytes and
// rolls a segment older than SegmentMs. Returns the number of segments deleted.
func (l *Log) ApplyRetention(now time.Time) (int, error) { panic("unimplemented") }

// Reconfigure applies changed topic configs (segment and retention settings).
func (l *Log) Reconfigure(cfg Config) error { panic("unimplemented") }

// Truncate drops every batch at or above offset (for follower truncation later).
func (l *Log) Truncate(offset int64) error { panic("unimplemented") }

// Size is the total bytes of all segment files.
func (l *Log) Size() int64 { panic("unimplemented") }

// Close flushes and closes all files. Further calls return ErrClosed.
func (l *Log) Close() error { panic("unimplemented") }

// Remove closes the log and deletes its directory.
func (l *Log) Remove() error { panic("unimplemented") }
