package tier

// Tiered compaction: a contiguous run of a partition's segment
// objects is downloaded, rewritten by a caller-supplied function (package
// compaction keeps the latest record per key), cut into new objects of
// about segment.bytes (small outputs merged, so the object count never
// grows), uploaded, and swapped into the manifest in one etcd transaction.
// The old objects are deleted after a grace period. See doc.go
// ("Tiered compaction") for the protocol and its crash behaviour.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/strata-log/strata/metadata"
)

// Sentinel errors of tiered compaction.
var (
	// ErrInvalidCompaction: a CompactorConfig or CompactRun that cannot be used.
	ErrInvalidCompaction = errors.New("tier: invalid compaction run")
	// ErrCompactedEmpty: the rewrite kept no batch at all; nothing was
	// uploaded or swapped (the manifest must stay gap-free, so an empty run
	// is left to retention).
	ErrCompactedEmpty = errors.New("tier: compaction left no batches")
	// ErrObjectGone: a cold read found its object deleted (a compaction
	// swap or retention replaced its entry): re-read the manifest and retry.
	ErrObjectGone = errors.New("tier: segment object gone")
)

// Compactor defaults.
const (
	DefaultDeleteGrace   = 5 * time.Minute
	DefaultMaxRunObjects = 32
)

// BatchSource yields whole record batches in increasing offset order; Next
// returns io.EOF after the last one. The batch returned is valid until the
// next call. Implementations say how much they check: tier's sources check
// each batch's CRC (CheckStoredBatch), compaction's BatchReader
// only the framing. tier owns the interface because its RewriteFunc hands
// one to compaction, which imports tier, never the reverse.
type BatchSource interface {
	Next() (batch []byte, err error)
}

// RewriteFunc rewrites a run: it reads every batch of batches and passes
// each batch to keep, rewritten or verbatim, to sink, in offset order
// (strictly increasing, within the run's offsets). sink copies the batch.
// An error from sink must be returned. Package compaction supplies it; tier
// does not import compaction.
type RewriteFunc func(batches BatchSource, sink func(batch []byte) error) error

// ManifestSwapper commits a swap of manifest entries; *metadata.Store
// implements it (see metadata.SwapTierEntriesRev for the contract).
type ManifestSwapper interface {
	SwapTierEntriesRev(ctx context.Context, olds, news []metadata.TierEntry) (int64, error)
}

var _ ManifestSwapper = (*metadata.Store)(nil)

// CompactorConfig configures a Compactor.
type CompactorConfig struct {
	// Store holds the objects. Required.
	Store ObjectStore
	// Swapper commits manifest swaps (the metadata store). Required.
	Swapper ManifestSwapper
	// Manifest, if set, gets each successful swap at once (Swapped), before
	// the watch delivers it.
	Manifest *Manifest
	// Cluster is the cluster name of the object keys. Required.
	Cluster string
	// TempDir holds a run's rewritten batches until they are uploaded.
	// Default os.TempDir(). A TempDir given here is the compactor's own
	// (the broker's data dir): NewCompactor removes the run files a crash
	// left in it. The shared default is left alone.
	TempDir string
	// DeleteGrace is how long an old object stays after its swap, so that
	// cold reads in flight finish. Default 5m.
	DeleteGrace time.Duration
	// Cold, if set, forgets each object DeleteDue deleted, so its caches
	// never answer for an object that is gone.
	Cold *ColdReader
	// MaxRunObjects bounds the objects of one run (one etcd transaction
	// holds olds plus news). Default 32; at most metadata.MaxTierSwapEntries/2.
	MaxRunObjects int
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now is the clock of the delete queue; default time.Now.
	Now func() time.Time
}

// Validate rejects a config that cannot work; zero values take defaults.
func (c CompactorConfig) Validate() error {
	switch {
	case c.Store == nil, c.Swapper == nil, c.Cluster == "":
		return fmt.Errorf("%w: Store, Swapper and Cluster are required", ErrInvalidCompaction)
	case c.DeleteGrace < 0, c.MaxRunObjects < 0, c.MaxRunObjects > metadata.MaxTierSwapEntries/2:
		return fmt.Errorf("%w: DeleteGrace %v, MaxRunObjects %d", ErrInvalidCompaction, c.DeleteGrace, c.MaxRunObjects)
	}
	return nil
}

func (c CompactorConfig) withDefaults() CompactorConfig {
	if c.TempDir == "" {
		c.TempDir = os.TempDir()
	}
	if c.DeleteGrace == 0 {
		c.DeleteGrace = DefaultDeleteGrace
	}
	if c.MaxRunObjects == 0 {
		c.MaxRunObjects = DefaultMaxRunObjects
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Compactor rewrites runs of tiered objects. Compact may run concurrently
// for different partitions (the caller never compacts one partition twice
// at once: the second swap would fail its guard anyway).
type Compactor struct {
	cfg CompactorConfig

	mu struct {
		sync.Mutex
		pending []pendingDelete // old objects, in due order
	}
}

// pendingDelete is an old object to delete once due. Guarded by Compactor.mu.
type pendingDelete struct {
	key string
	due time.Time
}

// NewCompactor returns a compactor, after removing the run files a crash
// mid-compaction left in cfg.TempDir (when given).
func NewCompactor(cfg CompactorConfig) (*Compactor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TempDir != "" {
		removeStaleRunFiles(cfg.TempDir, cfg.withDefaults().Logger)
	}
	return &Compactor{cfg: cfg.withDefaults()}, nil
}

// CompactRun is one run to compact.
type CompactRun struct {
	// Topic is the topic's name (object keys and footers carry it).
	Topic string
	// UploadEpoch is the compacting leader's epoch (the <epoch> of new keys).
	UploadEpoch int32
	// Entries is the run: manifest entries of one partition, sorted,
	// contiguous (each BaseOffset is the previous LastOffset+1), Versions
	// as read. 1..MaxRunObjects of them.
	Entries []metadata.TierEntry
	// TargetBytes is the size new objects aim at (segment.bytes).
	TargetBytes int64
	// Rewrite rewrites the run's batches. Required.
	Rewrite RewriteFunc
	// IndexIntervalBytes of the new objects; default DefaultIndexIntervalBytes.
	IndexIntervalBytes int
}

// CompactResult describes a committed swap.
type CompactResult struct {
	Olds, News []metadata.TierEntry // News with Version = Revision
	Revision   int64                // etcd revision of the swap
	BytesIn    int64                // batch bytes read
	BytesOut   int64                // batch bytes written
	BatchesIn  int
	BatchesOut int
}

func (c *Compactor) checkRun(run CompactRun) error {
	n := len(run.Entries)
	switch {
	case n == 0, n > c.cfg.MaxRunObjects, run.Rewrite == nil, run.TargetBytes <= 0, run.UploadEpoch < 0:
		return fmt.Errorf("%w: %d entries, target %d bytes, epoch %d", ErrInvalidCompaction, n, run.TargetBytes, run.UploadEpoch)
	}
	if err := metadata.ValidateTopicName(run.Topic); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCompaction, err)
	}
	first := run.Entries[0]
	for i, e := range run.Entries {
		if e.TopicID != first.TopicID || e.Partition != first.Partition || e.Version <= 0 ||
			(i > 0 && e.BaseOffset != run.Entries[i-1].LastOffset+1) {
			return fmt.Errorf("%w: entry %d (%+v) not in a contiguous run of one partition", ErrInvalidCompaction, i, e)
		}
	}
	return nil
}

// Compact rewrites run and swaps the manifest. On success the old objects
// are queued for deletion after DeleteGrace (DeleteDue deletes them).
// Errors: ErrInvalidCompaction, ErrCompactedEmpty, ErrCorruptObject (an
// old object failed a check; nothing changed), metadata.ErrTierEntriesChanged
// (the run changed meanwhile: the new objects are deleted at once), or a
// store/etcd error. When the swap's outcome is unknown (an etcd error) the
// new objects are left: if the swap did not happen they are orphans that
// the sweeper removes.
//
// REQUIRES: the run's batches are all below the partition's
// firstUncleanable offset (the caller's Rewrite decides what to keep).
func (c *Compactor) Compact(ctx context.Context, run CompactRun) (CompactResult, error) {
	if err := c.checkRun(run); err != nil {
		return CompactResult{}, err
	}
	out, err := newRunOutput(c.cfg.TempDir, run)
	if err != nil {
		return CompactResult{}, err
	}
	defer out.close()
	src := &runSource{ctx: ctx, store: c.cfg.Store, entries: run.Entries, lastOffset: -1}
	defer src.close()
	if err := run.Rewrite(src, out.append); err != nil {
		return CompactResult{}, err
	}
	if err := src.finished(); err != nil {
		return CompactResult{}, err
	}
	if len(out.batches) == 0 {
		return CompactResult{}, fmt.Errorf("%w: run [%d, %d]", ErrCompactedEmpty, run.Entries[0].BaseOffset, run.Entries[len(run.Entries)-1].LastOffset)
	}
	news, err := c.upload(ctx, run, out, src)
	if err != nil {
		return CompactResult{}, err
	}
	res := CompactResult{Olds: run.Entries, News: news, BytesIn: src.bytes, BytesOut: out.size,
		BatchesIn: src.batches, BatchesOut: len(out.batches)}
	if res.Revision, err = c.swap(ctx, run.Entries, news); err != nil {
		return CompactResult{}, err
	}
	return res, nil
}

// swap commits the swap, cleans up after a definite failure, and queues the
// old objects after a success.
func (c *Compactor) swap(ctx context.Context, olds, news []metadata.TierEntry) (int64, error) {
	rev, err := c.cfg.Swapper.SwapTierEntriesRev(ctx, olds, news)
	if err != nil {
		if errors.Is(err, metadata.ErrTierEntriesChanged) || errors.Is(err, metadata.ErrTopicNotFound) ||
			errors.Is(err, metadata.ErrTierEntryInvalid) {
			c.deleteNow(news) // never committed: nobody reads them
		}
		return 0, err
	}
	for i := range news {
		news[i].Version = rev
	}
	if c.cfg.Manifest != nil {
		c.cfg.Manifest.Swapped(olds, news)
	}
	due := c.cfg.Now().Add(c.cfg.DeleteGrace)
	c.mu.Lock()
	for _, e := range olds {
		c.mu.pending = append(c.mu.pending, pendingDelete{key: e.Key, due: due})
	}
	c.mu.Unlock()
	c.cfg.Logger.Info("tiered compaction swapped objects", "topic_id", olds[0].TopicID.String(),
		"partition", olds[0].Partition, "base", olds[0].BaseOffset, "last", olds[len(olds)-1].LastOffset,
		"objects_in", len(olds), "objects_out", len(news), "revision", rev)
	return rev, nil
}

// deleteNow removes new objects whose swap failed (best effort: the orphan
// sweeper removes what is left).
func (c *Compactor) deleteNow(news []metadata.TierEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, e := range news {
		if err := c.cfg.Store.Delete(ctx, e.Key); err != nil && !c.cfg.Store.IsNotFound(err) {
			c.cfg.Logger.Warn("tiered compaction: deleting an unused new object", "key", e.Key, "err", err)
		}
	}
}

// DeleteDue deletes the old objects whose grace period has passed, drops
// them from Cold's caches, and returns their keys. Objects that fail to
// delete stay queued; the first error is returned.
func (c *Compactor) DeleteDue(ctx context.Context) ([]string, error) {
	now := c.cfg.Now()
	c.mu.Lock()
	n := 0
	for n < len(c.mu.pending) && !c.mu.pending[n].due.After(now) {
		n++
	}
	due := append([]pendingDelete(nil), c.mu.pending[:n]...)
	c.mu.pending = c.mu.pending[n:]
	c.mu.Unlock()
	var deleted []string
	var failed []pendingDelete
	var first error
	for _, d := range due {
		if err := c.cfg.Store.Delete(ctx, d.key); err != nil && !c.cfg.Store.IsNotFound(err) {
			failed = append(failed, d)
			first = cmpFirst(first, err)
			continue
		}
		deleted = append(deleted, d.key)
		if c.cfg.Cold != nil {
			c.cfg.Cold.Forget(d.key)
		}
	}
	if len(failed) > 0 {
		c.mu.Lock()
		c.mu.pending = append(failed, c.mu.pending...)
		c.mu.Unlock()
	}
	return deleted, first
}

func cmpFirst(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// PendingDeletes returns the keys of old objects waiting for their grace
// period: the orphan sweeper must leave them alone until DeleteDue removes
// them (after a crash the queue is lost and the sweeper removes them).
func (c *Compactor) PendingDeletes() map[string]struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]struct{}, len(c.mu.pending))
	for _, d := range c.mu.pending {
		out[d.key] = struct{}{}
	}
	return out
}

// RetryGone runs read, and while it fails with ErrObjectGone (the object
// it read was swapped out and deleted) runs it again, up to attempts times
// in all, waiting wait between tries so the manifest can catch up. read
// must look its entry up in the manifest afresh on every call.
func RetryGone[T any](ctx context.Context, attempts int, wait time.Duration, read func() (T, error)) (T, error) {
	var res T
	var err error
	for i := 0; i < max(attempts, 1); i++ {
		if i > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return res, errors.Join(err, ctx.Err())
			case <-t.C:
			}
		}
		if res, err = read(); !errors.Is(err, ErrObjectGone) {
			return res, err
		}
	}
	return res, err
}
