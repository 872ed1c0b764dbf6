package tier

// Cold reader: serves Fetch and look-ups below the local log start from
// segment objects in the bucket.
//
// # Data flow
//
//	Read(obj, offset) ─► object index (LRU, one GET of the tail per object)
//	                  ─► OffsetSpan → batches position
//	                  ─► blocks: aligned FetchSize ranges of the batches section
//	                        cache hit  → bytes in memory
//	                        in flight  → wait for the same GET (shared)
//	                        miss       → new flight: worker slot, quota, GET,
//	                                     every CRC chunk checked, then cached
//	                  ─► whole batches cut verbatim, KIP-74 limits: a view
//	                     of the block when they lie in one (no copy), else
//	                     a copy assembled from the blocks walked
//	                  ─► read-ahead: the next ReadAhead blocks of a
//	                     sequential reader start in the background
//
// A block is [i*FetchSize, min((i+1)*FetchSize, batches length)) of the
// batches section; FetchSize is a multiple of the object's chunk size, so a
// block is whole CRC chunks and every byte served was checked against the
// footer's chunk CRCs. A block failing its CRC is never cached nor served:
// the read fails with ErrCorruptObject and Stats.CorruptBlocks counts it.
//
// Flights run under the reader's own lifetime, not the caller's: a fetch
// that gives up (max wait passed) still leaves the block in the cache for
// its next try. Blocks live in process memory ([]byte from the GET body),
// never in files, so cold reads do not touch the page cache nor any hot
// segment file. Answers may be views of cached blocks (read-only): an
// evicted block stays in memory until the last answer cut from it is
// dropped, so the memory of the cold path is CacheBytes plus the answers
// still being sent.
//
// Lock order: ColdReader.mu only; it is never held across I/O or while
// waiting on a flight, the quota or a worker slot.

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/tier/objstore"
)

// Cold reader defaults.
const (
	DefaultColdFetchSize   = 8 << 20
	DefaultColdCacheBytes  = 256 << 20
	DefaultColdIndexCache  = 1024
	DefaultColdWorkers     = 8
	DefaultColdReadAhead   = 3
	DefaultColdGetAttempts = 3
)

// Sentinel errors of the cold reader.
var (
	// ErrInvalidColdConfig is returned by ColdConfig.Validate.
	ErrInvalidColdConfig = errors.New("tier: invalid cold reader config")
	// ErrColdReaderClosed: a read after Close.
	ErrColdReaderClosed = errors.New("tier: cold reader closed")
)

// ColdConfig configures a ColdReader. Zero fields take the defaults.
type ColdConfig struct {
	// FetchSize is the size of one aligned ranged GET, in bytes; rounded
	// down to a multiple of each object's chunk size (at least one chunk).
	// Default 8 MiB.
	FetchSize int64
	// CacheBytes bounds the memory of fetched blocks: the cold cache (LRU)
	// and the blocks in flight or held by readers, all in an arena outside
	// the Go heap (doc.go, "Cold cache memory"). At least 2*FetchSize.
	// Default 256 MiB.
	CacheBytes int64
	// IndexCacheEntries bounds the cached object indexes (footer + index
	// sections, about 0.03% of an object each). Default 1024.
	IndexCacheEntries int
	// Workers bounds the GETs in flight (the cold path's own worker pool,
	// separate from the hot path). Default 8.
	Workers int
	// ReadAhead is how many blocks after the one being read are fetched in
	// the background for a sequential reader. 0 means the default (3); -1
	// disables read-ahead.
	ReadAhead int
	// BytesPerSecond caps the GET byte rate of the cold path (token bucket,
	// burst one block). 0 means unlimited.
	BytesPerSecond int64
	// ClientBytesPerSecond is the cold-read budget of each client (user
	// and client id): bytes served from the bucket to one client beyond
	// this rate throttle that client's cold reads, so one backfill cannot
	// take the bandwidth of all. Enforced by the broker (broker/quotas.go),
	// not by the reader. 0 means off.
	ClientBytesPerSecond int64
	// Governor adapts the cold byte rate to the hot path's health (on by
	// default; a negative Governor.Target turns it off).
	Governor GovernorConfig
	// GetAttempts is how many times a block GET is tried when it fails with
	// a transient error (503, timeout, truncated body). Default 3.
	GetAttempts int
	// Logger receives corruption warnings. Default slog.Default().
	Logger *slog.Logger
}

// Validate rejects nonsense; zero values mean "default".
func (c ColdConfig) Validate() error {
	switch {
	case c.FetchSize < 0, c.CacheBytes < 0, c.IndexCacheEntries < 0, c.Workers < 0,
		c.ReadAhead < -1, c.BytesPerSecond < 0, c.GetAttempts < 0, c.ClientBytesPerSecond < 0:
		return fmt.Errorf("%w: negative value in %+v", ErrInvalidColdConfig, c)
	case c.FetchSize > 0 && c.FetchSize < minChunkSize:
		return fmt.Errorf("%w: FetchSize %d below %d", ErrInvalidColdConfig, c.FetchSize, minChunkSize)
	}
	d := c.withDefaults()
	if d.CacheBytes < 2*d.FetchSize {
		return fmt.Errorf("%w: CacheBytes %d below 2*FetchSize %d", ErrInvalidColdConfig, d.CacheBytes, d.FetchSize)
	}
	return nil
}

func (c ColdConfig) withDefaults() ColdConfig {
	if c.FetchSize == 0 {
		c.FetchSize = DefaultColdFetchSize
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = DefaultColdCacheBytes
	}
	if c.IndexCacheEntries == 0 {
		c.IndexCacheEntries = DefaultColdIndexCache
	}
	if c.Workers == 0 {
		c.Workers = DefaultColdWorkers
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = DefaultColdReadAhead
	}
	if c.ReadAhead < 0 {
		c.ReadAhead = 0
	}
	if c.GetAttempts == 0 {
		c.GetAttempts = DefaultColdGetAttempts
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ColdObject names one segment object, as a manifest entry does.
type ColdObject struct {
	Key  string
	Size int64 // object size; < 0 to Stat it
}

// ColdStats is a snapshot of the cold reader's counters (cmd maps them to
// Prometheus). Counts are since NewColdReader.
type ColdStats struct {
	BlockHits       int64 // block found in the cache
	BlockMisses     int64 // block fetched (or joined in flight)
	SharedGets      int64 // misses that joined a GET already in flight
	Gets            int64 // block GETs issued (attempts included)
	GetBytes        int64 // bytes received by block GETs
	GetErrors       int64 // failed block GETs (attempts included)
	ReadAheadBlocks int64 // blocks fetched by read-ahead
	CorruptBlocks   int64 // blocks (or object indexes) that failed a CRC: never served
	IndexHits       int64
	IndexMisses     int64
	CachedBytes     int64 // bytes in the cold cache now
	QuotaWait       time.Duration
	// Governor is the cold-read governor's state.
	Governor GovernorStats
}

// coldStats are the live counters.
type coldStats struct {
	blockHits, blockMisses, sharedGets, gets, getBytes, getErrors atomic.Int64
	readAhead, corrupt, indexHits, indexMisses, quotaWaitNanos    atomic.Int64
}

// blockKey identifies one block of one object.
type blockKey struct {
	key   string
	block int64
}

// flight is one GET in progress; done closes when block, index or err is
// set.
type flight struct {
	done  chan struct{}
	block *coldBlock   // a block: each waiter owns one reference
	index *ObjectIndex // an object index
	err   error
	// waiters counts the callers waiting for a block (read-ahead does not
	// wait); finished is set when the GET ends. Both guarded by
	// ColdReader.mu: a waiter that gives up before finished takes itself
	// off waiters, after it releases its reference.
	waiters  int
	finished bool
}

// coldBlock is one block whose chunk CRCs all matched. Its memory is an
// arena slot, or heap memory when the arena had none to spare (such a
// block is served to its waiters and not cached).
//
// refs counts the holders: the cache while the block is cached, and each
// reader holding a view of data. The slot returns to the arena when the
// last one lets go, so no view outlives the bytes it shows. Guarded by
// ColdReader.mu.
type coldBlock struct {
	data    []byte
	inArena bool
	cached  bool
	refs    int
}

// cacheEntry is one cached block or object index.
type cacheEntry struct {
	key   any // blockKey or string (object key)
	block *coldBlock
	index *ObjectIndex
}

// ColdReader reads segment objects through a bounded in-memory cache. Safe
// for concurrent use.
type ColdReader struct {
	store   ObjectStore
	cfg     ColdConfig
	workers chan struct{} // one token per GET in flight
	quota   *byteQuota    // nil when unlimited
	gov     *governor     // nil when the governor is off
	stats   coldStats

	lifetime context.Context // flights run under it, not the caller's ctx
	stop     context.CancelFunc
	wg       sync.WaitGroup // flights and read-aheads

	mu struct {
		sync.Mutex
		blocks      *list.List                 // LRU of *cacheEntry (blocks), front = newest; guarded by mu
		blockByKey  map[blockKey]*list.Element // guarded by mu
		cachedBytes int64                      // sum of cached blocks' slot sizes; guarded by mu
		arena       *blockArena                // memory of all blocks, <= cfg.CacheBytes; guarded by mu
		indexes     *list.List                 // LRU of *cacheEntry (indexes); guarded by mu
		indexByKey  map[string]*list.Element   // guarded by mu
		flights     map[blockKey]*flight       // block GETs in progress; guarded by mu
		idxFlights  map[string]*flight         // index reads in progress; guarded by mu
		lastBlock   map[string]int64           // per object, the last block a read ended in; guarded by mu
		closed      bool                       // set by Close: no new flights (wg.Add) after it; guarded by mu
	}
}

// NewColdReader returns a cold reader over store. Close stops it.
func NewColdReader(store ObjectStore, cfg ColdConfig) (*ColdReader, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &ColdReader{store: store, cfg: cfg, workers: make(chan struct{}, cfg.Workers)}
	if cfg.BytesPerSecond > 0 {
		c.quota = newByteQuota(cfg.BytesPerSecond, cfg.FetchSize, time.Now)
	}
	c.lifetime, c.stop = context.WithCancel(context.Background())
	if cfg.Governor.Enabled() {
		if sampler, ok := newRunDelaySampler(); ok {
			c.gov = newGovernor(cfg.Governor, sampler, cfg.FetchSize, time.Now)
			c.wg.Add(1)
			go c.governLoop()
		} else {
			cfg.Logger.Warn("cold-read governor off: this kernel does not report threads' run-queue wait (/proc/self/task/*/schedstat)")
		}
	}
	c.mu.blocks, c.mu.indexes = list.New(), list.New()
	c.mu.arena = newBlockArena(cfg.CacheBytes)
	c.mu.blockByKey = map[blockKey]*list.Element{}
	c.mu.indexByKey = map[string]*list.Element{}
	c.mu.flights = map[blockKey]*flight{}
	c.mu.idxFlights = map[string]*flight{}
	c.mu.lastBlock = map[string]int64{}
	return c, nil
}

// Close cancels flights in progress and waits for them. Reads after Close
// fail with ErrColdReaderClosed.
func (c *ColdReader) Close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
	c.mu.Lock()
	for c.mu.blocks.Len() > 0 {
		c.removeBlockLocked(c.mu.blocks.Back())
	}
	c.mu.arena.close()
	c.mu.Unlock()
}

// Stats returns a snapshot of the counters.
func (c *ColdReader) Stats() ColdStats {
	c.mu.Lock()
	cached := c.mu.cachedBytes
	c.mu.Unlock()
	s := &c.stats
	return ColdStats{
		BlockHits: s.blockHits.Load(), BlockMisses: s.blockMisses.Load(), SharedGets: s.sharedGets.Load(),
		Gets: s.gets.Load(), GetBytes: s.getBytes.Load(), GetErrors: s.getErrors.Load(),
		ReadAheadBlocks: s.readAhead.Load(), CorruptBlocks: s.corrupt.Load(),
		IndexHits: s.indexHits.Load(), IndexMisses: s.indexMisses.Load(),
		CachedBytes: cached, QuotaWait: time.Duration(s.quotaWaitNanos.Load()), Governor: c.governorStats(),
	}
}

// blockSize is the block size for an object: FetchSize rounded down to a
// multiple of the object's chunk size, at least one chunk.
func (c *ColdReader) blockSize(x *ObjectIndex) int64 {
	chunk := int64(x.Footer.ChunkSize)
	return max(chunk, c.cfg.FetchSize/chunk*chunk)
}

// blockRange is the byte range of block i of the batches section.
func (c *ColdReader) blockRange(x *ObjectIndex, i int64) (offset, length int64) {
	size := c.blockSize(x)
	offset = i * size
	return offset, min(size, x.Footer.Sections[SectionBatches].Length-offset)
}

// numBlocks is the number of blocks of an object.
func (c *ColdReader) numBlocks(x *ObjectIndex) int64 {
	size := c.blockSize(x)
	return (x.Footer.Sections[SectionBatches].Length + size - 1) / size
}

// closedFlight is a finished flight failing with ErrColdReaderClosed.
func closedFlight() *flight {
	f := &flight{done: make(chan struct{}), err: ErrColdReaderClosed, finished: true}
	close(f.done)
	return f
}

// isCorrupt reports whether err says the object's bytes are damaged.
func isCorrupt(err error) bool { return errors.Is(err, ErrCorruptObject) }

// transient reports whether a failed GET may be retried.
func transient(err error) bool { return objstore.IsTransient(err) }
