package tier

// The tiering service: the uploader, local and remote retention, the
// orphan sweeper, the merge pass and the upload-lag bound, run for the
// partitions one broker holds (doc.go, "Tiering service"). The broker
// builds it with explicit dependencies (Deps) and sees it only through
// its exported methods; the service sees the broker only through the
// small interfaces below, which the broker implements with thin adapters.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
)

// Config configures tiering on a broker. Zero values get defaults.
type Config struct {
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
	// segment.bytes (merger.go); the objects merged are deleted the
	// cleaner's object-delete grace after their swap. Default 1m;
	// negative turns merging off.
	MergeInterval time.Duration
	// MergeGrace: an object is merged only once its newest record
	// (its entry's MaxTimestamp) is this old, so the small objects of the
	// last minutes are merged together rather than one by one. Default 10m.
	MergeGrace time.Duration
	// RetentionHold and RetentionHoldBytes are the broker defaults of
	// retention.hold.ms and retention.hold.bytes (hold.go), for topics
	// that leave them at -1: how long past retention.ms, and how many
	// bytes of objects past retention, remote retention keeps for the
	// consumer groups that still need them. 0 turns a bound off; the hold
	// is off when both are.
	RetentionHold      time.Duration
	RetentionHoldBytes int64
	// HoldActiveWindow: only a group that committed within it holds
	// objects, so an abandoned group cannot pin the bucket. The broker
	// sets the group coordinator's offsets retention
	// (offsets.retention.minutes), after which the offsets are gone
	// anyway. Default 7 days.
	HoldActiveWindow time.Duration
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
	defaultHoldActiveWindow  = 7 * 24 * time.Hour
)

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
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
	setDur(&c.HoldActiveWindow, defaultHoldActiveWindow)
	if c.UploadConcurrency == 0 {
		c.UploadConcurrency = defaultUploadConcurrency
	}
	if c.MaxUploadLagBytes == 0 {
		c.MaxUploadLagBytes = defaultMaxUploadLag
	}
	return c
}

// Validate checks a config after WithDefaults.
func (c Config) Validate() error {
	if c.UploadInterval < 0 || c.UploadTimeout < 0 || c.RetryBackoff < 0 || c.MaxRetryBackoff < c.RetryBackoff ||
		c.ThrottleWait < 0 || c.SweepInterval < 0 || c.OrphanGrace < 0 || c.ObjectDeleteDelay < 0 ||
		c.UploadConcurrency < 1 || c.MaxUploadLagBytes < -1 || c.MergeGrace < 0 ||
		c.RetentionHold < 0 || c.RetentionHoldBytes < 0 || c.HoldActiveWindow < 0 {
		return fmt.Errorf("tier config %+v", c)
	}
	return nil
}

// Counters are the tiering service's counters (cmd maps them to metrics).
type Counters struct {
	SegmentsUploaded   int64 // committed to the manifest
	BytesUploaded      int64 // object bytes of committed segments
	UploadFailures     int64 // upload attempts that failed (retried later)
	LocalSegmentsFreed int64 // local segments deleted after upload
	RemoteEntriesGone  int64 // manifest entries removed by retention / DeleteRecords
	ObjectsDeleted     int64 // objects deleted after their entry went
	OrphansDeleted     int64 // objects the sweeper deleted
	ThrottledProduces  int64 // produce requests answered THROTTLING_QUOTA_EXCEEDED
	BoundRolls         int64 // active segments rolled early for tier.upload.max.lag.ms
	MergePasses        int64 // merge passes over a led partition (merger.go), merging or not
	MergeObjectsIn     int64 // small objects replaced by merged ones
	MergeObjectsOut    int64 // merged objects written (one per run)
	// RetentionHoldReadFailures counts retention passes that could not
	// read the retention holds and so deleted nothing a group might need.
	RetentionHoldReadFailures int64
}

// Partition is the service's view of one local replica. Its log and
// leadership belong to the broker; the service reads them and writes only
// the log's segments (upload-bound rolls, retention) and the upload lag.
type Partition interface {
	// Key names the partition in the manifest.
	Key() metadata.TierPartition
	Topic() string
	Log() *hotlog.Log
	// Config is the topic's effective configs.
	Config() metadata.TopicConfig
	// Tiered: the partition's sealed segments go to the bucket.
	Tiered() bool
	// KeepsLocalLog: a tiered partition that keeps its whole local log
	// (local retention does not apply, merges never cross its local start).
	KeepsLocalLog() bool
	// Leads: this broker's replica leads the partition now.
	Leads() bool
	LeaderEpoch() int32
	HighWatermark() int64
	LastStableOffset() int64
	// UploadLag is the bytes of sealed segments not yet tiered, as of the
	// uploader's last look: written by the service, read by Produce.
	UploadLag() *atomic.Int64
}

// Registry is the part of the broker's partition registry the service
// reads.
type Registry interface {
	// LocalPartitions lists every replica this broker holds.
	LocalPartitions() []Partition
	// TopicByID is the topic with this id, if the broker knows it.
	TopicByID(id metadata.TopicID) (metadata.Topic, bool)
	// Topics lists every topic the cluster has.
	Topics() []metadata.Topic
}

// Store is the slice of the metadata store the service writes and reads:
// manifest entries, the tiered log start, topic-id history and the
// retention holds.
// *metadata.Store implements it.
type Store interface {
	Cluster() string
	CommitTierEntryRev(ctx context.Context, e metadata.TierEntry) (int64, error)
	TierEntries(ctx context.Context, id metadata.TopicID, partition int32) ([]metadata.TierEntry, error)
	DeleteTierEntries(ctx context.Context, id metadata.TopicID, partition int32, entries []metadata.TierEntry) error
	RaiseTierLogStart(ctx context.Context, id metadata.TopicID, partition int32, offset int64) (int64, error)
	TopicIDKnown(ctx context.Context, id metadata.TopicID) (live, deleted bool, err error)
	// RetentionHolds are the committed offsets groups published for
	// topics with a retention hold (hold.go), by partition.
	RetentionHolds(ctx context.Context) (map[metadata.TierPartition][]metadata.RetentionHold, error)
}

var _ Store = (*metadata.Store)(nil)

// Cleaning is what the merge pass and the sweeper need from the tiered
// cleaner of compacted topics (nil: no cleaner).
type Cleaning interface {
	// TierCleanerDue: the tiered cleaner would pick p now, so merging its
	// objects would race the cleaner's swap.
	TierCleanerDue(p Partition, cfg metadata.TopicConfig, now time.Time) bool
	// TierCheckpoint is where the cleaned part of p's tiered log ends:
	// merge runs never cross it.
	TierCheckpoint(p Partition) int64
	// DeleteCompactedObjects deletes the objects tiered cleaning and merges
	// swapped out, once their grace has passed (the janitor's delete tick).
	DeleteCompactedObjects(ctx context.Context)
}

// Deps are the service's dependencies. Objects nil means no bucket: only
// untiered local retention runs.
type Deps struct {
	Config   Config // zero fields get defaults
	Objects  ObjectStore
	Manifest *Manifest // the broker's in-memory manifest (never nil)
	// Compactor rewrites runs of objects (merges); nil without a bucket.
	Compactor *Compactor
	Store     Store
	Registry  Registry
	Cleaning  Cleaning
	Logger    *slog.Logger
}

// Service runs tiering for one broker. Its loops (Run) own the upload
// and deletion state; mu guards the maps and counters (never held across
// I/O).
type Service struct {
	cfg       Config
	objects   ObjectStore
	manifest  *Manifest
	compactor *Compactor
	store     Store
	reg       Registry
	cleaning  Cleaning
	log       *slog.Logger

	// kick wakes the uploader early (an upload finished). Buffered, size 1.
	kick chan struct{}
	// slots bounds concurrent partition uploads (UploadConcurrency); a
	// claimed upload holds one until releaseUpload.
	slots chan struct{}
	// running counts upload goroutines; the upload loop waits for them on exit.
	running sync.WaitGroup
	mu      sync.Mutex
	// parts holds per-partition upload state, by partition.
	parts map[metadata.TierPartition]*uploadState
	// pendingDeletes are objects to delete once due (ObjectDeleteDelay).
	pendingDeletes []dueDelete
	// held is what the retention hold keeps of each led partition, as of
	// its last remote retention pass (Status shows it); partitions holding
	// nothing have no record.
	held map[metadata.TierPartition]HeldStatus
	// topicFiles remembers the topic.json content written per topic id.
	topicFiles map[metadata.TopicID]string
	counters   Counters
}

// uploadState is one partition's uploader bookkeeping. Guarded by Service.mu.
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

type dueDelete struct {
	key string
	due time.Time
}

// NewService builds the service; nothing runs until Run.
func NewService(d Deps) *Service {
	log := d.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg := d.Config.WithDefaults()
	return &Service{cfg: cfg, objects: d.Objects, manifest: d.Manifest, compactor: d.Compactor,
		store: d.Store, reg: d.Registry, cleaning: d.Cleaning, log: log,
		kick: make(chan struct{}, 1), slots: make(chan struct{}, max(cfg.UploadConcurrency, 1)),
		parts: map[metadata.TierPartition]*uploadState{}, topicFiles: map[metadata.TopicID]string{},
		held: map[metadata.TierPartition]HeldStatus{}}
}

// Counters returns a snapshot of the counters.
func (s *Service) Counters() Counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters
}

// count applies f to the counters under the lock.
func (s *Service) count(f func(c *Counters)) {
	s.mu.Lock()
	f(&s.counters)
	s.mu.Unlock()
}

// Run runs the uploader and the janitor until ctx ends, and returns once
// both (and every upload they started) have stopped. Without a bucket it
// returns at once.
func (s *Service) Run(ctx context.Context) {
	if s.objects == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.uploadLoop(ctx) }()
	go func() { defer wg.Done(); s.janitorLoop(ctx) }()
	wg.Wait()
}

// uploadLoop runs the uploader until ctx ends. It never does object-store
// I/O itself (uploads run in their own goroutines), so a bucket that hangs
// cannot stop the upload lag from being refreshed.
func (s *Service) uploadLoop(ctx context.Context) {
	defer s.running.Wait() // uploads end with ctx
	upload := time.NewTicker(s.cfg.UploadInterval)
	defer upload.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-upload.C:
		case <-s.kick:
		}
		s.UploadRound(ctx)
	}
}

// janitorLoop deletes objects whose manifest entries are gone once due
// (retention's, and the swapped-out objects of merges and tiered
// cleaning), runs the orphan sweeper and merges small objects
// (merger.go), until ctx ends.
func (s *Service) janitorLoop(ctx context.Context) {
	deletes := time.NewTicker(max(s.cfg.ObjectDeleteDelay/2, 10*time.Millisecond))
	defer deletes.Stop()
	sweep := time.NewTicker(s.cfg.SweepInterval)
	defer sweep.Stop()
	merge, stopMerge := s.mergeTicks()
	defer stopMerge()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-deletes.C:
			s.deleteDueObjects(ctx, now)
			if s.cleaning != nil {
				s.cleaning.DeleteCompactedObjects(ctx)
			}
		case now := <-sweep.C:
			s.SweepOrphans(ctx, now)
		case now := <-merge:
			s.MergeRound(ctx, now)
		}
	}
}

// ErrUploadLag: the partition's upload lag is past MaxUploadLagBytes.
var ErrUploadLag = errors.New("tier: upload lag exceeds tier.upload.max.lag.bytes")

// ThrottleUploadLag waits, up to ThrottleWait, while p's upload lag
// exceeds MaxUploadLagBytes; ErrUploadLag if it still does (the producer
// gets THROTTLING_QUOTA_EXCEEDED, which clients retry), so a broker that
// cannot reach the bucket stops taking data before its disk fills.
func (s *Service) ThrottleUploadLag(ctx context.Context, p Partition) error {
	limit, lag := s.cfg.MaxUploadLagBytes, p.UploadLag()
	if limit < 0 || !p.Tiered() || lag.Load() <= limit {
		return nil
	}
	deadline := time.NewTimer(s.cfg.ThrottleWait)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for lag.Load() > limit {
		select {
		case <-tick.C:
		case <-deadline.C:
			s.count(func(c *Counters) { c.ThrottledProduces++ })
			return fmt.Errorf("%w: %d bytes behind", ErrUploadLag, lag.Load())
		case <-ctx.Done():
			return ErrUploadLag
		}
	}
	return nil
}

// LogStartAcrossTiers is Kafka's log start offset of a partition across both tiers:
// the first tiered offset when history is in the bucket, else the hot
// log's start (localStart), and never below the tiered log start that
// DeleteRecords and retention raise. Equals localStart when nothing is
// tiered.
func (m *Manifest) LogStartAcrossTiers(k metadata.TierPartition, localStart int64) int64 {
	start := localStart
	if tieredStart, _, ok := m.Range(k.TopicID, k.Partition); ok {
		start = min(start, tieredStart)
	}
	return max(start, m.LogStart(k.TopicID, k.Partition))
}

// logStart is p's log start across both tiers.
func (s *Service) logStart(p Partition) int64 {
	return s.manifest.LogStartAcrossTiers(p.Key(), p.Log().LogStartOffset())
}
