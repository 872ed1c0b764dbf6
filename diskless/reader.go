package diskless

import (
	"container/list"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/strata-log/strata/fetch"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier/objstore"
)

// DefaultCacheBytes bounds the shared-object cache of a Reader.
const DefaultCacheBytes = 256 << 20

// readTimeout bounds one Read (its GETs included): fetch.Partition's Read
// has no context.
const readTimeout = 10 * time.Second

// maxRunsPerRead bounds the runs one Read walks.
const maxRunsPerRead = 64

// Reader serves reads of diskless partitions from the Index's coordinates
// and whole shared objects, cached so that one GET feeds every partition in
// an object.
type Reader struct {
	ix      *Index
	bucket  objstore.ObjectStore
	cluster string
	stats   *Stats
	cache   *objectCache
	merged  Merged
}

// Merged reads offsets the merge moved into ordinary segment objects (the
// broker's cold reader over the tier manifest).
type Merged interface {
	ReadMerged(ctx context.Context, tp metadata.TierPartition, offset int64, maxBytes int, upTo int64) ([]byte, error)
}

// NewReader returns a reader over ix; cacheBytes <= 0 means
// DefaultCacheBytes.
func NewReader(ix *Index, bucket objstore.ObjectStore, cluster string, cacheBytes int64, stats *Stats) *Reader {
	if cacheBytes <= 0 {
		cacheBytes = DefaultCacheBytes
	}
	return &Reader{ix: ix, bucket: bucket, cluster: cluster, stats: stats, cache: newObjectCache(cacheBytes)}
}

// SetMerged gives the reader its way to merged offsets; call before use.
func (r *Reader) SetMerged(m Merged) { r.merged = m }

// Partition is tp as package fetch reads it.
func (r *Reader) Partition(tp metadata.TierPartition) fetch.Partition { return fetchPartition{r, tp} }

type fetchPartition struct {
	r  *Reader
	tp metadata.TierPartition
}

func (p fetchPartition) Changed() <-chan struct{} {
	_, _, ch := p.r.ix.Positions(p.tp)
	return ch
}

// Positions: every committed offset is stable and visible (a commit is the
// acknowledgement), so HW, LSO and LEO are all the head's next offset.
func (p fetchPartition) Positions() fetch.Positions {
	start, next, _ := p.r.ix.Positions(p.tp)
	return fetch.Positions{LogStart: start, LastStable: next, HighWatermark: next, LogEnd: next}
}

func (p fetchPartition) Read(offset int64, maxBytes int, upTo int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	return p.r.Read(ctx, p.tp, offset, maxBytes, upTo)
}

// Read returns whole batches, base offsets patched, from the batch holding
// offset on and ending before upTo, at most maxBytes except that the first
// batch is returned even if larger (KIP-74). An offset outside [start, next]
// is hotlog.ErrOffsetOutOfRange; at next the answer is empty. Offsets below
// the first run were merged: Merged reads them, up to that run.
func (r *Reader) Read(ctx context.Context, tp metadata.TierPartition, offset int64, maxBytes int, upTo int64) ([]byte, error) {
	start, next, _ := r.ix.Positions(tp)
	if offset < start || offset > next {
		return nil, fmt.Errorf("%w: offset %d outside [%d, %d]", hotlog.ErrOffsetOutOfRange, offset, start, next)
	}
	upTo = min(upTo, next)
	if offset >= upTo {
		return nil, nil
	}
	if first, ok := r.ix.firstRunBase(tp); !ok || offset < first {
		if !ok {
			first = upTo
		}
		if r.merged == nil {
			return nil, fmt.Errorf("%w: offset %d of %v was merged and no merged reader is set", hotlog.ErrOffsetOutOfRange, offset, tp)
		}
		return r.merged.ReadMerged(ctx, tp, offset, maxBytes, min(upTo, first))
	}
	runs := r.ix.runsFrom(tp, offset, maxRunsPerRead)
	if len(runs) == 0 {
		return nil, fmt.Errorf("%w: no run holds offset %d of %v", hotlog.ErrOffsetOutOfRange, offset, tp)
	}
	var out []byte
	for ri, run := range runs {
		if ri > 0 && run.base != runs[ri-1].end {
			break // a gap (a run not yet seen): stop at what is contiguous
		}
		object, err := r.object(ctx, run.run)
		if err != nil {
			return out, err
		}
		base := run.base
		for _, b := range run.run.Batches {
			last := base + b[2] - 1
			if base >= upTo {
				return out, nil
			}
			if last >= offset {
				if len(out) > 0 && len(out)+int(b[1]) > maxBytes {
					return out, nil
				}
				ref := BatchRef{TopicPartition: TopicPartition(tp), Position: b[0], Length: int32(b[1]), Records: int32(b[2]), CRC: uint32(b[3])}
				batch, err := ReadBatch(object, ref)
				if err != nil {
					return out, fmt.Errorf("object %s: %w", run.run.Object, err)
				}
				out = AppendPatched(out, batch, base)
			}
			base = last + 1
		}
	}
	return out, nil
}

// object returns the whole shared object, from the cache or one GET shared
// by concurrent readers.
func (r *Reader) object(ctx context.Context, run Run) ([]byte, error) {
	if b, ok := r.cache.get(run.Object); ok {
		r.stats.cacheHits.Add(1)
		return b, nil
	}
	return r.cache.load(ctx, run.Object, func(ctx context.Context) ([]byte, error) {
		r.stats.gets.Add(1)
		rc, err := r.bucket.ReadRange(ctx, ObjectKey(r.cluster, run.Object), 0, run.Size)
		if err != nil {
			r.stats.getErrors.Add(1)
			return nil, err
		}
		defer rc.Close()
		b := make([]byte, run.Size) // bounded by decodeRun
		if _, err := io.ReadFull(rc, b); err != nil {
			r.stats.getErrors.Add(1)
			return nil, err
		}
		r.stats.getBytes.Add(run.Size)
		return b, nil
	})
}

// objectCache is an LRU of whole objects bounded by bytes, with one load
// in flight per object.
type objectCache struct {
	limit int64

	mu       sync.Mutex
	size     int64                    // guarded by mu
	order    *list.List               // of *cachedObject, front = newest
	byID     map[string]*list.Element // guarded by mu
	inflight map[string]*objectLoad   // guarded by mu
}

type cachedObject struct {
	id    string
	bytes []byte
}

type objectLoad struct {
	done  chan struct{}
	bytes []byte
	err   error
}

func newObjectCache(limit int64) *objectCache {
	return &objectCache{limit: limit, order: list.New(), byID: map[string]*list.Element{}, inflight: map[string]*objectLoad{}}
}

func (c *objectCache) get(id string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byID[id]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cachedObject).bytes, true
	}
	return nil, false
}

func (c *objectCache) load(ctx context.Context, id string, fetchObject func(context.Context) ([]byte, error)) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.byID[id]; ok {
		c.mu.Unlock()
		return e.Value.(*cachedObject).bytes, nil
	}
	l, waiting := c.inflight[id]
	if !waiting {
		l = &objectLoad{done: make(chan struct{})}
		c.inflight[id] = l
	}
	c.mu.Unlock()
	if !waiting {
		// The load outlives a cancelled first reader: others wait on it.
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
		l.bytes, l.err = fetchObject(lctx)
		cancel()
		c.finish(id, l)
	}
	select {
	case <-l.done:
		return l.bytes, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *objectCache) finish(id string, l *objectLoad) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.inflight, id)
	close(l.done)
	if l.err != nil || int64(len(l.bytes)) > c.limit {
		return
	}
	c.byID[id] = c.order.PushFront(&cachedObject{id: id, bytes: l.bytes})
	c.size += int64(len(l.bytes))
	for c.size > c.limit {
		e := c.order.Back()
		o := e.Value.(*cachedObject)
		c.order.Remove(e)
		delete(c.byID, o.id)
		c.size -= int64(len(o.bytes))
	}
}
