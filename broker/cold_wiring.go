package broker

// The cold path's wiring: offsets below a partition's local log start are
// served from the bucket by tier.ColdSource through one tier.ColdReader
// per broker. The broker adds what belongs to the front door: the
// per-client cold-read budget (a client quota, quotas.go) and the
// adapter to package fetch.

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/quota"
	"github.com/strata-log/strata/tier"
)

// initColdReader creates the cold reader when tiering is on.
func (b *Broker) initColdReader() error {
	b.coldSrc = tier.ColdSource{Manifest: b.manifest}
	if b.objects == nil {
		return nil
	}
	cfg := b.cfg.Cold
	if cfg.Logger == nil {
		cfg.Logger = b.componentLog("cold")
	}
	cold, err := tier.NewColdReader(b.objects, cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	b.cold = cold
	b.coldSrc.Reader = cold
	return nil
}

func (b *Broker) closeColdReader() {
	if b.cold != nil {
		b.cold.Close()
	}
}

// ColdStats returns the cold reader's counters (zero when tiering is off).
func (b *Broker) ColdStats() tier.ColdStats {
	if b.cold == nil {
		return tier.ColdStats{}
	}
	return b.cold.Stats()
}

// fetchPartition adapts p for package fetch: tier-aware when tiering is on.
func (b *Broker) fetchPartition(p *partition, reads *bufpool.Set) fetch.Partition {
	if b.cold == nil {
		return fetchSource{p, reads, nil}
	}
	return coldSource{fetchSource: fetchSource{p, reads, b.cold}, cold: b.coldSrc, quotas: &b.quotas,
		clientBudget: float64(b.cfg.Cold.ClientBytesPerSecond)}
}

// coldSource is a fetchSource whose offsets below the local log start come
// from the bucket.
type coldSource struct {
	fetchSource
	cold tier.ColdSource
	// quotas measures the per-client cold-read budget, clientBudget bytes
	// per second (0: off; quotas.go).
	quotas       *quota.Manager
	clientBudget float64
}

// coldBudgetKey is the context key of a client fetch's *coldBudgetUse,
// set by withQuotas when the cold-read budget is on.
type coldBudgetKey struct{}

// coldBudgetUse carries one client fetch's cold-read budget into its cold
// reads, which run on their own goroutines: throttleMs is the largest
// throttle any of them met, copied into the response by withQuotas.
type coldBudgetUse struct {
	key        quota.SensorKey
	throttleMs atomic.Int32
}

func (u *coldBudgetUse) raise(ms int32) {
	for {
		old := u.throttleMs.Load()
		if ms <= old || u.throttleMs.CompareAndSwap(old, ms) {
			return
		}
	}
}

// readColdBudgeted is the budget around one cold read: a client over its
// budget gets no cold bytes now (the fetch answers without them, with
// throttle_time_ms set, and the client backs off); what is served is
// counted against the budget.
func (s coldSource) readColdBudgeted(ctx context.Context, read func() ([]byte, error)) ([]byte, error) {
	use, _ := ctx.Value(coldBudgetKey{}).(*coldBudgetUse)
	if use == nil || s.clientBudget <= 0 {
		return read()
	}
	if ms := s.quotas.ThrottleOf(use.key, s.clientBudget); ms > 0 {
		use.raise(ms)
		return []byte{}, nil
	}
	data, err := read()
	if len(data) > 0 {
		use.raise(s.quotas.Record(use.key, s.clientBudget, float64(len(data))))
	}
	return data, err
}

var _ fetch.ColdCachedPartition = coldSource{}

// ReadColdCached answers a cold read from the cold cache alone, within
// the client's cold budget (a throttled client gets an empty hit).
func (s coldSource) ReadColdCached(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, bool) {
	hit := true
	data, _ := s.readColdBudgeted(ctx, func() ([]byte, error) {
		var d []byte
		d, hit = s.cold.ReadCached(tp(s.p), s.p.log, offset, maxBytes, upTo, s.reads)
		return d, nil
	})
	return data, hit
}

// IsCold: below the hot log's start. Offsets the hot log holds are always
// read locally, even when they are also tiered.
func (s coldSource) IsCold(offset int64) bool { return offset < s.p.localLogStartOffset() }

// ReadCold reads from the bucket (tier.ColdSource.Read) within the
// client's cold budget. Errors other than out-of-range and cancellation
// wrap hotlog.ErrStorage, answered KAFKA_STORAGE_ERROR.
func (s coldSource) ReadCold(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	return s.readColdBudgeted(ctx, func() ([]byte, error) {
		return s.cold.Read(ctx, tp(s.p), s.p.log, offset, maxBytes, upTo, s.reads)
	})
}

var _ fetch.ColdTxnPartition = coldSource{}

// ReadColdCommitted is ReadCold plus the aborted transactions overlapping
// the batches returned (fetch.ColdTxnPartition).
func (s coldSource) ReadColdCommitted(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, []hotlog.AbortedTxn, error) {
	data, err := s.ReadCold(ctx, offset, maxBytes, upTo)
	if err != nil || len(data) == 0 {
		return data, nil, err
	}
	aborted, err := s.cold.AbortedFor(ctx, tp(s.p), s.p.log, offset, data)
	if err != nil {
		return nil, nil, err
	}
	return data, aborted, nil
}
