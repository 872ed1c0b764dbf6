package hotlog

// This file is the contract other packages code against. Bodies live in the
// rest of the package; changing a signature here changes every caller.

import (
	"errors"
	"log/slog"
	"time"

	"github.com/strata-log/strata/recordbatch"
)

// Durability says when appended data counts as safe.
type Durability int

const (
	// DurabilityFsync: data counts (FlushedOffset advances) only after an
	// fdatasync; concurrent appends share one fsync (group commit).
	DurabilityFsync Durability = iota
	// DurabilityReplication: the page cache is enough, as in Kafka;
	// FlushedOffset == LogEndOffset at all times.
	DurabilityReplication
)

// Sentinel errors. Callers translate them to Kafka error codes at the edge.
var (
	// ErrCorruptBatch and ErrUnsupportedMagic are the format's own errors
	// (the same values as recordbatch's), so one errors.Is matches a bad
	// batch whether the log or a caller's recordbatch check found it.
	ErrCorruptBatch     = recordbatch.ErrCorrupt                            // CORRUPT_MESSAGE
	ErrUnsupportedMagic = recordbatch.ErrUnsupportedMagic                   // UNSUPPORTED_FOR_MESSAGE_FORMAT
	ErrOffsetOutOfRange = errors.New("hotlog: offset out of range")         // OFFSET_OUT_OF_RANGE
	ErrClosed           = errors.New("hotlog: log closed")                  // NOT_LEADER_OR_FOLLOWER / retriable
	ErrStorage          = errors.New("hotlog: storage failure, log fenced") // KAFKA_STORAGE_ERROR; sticky until reopen
)

// Config configures one partition's log. Zero values get defaults in
// withDefaults(); Validate rejects nonsense.
type Config struct {
	// Dir is the partition directory, <data-dir>/<topic>-<partition>. Created if missing.
	Dir string
	// SegmentBytes rolls the active segment once it would exceed this size (segment.bytes). Default 1 GiB.
	SegmentBytes int64
	// SegmentMs rolls the active segment once its first batch is this old (segment.ms). Default 7 days.
	SegmentMs time.Duration
	// IndexIntervalBytes: one offset-index and time-index entry per this many log bytes (index.interval.bytes). Default 4096.
	IndexIntervalBytes int
	// RetentionMs deletes whole sealed segments whose max timestamp is older than this (retention.ms). <0: unlimited.
	RetentionMs time.Duration
	// RetentionBytes deletes the oldest sealed segments while the log is larger than this (retention.bytes). <0: unlimited.
	RetentionBytes int64
	// Durability: see Durability.
	Durability Durability
	// FlushInterval spaces the flush rounds of a busy log (appends arrived while the previous round ran): the next
	// starts this long after the previous one started, and the appends meanwhile share its fsync. Otherwise a round
	// starts at once (flusher.go). 0: a round always starts as soon as the previous one finished.
	FlushInterval time.Duration
	// Logger gets structured logs (topic/partition keys added by the caller). Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for segment.ms and retention. Default time.Now.
	Now func() time.Time
	// ProducerIDExpiration drops a producer's state once its last batch's
	// timestamp is this old and it has no open transaction
	// (producer.id.expiration.ms). <= 0: DefaultProducerIDExpiration (24h).
	ProducerIDExpiration time.Duration
}

// AppendResult says where an append landed.
type AppendResult struct {
	BaseOffset int64 // offset of the first record of the first batch
	LastOffset int64 // offset of the last record of the last batch
	// Duplicate: the append retried a batch the log already holds (same
	// producer id, epoch and sequences); nothing was written and the
	// offsets are the original batch's.
	Duplicate bool
}

// OffsetTime is an (offset, timestamp) pair returned by timestamp look-ups.
type OffsetTime struct {
	Offset    int64
	Timestamp int64
}
