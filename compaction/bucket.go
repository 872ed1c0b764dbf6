package compaction

import (
	"context"
	"log/slog"
	"slices"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier"
)

// BucketStore is the TierStore over package tier: the compactor that
// rewrites runs and swaps them into the manifest, the bucket the objects
// are read from, and the cold reader whose cache holds their indexes.
type BucketStore struct {
	Compactor *tier.Compactor // nil: nothing is ever replaced (DeleteReplaced)
	Objects   tier.ObjectStore
	Cold      *tier.ColdReader
	Logger    *slog.Logger
}

var _ TierStore = BucketStore{}

func (s BucketStore) Compact(ctx context.Context, run tier.CompactRun) (tier.CompactResult, error) {
	return s.Compactor.Compact(ctx, run)
}

func (s BucketStore) ObjectBatches(ctx context.Context, entries []metadata.TierEntry) ObjectBatches {
	return tier.NewObjectBatches(ctx, s.Objects, entries)
}

// AbortedTxns reads the object's index section through the cold reader's
// cache, and returns a copy (the cache owns the index).
func (s BucketStore) AbortedTxns(ctx context.Context, e metadata.TierEntry) ([]hotlog.AbortedTxn, error) {
	x, err := s.Cold.Index(ctx, tier.ColdObjectOf(e))
	if err != nil {
		return nil, err
	}
	return slices.Clone(x.Aborted), nil
}

// DeleteReplaced deletes the objects replaced by compaction (the cleaner's
// and the tier merge pass's) whose grace period ended; the compactor drops
// them from the cold cache. Failures are logged and retried next time.
func (s BucketStore) DeleteReplaced(ctx context.Context) {
	if s.Compactor == nil {
		return
	}
	if _, err := s.Compactor.DeleteDue(ctx); err != nil && ctx.Err() == nil {
		s.Logger.Warn("deleting compacted objects", "err", err)
	}
}
