package broker

// Cold path (issue 4): offsets below a partition's local log start are
// served from the bucket through one tier.ColdReader per broker. The cold
// path reads only objects named by the manifest; it never opens a hot
// segment file, so a catch-up reader cannot evict the hot tail's pages.

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/quota"
	"github.com/strata-log/strata/tier"
)

// maxColdHops bounds how many manifest entries one cold read walks past
// when an object holds nothing at or after the offset (compaction gaps).
const maxColdHops = 4

// initColdReader creates the cold reader when tiering is on.
func (b *Broker) initColdReader() error {
	if b.objects == nil {
		return nil
	}
	cfg := b.cfg.Cold
	if cfg.Logger == nil {
		cfg.Logger = b.log.With("component", "cold")
	}
	cold, err := tier.NewColdReader(b.objects, cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	b.cold = cold
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
func (b *Broker) fetchPartition(p *partition, reads *pooledReads) fetch.Partition {
	if b.cold == nil {
		return fetchSource{p, reads}
	}
	return coldSource{fetchSource: fetchSource{p, reads}, cold: b.cold, quotas: &b.quotas,
		clientBudget: float64(b.cfg.Cold.ClientBytesPerSecond)}
}

// coldSource is a fetchSource whose offsets below the local log start come
// from the bucket.
type coldSource struct {
	fetchSource
	cold *tier.ColdReader
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

var _ fetch.ColdPartition = coldSource{}

// IsCold: below the hot log's start. Offsets the hot log holds are always
// read locally, even when they are also tiered.
func (s coldSource) IsCold(offset int64) bool { return offset < s.p.localLogStartOffset() }

// ReadCold reads from the manifest entry holding offset (or the first one
// above it). Errors other than out-of-range and cancellation wrap
// hotlog.ErrStorage, which the broker answers KAFKA_STORAGE_ERROR: the
// client retries, and damaged bytes are never served.
func (s coldSource) ReadCold(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	return s.readColdBudgeted(ctx, func() ([]byte, error) { return s.readCold(ctx, offset, maxBytes, upTo) })
}

func (s coldSource) readCold(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	p := s.p
	for hop := 0; hop < maxColdHops; hop++ {
		e, ok := p.manifest.Find(p.topicID, p.index, offset)
		if !ok || e.BaseOffset >= p.localLogStartOffset() {
			// Not tiered (or already local again): the hot log answers,
			// out of range if the offset is gone.
			return p.log.Read(max(offset, p.localLogStartOffset()), maxBytes, upTo)
		}
		req := tier.ColdRead{Object: coldObject(e), Offset: offset, MaxBytes: maxBytes, UpTo: upTo}
		if next, ok := p.manifest.Find(p.topicID, p.index, e.LastOffset+1); ok {
			obj := coldObject(next)
			req.Next = &obj
		}
		data, err := s.cold.Read(ctx, req)
		if errors.Is(err, tier.ErrObjectGone) {
			// Tiered cleaning replaced the object (or retention dropped
			// it) after the lookup: look the offset up again.
			if err := sleepCtx(ctx, objectGoneBackoff); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, coldError(err)
		}
		if len(data) > 0 || e.LastOffset+1 >= upTo {
			return data, nil
		}
		offset = e.LastOffset + 1 // nothing left in this object: try the next
	}
	return []byte{}, nil
}

// maxAbortedHops bounds how many objects after the one read a
// read_committed cold read consults for abort markers (indexes are cached;
// each costs at most one ranged GET). An abort whose marker lies further
// on is missed: its records would be delivered as committed. Kafka walks
// every later segment; transactions span minutes, objects far more.
const maxAbortedHops = 8

var _ fetch.ColdTxnPartition = coldSource{}

// ReadColdCommitted is ReadCold plus the aborted transactions overlapping
// the batches returned, from the objects' aborted-transaction sections and
// then the local log (fetch.ColdTxnPartition).
func (s coldSource) ReadColdCommitted(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, []hotlog.AbortedTxn, error) {
	data, err := s.ReadCold(ctx, offset, maxBytes, upTo)
	if err != nil || len(data) == 0 {
		return data, nil, err
	}
	end := offset
	for rest := data; len(rest) > 0; {
		h, err := hotlog.ParseBatchHeader(rest)
		if err != nil {
			break
		}
		end, rest = max(end, h.LastOffset()+1), rest[h.Size():]
	}
	aborted, err := s.coldAborted(ctx, offset, end)
	if err != nil {
		return nil, nil, err
	}
	return data, aborted, nil
}

// coldAborted collects the aborts overlapping [from, to): the sections of
// the tiered objects from the one holding from on (stopping, as Kafka, at
// an entry whose last stable offset reaches to), then the local log's
// aborts whose marker lies after the last object consulted.
func (s coldSource) coldAborted(ctx context.Context, from, to int64) ([]hotlog.AbortedTxn, error) {
	p := s.p
	var out []hotlog.AbortedTxn
	covered := from // aborts with a marker below covered were collected
	e, ok := p.manifest.Find(p.topicID, p.index, from)
	for hop := 0; ok && hop < maxAbortedHops && e.BaseOffset < p.localLogStartOffset(); hop++ {
		x, err := s.cold.Index(ctx, coldObject(e))
		if errors.Is(err, tier.ErrObjectGone) {
			if err := sleepCtx(ctx, objectGoneBackoff); err != nil {
				return nil, err
			}
			e, ok = p.manifest.Find(p.topicID, p.index, covered)
			continue
		}
		if err != nil {
			return nil, coldError(err)
		}
		got, complete := hotlog.CollectAbortedTxns(hotlogAborted(x.Aborted), from, to)
		out = append(out, got...)
		if complete {
			return out, nil
		}
		covered = e.LastOffset + 1
		e, ok = p.manifest.Find(p.topicID, p.index, covered)
	}
	for _, a := range p.log.AbortedTxns(from, to) {
		if a.LastOffset >= covered {
			out = append(out, a)
		}
	}
	return out, nil
}

// hotlogAborted and tierAborted convert between the two packages' copies
// of Kafka's aborted-transaction entry.
func hotlogAborted(in []tier.AbortedTxn) []hotlog.AbortedTxn {
	out := make([]hotlog.AbortedTxn, len(in))
	for i, a := range in {
		out[i] = hotlog.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, LastStableOffset: a.LastStableOffset}
	}
	return out
}

func tierAborted(in []hotlog.AbortedTxn) []tier.AbortedTxn {
	out := make([]tier.AbortedTxn, len(in))
	for i, a := range in {
		out[i] = tier.AbortedTxn{ProducerID: a.ProducerID, FirstOffset: a.FirstOffset, LastOffset: a.LastOffset, LastStableOffset: a.LastStableOffset}
	}
	return out
}

func coldObject(e metadata.TierEntry) tier.ColdObject {
	return tier.ColdObject{Key: e.Key, Size: e.Size}
}

// coldError maps a cold-reader failure for dataPathErrorCode.
func coldError(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w: cold read: %w", hotlog.ErrStorage, err)
}

// coldEntries are the partition's manifest entries that start below the
// local log start: the part of the log only (or also) in the bucket that
// the hot log cannot answer for.
func (p *partition) coldEntries() []metadata.TierEntry {
	local := p.localLogStartOffset()
	entries := p.manifest.Segments(p.topicID, p.index)
	n := 0
	for n < len(entries) && entries[n].BaseOffset < local {
		n++
	}
	return entries[:n]
}

// coldOffsetForTimestamp finds the first record with timestamp >= ts at or
// after from in the objects below the local log start; ok is false if none
// has one (the hot log is searched next).
func (b *Broker) coldOffsetForTimestamp(ctx context.Context, p *partition, ts, from int64) (tier.OffsetTime, bool, error) {
	if b.cold == nil {
		return tier.OffsetTime{}, false, nil
	}
	for _, e := range p.coldEntries() {
		if e.MaxTimestamp < ts || e.LastOffset < from {
			continue
		}
		res, ok, err := b.cold.OffsetForTimestamp(ctx, coldObject(e), ts, max(from, e.BaseOffset))
		if err != nil || ok {
			return res, ok, coldErrorOrNil(err)
		}
	}
	return tier.OffsetTime{}, false, nil
}

func coldErrorOrNil(err error) error {
	if err == nil {
		return nil
	}
	return coldError(err)
}

// coldMaxTimestamp returns the tiered record with the largest timestamp
// among objects below the local log start (the earliest on ties).
func (b *Broker) coldMaxTimestamp(ctx context.Context, p *partition) (tier.OffsetTime, bool, error) {
	if b.cold == nil {
		return tier.OffsetTime{}, false, nil
	}
	var best *metadata.TierEntry
	entries := p.coldEntries()
	for i := range entries {
		if best == nil || entries[i].MaxTimestamp > best.MaxTimestamp {
			best = &entries[i]
		}
	}
	if best == nil {
		return tier.OffsetTime{}, false, nil
	}
	x, err := b.cold.Index(ctx, coldObject(*best))
	if err != nil {
		return tier.OffsetTime{}, false, coldError(err)
	}
	return tier.OffsetTime{Offset: x.Footer.MaxTimestampOffset, Timestamp: x.Footer.MaxTimestamp}, true, nil
}

// coldEpochEndOffset answers OffsetForLeaderEpoch for an epoch that ended
// in the bucket. ok is false when the answer is the hot log's: the
// requested epoch is at least the last tiered one (epochs grow with
// offsets, so the hot log knows every later epoch), or nothing is tiered.
//
// Otherwise the answer lies in the first object whose last epoch
// (TierEntry.LeaderEpoch) is above the requested one: its epoch ranges give
// the largest epoch <= requested and the start of the next one. When all
// of its epochs are above, the previous object's last epoch ends at this
// object's base offset (Kafka's floor/higher-entry rule, KIP-279).
func (b *Broker) coldEpochEndOffset(ctx context.Context, p *partition, requested int32) (int32, int64, bool, error) {
	entries := p.coldEntries()
	if b.cold == nil || len(entries) == 0 {
		return 0, 0, false, nil
	}
	j := 0
	for j < len(entries) && entries[j].LeaderEpoch <= requested {
		j++
	}
	if j == len(entries) {
		return 0, 0, false, nil
	}
	x, err := b.cold.Index(ctx, coldObject(entries[j]))
	if err != nil {
		return 0, 0, false, coldError(err)
	}
	for k := len(x.Epochs) - 1; k >= 0; k-- {
		if x.Epochs[k].Epoch <= requested && k+1 < len(x.Epochs) {
			return x.Epochs[k].Epoch, x.Epochs[k+1].StartOffset, true, nil
		}
	}
	if j > 0 {
		return entries[j-1].LeaderEpoch, entries[j].BaseOffset, true, nil
	}
	return requested, entries[0].BaseOffset, true, nil
}

// objectGoneBackoff is the pause before a cold read looks an offset up
// again after finding its object deleted (the manifest's watch may lag
// the swap that replaced it by a moment).
const objectGoneBackoff = 50 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
