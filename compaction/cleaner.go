package compaction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// ErrInvalidConfig means a CleanerConfig failed Validate.
var ErrInvalidConfig = errors.New("compaction: invalid cleaner config")

// ErrNothingToClean means the partition's dirty range vanished since it was
// picked (retention, truncation) or was never there: no pass ran.
var ErrNothingToClean = errors.New("compaction: nothing to clean")

// CleanerConfig configures the log cleaner. Zero values get Kafka's defaults.
type CleanerConfig struct {
	// Disable turns the cleaner off (log.cleaner.enable=false).
	Disable bool
	// DedupeBufferBytes is the memory of one pass's key→offset map
	// (log.cleaner.dedupe.buffer.size). Default 128 MiB.
	DedupeBufferBytes int64
	// IOBytesPerSecond caps the bytes a pass reads and writes per second
	// (log.cleaner.io.max.bytes.per.second). 0: unlimited.
	IOBytesPerSecond int64
	// Backoff is the pause when no partition needs cleaning
	// (log.cleaner.backoff.ms). Default 15s.
	Backoff time.Duration
	// ObjectDeleteGrace is how long a tiered object replaced by tiered
	// cleaning stays in the bucket, so cold reads in flight finish.
	// Default 5m.
	ObjectDeleteGrace time.Duration
}

// WithDefaults fills the zero fields.
func (c CleanerConfig) WithDefaults() CleanerConfig {
	if c.DedupeBufferBytes == 0 {
		c.DedupeBufferBytes = 128 << 20
	}
	if c.Backoff == 0 {
		c.Backoff = 15 * time.Second
	}
	if c.ObjectDeleteGrace == 0 {
		c.ObjectDeleteGrace = tier.DefaultDeleteGrace
	}
	return c
}

// Validate rejects a configuration that cannot work (after defaults).
func (c CleanerConfig) Validate() error {
	if c.DedupeBufferBytes < 1<<10 || c.IOBytesPerSecond < 0 || c.Backoff < 0 || c.ObjectDeleteGrace < 0 {
		return fmt.Errorf("%w: dedupe buffer %d (≥ 1 KiB), io rate %d, backoff %v",
			ErrInvalidConfig, c.DedupeBufferBytes, c.IOBytesPerSecond, c.Backoff)
	}
	return nil
}

// maxCleanerBatch bounds one stored batch read by the cleaner (a segment
// holds batches of at most message.max.bytes, far below this).
const maxCleanerBatch = 64 << 20

// Partitions lists the replicas the cleaner may clean.
type Partitions interface {
	// Local returns the partitions this broker holds a replica of, led here
	// or not.
	Local() []Partition
}

// Partition is the cleaner's view of one local replica. Its methods are
// called from the cleaner's goroutine while other goroutines append to the
// log, so each returns the partition's current value.
type Partition interface {
	Topic() string
	TopicID() metadata.TopicID
	Index() int32
	// Log is the replica's hot log.
	Log() Log
	// Config is the topic's effective configuration (cleanup.policy,
	// min.cleanable.dirty.ratio, delete.retention.ms, the compaction lags,
	// segment.bytes).
	Config() metadata.TopicConfig
	// HighWatermark and LastStableOffset bound what a pass may touch:
	// records above either may still be truncated or aborted.
	HighWatermark() int64
	LastStableOffset() int64
	// IsLeader reports whether the replica leads now: only the leader
	// cleans the bucket's copy.
	IsLeader() bool
	// LeaderEpoch is the epoch the tiered pass writes its objects under.
	LeaderEpoch() int32
	// Tiered reports whether the partition's sealed segments are uploaded
	// to the bucket now (tiering on for its topic).
	Tiered() bool
	// KeepsLocalLog reports whether the topic keeps its whole local log
	// although tiered: its bucket copy is never cleaned.
	KeepsLocalLog() bool
	// TierCleanEnd is one past the last offset a tiered pass may rewrite:
	// an object reaching it stays as it is. A replicated partition's
	// bucket holds only offsets below its high watermark, so any bound at
	// or above that will do; a diskless partition's objects end where its
	// unmerged runs begin (a merge still completing overlaps them).
	TierCleanEnd() int64
	// State is the cleaner's memory of the partition; it lives as long as
	// the replica, so it is forgotten at a restart.
	State() *PartitionState
}

// NoLocalLog is the Log of a partition without local storage (a diskless
// topic's): nothing to clean locally, only its objects in the bucket.
var NoLocalLog Log = noLocalLog{}

type noLocalLog struct{}

var errNoLocalLog = errors.New("compaction: the partition has no local log")

func (noLocalLog) CleanableSegments(int64) []hotlog.SegmentInfo            { return nil }
func (noLocalLog) CleanableBytes(int64) (clean, dirty int64)               { return 0, 0 }
func (noLocalLog) CleanerCheckpoint() int64                                { return 0 }
func (noLocalLog) SetCleanerCheckpoint(int64) error                        { return errNoLocalLog }
func (noLocalLog) AbortedTxns(from, to int64) []hotlog.AbortedTxn          { return nil }
func (noLocalLog) LogEndOffset() int64                                     { return 0 }
func (noLocalLog) OpenSealedSegment(int64) (*os.File, int64, error)        { return nil, 0, errNoLocalLog }
func (noLocalLog) NewCleanedSegment(int64) (*hotlog.CleanedSegment, error) { return nil, errNoLocalLog }
func (noLocalLog) ReplaceSegments([]int64, []*hotlog.CleanedSegment) error { return errNoLocalLog }

// Log is the slice of a partition's hot log the cleaner reads and rewrites;
// *hotlog.Log implements it (hotlog/doc.go documents the cleaned-segment
// swap and the checkpoint).
type Log interface {
	CleanableSegments(firstUncleanable int64) []hotlog.SegmentInfo
	CleanableBytes(firstUncleanable int64) (clean, dirty int64)
	CleanerCheckpoint() int64
	SetCleanerCheckpoint(offset int64) error
	AbortedTxns(from, to int64) []hotlog.AbortedTxn
	LogEndOffset() int64
	OpenSealedSegment(base int64) (*os.File, int64, error)
	NewCleanedSegment(base int64) (*hotlog.CleanedSegment, error)
	ReplaceSegments(oldBases []int64, cleaned []*hotlog.CleanedSegment) error
}

var _ Log = (*hotlog.Log)(nil)

// Manifest is the broker's view of what the bucket holds per partition;
// *tier.Manifest implements it.
type Manifest interface {
	// Segments lists the partition's objects in offset order.
	Segments(id metadata.TopicID, partition int32) []metadata.TierEntry
	// ContiguousEnd is one past the last offset of the bucket's gap-free
	// prefix of the partition.
	ContiguousEnd(id metadata.TopicID, partition int32) (end int64, ok bool)
	// Range is the first and one past the last offset the bucket holds.
	Range(id metadata.TopicID, partition int32) (start, end int64, ok bool)
}

var _ Manifest = (*tier.Manifest)(nil)

// TierStore is what the tiered pass needs of the bucket.
type TierStore interface {
	// Compact rewrites one run of objects and swaps the new ones into the
	// manifest (tier.Compactor.Compact documents the guarantees).
	Compact(ctx context.Context, run tier.CompactRun) (tier.CompactResult, error)
	// ObjectBatches reads the batches of entries, downloaded and verified.
	ObjectBatches(ctx context.Context, entries []metadata.TierEntry) ObjectBatches
	// AbortedTxns lists the aborted transactions recorded in the index of
	// one object.
	AbortedTxns(ctx context.Context, e metadata.TierEntry) ([]hotlog.AbortedTxn, error)
	// DeleteReplaced deletes the objects replaced by earlier swaps whose
	// grace period ended; failures are logged and retried next time.
	DeleteReplaced(ctx context.Context)
}

// ObjectBatches is a BatchSource over objects that holds one open at a
// time; *tier.ObjectBatches implements it.
type ObjectBatches interface {
	tier.BatchSource
	Close()
}

var _ ObjectBatches = (*tier.ObjectBatches)(nil)

// CleanerDeps are the cleaner's collaborators.
type CleanerDeps struct {
	// Partitions lists the local replicas. Required.
	Partitions Partitions
	// Manifest is the tier manifest. Required (an empty one when tiering
	// is off).
	Manifest Manifest
	// Tier is the bucket side of tiered cleaning; nil when tiering is off
	// (no tiered passes).
	Tier TierStore
	// SpoolDir holds the temporary files of tiered passes (the broker's
	// data dir). Required when Tier is set.
	SpoolDir string
	// Logger; nil: slog.Default().
	Logger *slog.Logger
}

// Cleaner is the log cleaner of one broker: one goroutine (Run) that picks
// the dirtiest compacted partition and cleans it, locally and, on the
// leader of a tiered partition, in the bucket. Its mutable state is per
// partition (PartitionState), written only by the goroutine running passes.
type Cleaner struct {
	cfg      CleanerConfig
	tuned    atomic.Pointer[Tuning] // the tunables in force; replaced by Tune
	parts    Partitions
	manifest Manifest
	tier     TierStore
	spoolDir string
	log      *slog.Logger
}

// NewCleaner returns a cleaner; cfg gets its defaults. With a TierStore it
// first removes the spool files a crash mid-pass left in SpoolDir.
func NewCleaner(cfg CleanerConfig, deps CleanerDeps) (*Cleaner, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Partitions == nil || deps.Manifest == nil || deps.Tier != nil && deps.SpoolDir == "" {
		return nil, fmt.Errorf("%w: missing partitions, manifest or spool dir", ErrInvalidConfig)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	c := &Cleaner{cfg: cfg, parts: deps.Partitions, manifest: deps.Manifest, tier: deps.Tier,
		spoolDir: deps.SpoolDir, log: deps.Logger}
	c.tuned.Store(&Tuning{DedupeBufferBytes: cfg.DedupeBufferBytes, IOBytesPerSecond: cfg.IOBytesPerSecond, Backoff: cfg.Backoff})
	if c.tier != nil {
		c.removeStaleSpools()
	}
	return c, nil
}

// Tuning is the part of CleanerConfig that may change while the cleaner
// runs (Kafka's dynamic log.cleaner.* configs). A pass reads it once, at
// its start; the wait between rounds reads it when the wait begins.
type Tuning struct {
	DedupeBufferBytes int64
	IOBytesPerSecond  int64
	Backoff           time.Duration
}

// Tune replaces the tunables for the passes that start from now on; t is
// checked as CleanerConfig.Validate checks them.
func (c *Cleaner) Tune(t Tuning) error {
	check := c.cfg
	check.DedupeBufferBytes, check.IOBytesPerSecond, check.Backoff = t.DedupeBufferBytes, t.IOBytesPerSecond, t.Backoff
	if err := check.Validate(); err != nil {
		return err
	}
	c.tuned.Store(&t)
	return nil
}

func (c *Cleaner) tuning() Tuning { return *c.tuned.Load() }

// Config returns the configuration in force (defaults filled, the current
// tunables).
func (c *Cleaner) Config() CleanerConfig {
	cfg, t := c.cfg, c.tuning()
	cfg.DedupeBufferBytes, cfg.IOBytesPerSecond, cfg.Backoff = t.DedupeBufferBytes, t.IOBytesPerSecond, t.Backoff
	return cfg
}

// Run runs cleaning rounds until ctx ends: a round that cleaned something
// is followed at once by the next, otherwise after Backoff.
// REQUIRES: at most one Run per Cleaner (passes assume one writer of each
// PartitionState and of each log's cleaner checkpoint).
func (c *Cleaner) Run(ctx context.Context) {
	for {
		cleaned := c.CleanOnce(ctx, time.Now())
		cleaned = c.CleanTierOnce(ctx, time.Now()) || cleaned
		if c.tier != nil {
			c.tier.DeleteReplaced(ctx)
		}
		wait := c.tuning().Backoff
		if cleaned {
			wait = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// ratio is the dirty share of a partition's bytes.
func ratio(clean, dirty int64) float64 {
	return float64(dirty) / float64(max(clean+dirty, 1))
}

// logPass logs a successful pass.
func (c *Cleaner) logPass(msg string, p Partition, dirtyRatio float64, stats Stats, attrs ...any) {
	attrs = append([]any{"topic", p.Topic(), "partition", p.Index(), "dirty_ratio", fmt.Sprintf("%.2f", dirtyRatio),
		"bytes_in", stats.BytesIn, "bytes_out", stats.BytesOut, "records_in", stats.RecordsIn,
		"records_out", stats.RecordsOut}, attrs...)
	c.log.Info(msg, attrs...)
}
