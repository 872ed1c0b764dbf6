package broker

// Tiering (DESIGN.md §5, issue 4): the uploader, local retention guarded by
// the manifest, remote retention, DeleteRecords across tiers, the orphan
// sweeper and upload-lag throttling. See doc.go ("Tiering").

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/metadata"
)

// TierConfig configures tiering on this broker. Zero values get defaults.
type TierConfig struct {
	// UploadInterval is how often every led partition is checked for sealed
	// segments to upload (a finished upload also wakes the uploader, so a
	// free slot is used at once). Default 1s.
	UploadInterval time.Duration
	// UploadConcurrency bounds partitions uploading at once. Default 2.
	UploadConcurrency int
	// UploadTimeout bounds one segment's upload, verification and commit. Default 10m.
	UploadTimeout time.Duration
	// RetryBackoff is the first wait after a failed upload of a partition;
	// it doubles per failure up to MaxRetryBackoff. Defaults 500ms and 10s.
	RetryBackoff, MaxRetryBackoff time.Duration
	// MaxUploadLagBytes (tier.upload.max.lag.bytes): once a partition's
	// sealed-but-not-uploaded bytes exceed it, its producers are throttled.
	// Default 4 GiB; -1 disables throttling.
	MaxUploadLagBytes int64
	// UploadMaxLag is the broker default of tier.upload.max.lag.ms: how
	// long a committed record may stay out of the bucket. A topic's own
	// value wins; a negative value here (-1 for a topic) turns the bound
	// off. Default 60s.
	UploadMaxLag time.Duration
	// ThrottleWait is how long a throttled Produce waits for the lag to fall
	// before it is answered THROTTLING_QUOTA_EXCEEDED. Default 1s.
	ThrottleWait time.Duration
	// SweepInterval is how often the orphan sweeper lists the bucket.
	// Default 10m.
	SweepInterval time.Duration
	// OrphanGrace: an object absent from the manifest is deleted only once
	// it is older than this (uploads in flight are younger). Default 1h.
	OrphanGrace time.Duration
	// ObjectDeleteDelay: an object whose manifest entry retention removed is
	// deleted this much later, so cold readers in flight finish. Default 30s.
	ObjectDeleteDelay time.Duration
	// MergeInterval is how often the leader of each tiered partition looks
	// for runs of small objects to merge into objects of up to
	// segment.bytes (tiering_merge.go); the objects merged are deleted
	// compaction.CleanerConfig.ObjectDeleteGrace after their swap. Default 1m;
	// negative turns merging off.
	MergeInterval time.Duration
	// MergeGrace: an object is merged only once its newest record
	// (its entry's MaxTimestamp) is this old, so the small objects of the
	// last minutes are merged together rather than one by one. Default 10m.
	MergeGrace time.Duration
}

const (
	defaultUploadInterval    = time.Second
	defaultUploadConcurrency = 2
	defaultUploadTimeout     = 10 * time.Minute
	defaultRetryBackoff      = 500 * time.Millisecond
	defaultMaxRetryBackoff   = 10 * time.Second
	defaultMaxUploadLag      = 4 << 30
	defaultUploadMaxLag      = time.Minute
	defaultThrottleWait      = time.Second
	defaultSweepInterval     = 10 * time.Minute
	defaultOrphanGrace       = time.Hour
	defaultObjectDeleteDelay = 30 * time.Second
	defaultMergeInterval     = time.Minute
	defaultMergeGrace        = 10 * time.Minute
)

func (c TierConfig) withDefaults() TierConfig {
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDur(&c.UploadInterval, defaultUploadInterval)
	setDur(&c.UploadTimeout, defaultUploadTimeout)
	setDur(&c.RetryBackoff, defaultRetryBackoff)
	setDur(&c.MaxRetryBackoff, defaultMaxRetryBackoff)
	setDur(&c.ThrottleWait, defaultThrottleWait)
	setDur(&c.UploadMaxLag, defaultUploadMaxLag)
	setDur(&c.SweepInterval, defaultSweepInterval)
	setDur(&c.OrphanGrace, defaultOrphanGrace)
	setDur(&c.ObjectDeleteDelay, defaultObjectDeleteDelay)
	setDur(&c.MergeInterval, defaultMergeInterval)
	setDur(&c.MergeGrace, defaultMergeGrace)
	if c.UploadConcurrency == 0 {
		c.UploadConcurrency = defaultUploadConcurrency
	}
	if c.MaxUploadLagBytes == 0 {
		c.MaxUploadLagBytes = defaultMaxUploadLag
	}
	return c
}

func (c TierConfig) validate() error {
	if c.UploadInterval < 0 || c.UploadTimeout < 0 || c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff ||
		c.ThrottleWait < 0 || c.SweepInterval < 0 || c.OrphanGrace < 0 || c.ObjectDeleteDelay < 0 ||
		c.UploadConcurrency < 1 || c.MaxUploadLagBytes < -1 || c.MergeGrace < 0 {
		return fmt.Errorf("%w: tier config %+v", ErrInvalidConfig, c)
	}
	return nil
}

// TierCounters are the broker's tiering counters (cmd maps them to metrics).
type TierCounters struct {
	SegmentsUploaded   int64 // committed to the manifest
	BytesUploaded      int64 // object bytes of committed segments
	UploadFailures     int64 // upload attempts that failed (retried later)
	LocalSegmentsFreed int64 // local segments deleted after upload
	RemoteEntriesGone  int64 // manifest entries removed by retention / DeleteRecords
	ObjectsDeleted     int64 // objects deleted after their entry went
	OrphansDeleted     int64 // objects the sweeper deleted
	ThrottledProduces  int64 // produce requests answered THROTTLING_QUOTA_EXCEEDED
	BoundRolls         int64 // active segments rolled early for tier.upload.max.lag.ms
	MergePasses        int64 // merge passes over a led partition (tiering_merge.go), merging or not
	MergeObjectsIn     int64 // small objects replaced by merged ones
	MergeObjectsOut    int64 // merged objects written (one per run)
}

// tieringState is owned by the tiering loops; mu guards the maps and
// counters (never held across I/O).
type tieringState struct {
	// kick wakes the uploader early (an upload finished). Buffered, size 1.
	kick chan struct{}
	// slots bounds concurrent partition uploads (UploadConcurrency); a
	// claimed upload holds one until releaseUpload.
	slots chan struct{}
	// running counts upload goroutines; tierLoop waits for them on exit.
	running sync.WaitGroup
	mu      sync.Mutex
	// parts holds per-partition upload state, by partition.
	parts map[metadata.TierPartition]*uploadState
	// pendingDeletes are objects to delete once due (ObjectDeleteDelay).
	pendingDeletes []pendingDelete
	// topicFiles remembers the topic.json content written per topic id.
	topicFiles map[metadata.TopicID]string
	counters   TierCounters
}

// uploadState is one partition's uploader bookkeeping. Guarded by tieringState.mu.
type uploadState struct {
	failures  int
	notBefore time.Time // next attempt after a failure
	lastErr   string
	busy      bool // an upload of this partition is running
	// retryKey is the object key of the last upload attempt that did not
	// commit (retryBase its segment): a retry of the same segment at the
	// same epoch re-puts the same key (the same bytes: encoding is
	// deterministic), so a Put whose answer was lost leaves no orphan.
	retryKey  string
	retryBase int64
}

type pendingDelete struct {
	key string
	due time.Time
}

func (t *tieringState) init(uploadConcurrency int) {
	t.kick = make(chan struct{}, 1)
	t.slots = make(chan struct{}, uploadConcurrency)
	t.parts = map[metadata.TierPartition]*uploadState{}
	t.topicFiles = map[metadata.TopicID]string{}
}

// TierCounters returns a snapshot of the tiering counters.
func (b *Broker) TierCounters() TierCounters {
	b.tiering.mu.Lock()
	defer b.tiering.mu.Unlock()
	return b.tiering.counters
}

// logStartOffset is Kafka's log start offset across both tiers: the first
// tiered offset when history is in the bucket, else the hot log's start,
// and never below the tiered log start that DeleteRecords and retention
// raise. Equals log.LogStartOffset() when nothing is tiered.
func (p *partition) logStartOffset() int64 {
	start := p.log.LogStartOffset()
	if tieredStart, _, ok := p.manifest.Range(p.topicID, p.index); ok {
		start = min(start, tieredStart)
	}
	return max(start, p.manifest.LogStart(p.topicID, p.index))
}

// localLogStartOffset is the first offset the hot log still holds.
func (p *partition) localLogStartOffset() int64 { return p.log.LogStartOffset() }

// tieredRange is the partition's range in the bucket, [start, end); ok is
// false when nothing is tiered.
func (p *partition) tieredRange() (start, end int64, ok bool) {
	return p.manifest.Range(p.topicID, p.index)
}

// errUploadLag: the partition's upload lag is past MaxUploadLagBytes.
var errUploadLag = errors.New("broker: tier upload lag exceeds tier.upload.max.lag.bytes")

// throttleUploadLag waits, up to ThrottleWait, while p's upload lag exceeds
// MaxUploadLagBytes; errUploadLag if it still does (the producer gets
// THROTTLING_QUOTA_EXCEEDED, which clients retry), so a broker that cannot
// reach the bucket stops taking data before its disk fills.
func (b *Broker) throttleUploadLag(p *partition) error {
	limit := b.cfg.Tier.MaxUploadLagBytes
	if limit < 0 || !b.tieringEnabled(p.topic, p.config()) || p.uploadLag.Load() <= limit {
		return nil
	}
	deadline := time.NewTimer(b.cfg.Tier.ThrottleWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for p.uploadLag.Load() > limit {
		select {
		case <-tick.C:
		case <-deadline.C:
			b.tiering.mu.Lock()
			b.tiering.counters.ThrottledProduces++
			b.tiering.mu.Unlock()
			return fmt.Errorf("%w: %d bytes behind", errUploadLag, p.uploadLag.Load())
		case <-b.lifetime.Done():
			return errUploadLag
		}
	}
	return nil
}
