package fetch

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/strata-log/strata/hotlog"
)

// ColdPartition is a Partition whose older offsets live in the object
// store. Reads of those offsets may take a bucket round trip, so
// Fetch starts them in the background and never holds hot partitions of
// the same request back for them (see the package doc, "Cold reads").
type ColdPartition interface {
	Partition
	// IsCold reports whether a read at offset is served from the bucket
	// (it lies below the local log start).
	IsCold(offset int64) bool
	// ReadCold is Read for a cold offset, with the same result contract
	// (whole batches, verbatim, KIP-74). It may block on the bucket and
	// must return when ctx ends.
	ReadCold(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, error)
}

// ColdTxnPartition is a ColdPartition that knows the aborted transactions
// of its cold offsets. A read_committed fetch uses ReadColdCommitted, in
// the background like ReadCold, so the bucket never holds a pass up.
type ColdTxnPartition interface {
	ColdPartition
	// ReadColdCommitted is ReadCold that also returns the aborted
	// transactions overlapping the offsets from offset up to upTo (more is
	// allowed: the pass filters them to the records returned).
	ReadColdCommitted(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, []hotlog.AbortedTxn, error)
}

// ColdCachedPartition is a ColdPartition that can answer a cold read from
// memory, without waiting on the bucket. A read_uncommitted fetch tries it
// first, in line: a hit is ready before the first pass.
type ColdCachedPartition interface {
	ColdPartition
	// ReadColdCached is ReadCold served from a cache alone; false when
	// the bytes are not all there (ReadCold then fetches them).
	ReadColdCached(ctx context.Context, offset int64, maxBytes int, upTo int64) ([]byte, bool)
}

// errColdPending: a cold read has not finished; the pass returns nothing
// for that partition. Never leaves the package.
var errColdPending = errors.New("fetch: cold read pending")

// readFunc is Partition.Read's shape.
type readFunc func(offset int64, maxBytes int, upTo int64) ([]byte, error)

// coldRead is one cold read running for one fetch. The goroutine that runs
// it writes records and err, then closes done; readers look only after done.
type coldRead struct {
	done chan struct{}
	// missedCache: the partition's cache (ColdCachedPartition) was asked
	// first and lacked the bytes, so the read waits on the bucket. Set
	// before the goroutine starts.
	missedCache bool
	records     []byte
	aborted     []hotlog.AbortedTxn
	err         error
}

// abortedTxns is an abortedFunc over the finished read's aborts (none
// while it is pending: the pass then returns no records either).
func (c *coldRead) abortedTxns(from, to int64) []hotlog.AbortedTxn {
	select {
	case <-c.done:
		got, _ := hotlog.CollectAbortedTxns(c.aborted, from, to)
		return got
	default:
		return nil
	}
}

// result is a readFunc over the finished (or pending) read. The cold read's
// own limits were the partition's at start; readPartition trims them to the
// pass's budget.
func (c *coldRead) result(int64, int, int64) ([]byte, error) {
	select {
	case <-c.done:
		return c.records, c.err
	default:
		return nil, errColdPending
	}
}

// startCold starts a background read for every ColdPartition whose fetch
// offset is cold and readable; nil entries are read in the passes. The reads
// end with ctx (Fetch cancels it when it answers).
func (f *Fetcher) startCold(ctx context.Context, req Request) []*coldRead {
	var reads []*coldRead
	for i, pr := range req.Partitions {
		cp, ok := pr.Partition.(ColdPartition)
		if !ok || !cp.IsCold(pr.Offset) {
			continue
		}
		pos := cp.Positions()
		upTo := visibleEnd(pos, req.Isolation)
		if pr.Offset < pos.LogStart || pr.Offset >= upTo {
			continue // out of range or not visible: the pass answers it
		}
		if reads == nil {
			reads = make([]*coldRead, len(req.Partitions))
		}
		r := &coldRead{done: make(chan struct{})}
		reads[i] = r
		budget := max(min(pr.MaxBytes, req.MaxBytes), 1)
		offset := pr.Offset
		ctp, committed := cp.(ColdTxnPartition)
		committed = committed && req.Isolation == ReadCommitted
		if cc, ok := cp.(ColdCachedPartition); ok && !committed {
			if data, hit := cc.ReadColdCached(ctx, offset, budget, upTo); hit {
				r.records = data
				close(r.done)
				continue
			}
			r.missedCache = true
		}
		go func() {
			defer close(r.done)
			if committed {
				r.records, r.aborted, r.err = ctp.ReadColdCommitted(ctx, offset, budget, upTo)
				return
			}
			r.records, r.err = cp.ReadCold(ctx, offset, budget, upTo)
		}()
	}
	return reads
}

// coldGrace waits up to grace for every cold read to finish (cache hits
// take microseconds; misses outlast it and are picked up by later passes).
func (f *Fetcher) coldGrace(ctx context.Context, reads []*coldRead, grace time.Duration) {
	if grace <= 0 || reads == nil {
		return
	}
	timer := time.NewTimer(grace)
	defer timer.Stop()
	for _, r := range reads {
		if r == nil {
			continue
		}
		select {
		case <-r.done:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// hotFirst says the first pass may answer without the cold grace: every
// pending read missed its partition's cache. Such a read waits on the
// bucket, which the grace would not outlast; its GETs land in the cache
// for the next fetch, whose cached fast path then finds them. A read
// without a fast path (read_committed, or a partition with no cache) may
// be a hit that merely has not run yet: the grace is what keeps it from
// being outrun by hot data forever.
func hotFirst(reads []*coldRead) bool {
	for r := range pending(reads) {
		if !r.missedCache {
			return false
		}
	}
	return true
}

// pendingChannels returns the done channels of cold reads not finished yet.
func pendingChannels(reads []*coldRead) []<-chan struct{} {
	var chans []<-chan struct{}
	for r := range pending(reads) {
		chans = append(chans, r.done)
	}
	return chans
}

// pending yields the cold reads (non-nil entries) not finished yet.
func pending(reads []*coldRead) iter.Seq[*coldRead] {
	return func(yield func(*coldRead) bool) {
		for _, r := range reads {
			if r == nil {
				continue
			}
			select {
			case <-r.done:
			default:
				if !yield(r) {
					return
				}
			}
		}
	}
}
