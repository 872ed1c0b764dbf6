package tier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/strata-log/strata/bufpool"
	"github.com/strata-log/strata/recordbatch"
)

// ColdRead is one read of a segment object.
type ColdRead struct {
	Object ColdObject
	// Next is the object that follows Object in the partition, if known:
	// read-ahead that runs past Object's end continues into it.
	Next *ColdObject
	// Offset to read from: the batch holding it is the first returned (or
	// the first batch after it; an offset below the object starts at its
	// first batch).
	Offset int64
	// MaxBytes bounds the batches returned, except that the first batch is
	// returned whole even if larger (KIP-74).
	MaxBytes int
	// UpTo: no batch starting at or after it is returned (the HW).
	UpTo int64
	// CacheOnly answers from the cold cache alone: a read that would need
	// the bucket fails with ErrNotCached at once and starts no GET for it
	// (a hit still schedules read-ahead, as any read does).
	CacheOnly bool
	// Buffers, if not nil, owns the answer: it is copied into a pooled
	// buffer (bufpool.Get) handed to Buffers, and must not be read after
	// Buffers is released. Nil: the answer is the caller's to keep.
	Buffers *bufpool.Set
}

// ErrNotCached: a CacheOnly read needs bytes the cold cache does not hold.
var ErrNotCached = errors.New("tier: not in the cold cache")

// Read returns whole batches of r.Object, verbatim, as the hot log's Read
// does. Every byte returned passed its chunk CRC and each batch its own
// CRC; damage is ErrCorruptObject and nothing is returned. An offset past
// the object's last offset gives no batches and no error: a compacted
// object's manifest entry may claim offsets past its last batch (they were
// compacted away), and the caller continues with the next entry.
//
// An object that is gone (compaction swapped its entry out and deleted it
// after the grace period, or retention did) gives an error wrapping
// ErrObjectGone: the caller re-reads the manifest and retries with the
// entry that now holds the offset (RetryGone); it is never the client's
// error.
//
// The result is a copy (see ColdRead.Buffers for whose): the cache's
// blocks live in an arena outside the Go heap whose slots are reused once
// released, so no view of one leaves the reader.
func (c *ColdReader) Read(ctx context.Context, r ColdRead) ([]byte, error) {
	out, err := c.read(ctx, r)
	return out, c.gone(r.Object.Key, err)
}

// gone wraps a not-found error of key's object in ErrObjectGone (once) and
// forgets what the cache holds of it.
func (c *ColdReader) gone(key string, err error) error {
	if err == nil || errors.Is(err, ErrObjectGone) || !c.store.IsNotFound(err) {
		return err
	}
	c.Forget(key)
	return fmt.Errorf("%w: %s: %w", ErrObjectGone, key, err)
}

func (c *ColdReader) read(ctx context.Context, r ColdRead) ([]byte, error) {
	x, err := c.index(ctx, r.Object, r.CacheOnly)
	if err != nil {
		return nil, err
	}
	if r.Offset > x.Footer.LastOffset {
		return []byte{}, nil
	}
	offset := max(r.Offset, x.Footer.BaseOffset)
	start, _, err := x.OffsetSpan(offset)
	if err != nil {
		return nil, err
	}
	c.scheduleReadAhead(r, x, start/c.blockSize(x))
	cur := &coldCursor{c: c, ctx: ctx, obj: r.Object, x: x, pos: start, hold: true, cacheOnly: r.CacheOnly}
	defer cur.release()
	out, err := c.collect(cur, offset, max(r.MaxBytes, 1), r.UpTo, r.Buffers)
	if err != nil {
		return nil, err
	}
	c.noteEnd(r.Object.Key, cur.lastBlock)
	return out, nil
}

// collect cuts batches from cur under the Read limits: it walks the
// headers to find the range [from, to) of the batches section to return,
// then returns a copy of it (cur holds the blocks it walked, so none is
// fetched twice).
func (c *ColdReader) collect(cur *coldCursor, offset int64, maxBytes int, upTo int64, bufs *bufpool.Set) ([]byte, error) {
	batchesLen := cur.x.Footer.Sections[SectionBatches].Length
	from, to := int64(-1), int64(-1)
	for cur.pos < batchesLen {
		pos := cur.pos
		batch, h, err := cur.next()
		if err != nil {
			return nil, err
		}
		if h.LastOffset() < offset {
			continue
		}
		n := int64(len(batch))
		if h.BaseOffset >= upTo || (from >= 0 && to-from+n > int64(maxBytes)) {
			break
		}
		if from < 0 {
			from = pos
		}
		to = pos + n
		if to-from >= int64(maxBytes) {
			break
		}
	}
	if from < 0 {
		return []byte{}, nil
	}
	return cur.copyOut(from, to-from, bufs)
}

// OffsetForTimestamp finds the first record of obj at or after from with
// timestamp >= ts, using the object's time index and then its batches
// (through the cold cache). ok is false if the object has none.
func (c *ColdReader) OffsetForTimestamp(ctx context.Context, obj ColdObject, ts, from int64) (OffsetTime, bool, error) {
	res, found, err := c.offsetForTimestamp(ctx, obj, ts, from)
	return res, found, c.gone(obj.Key, err)
}

func (c *ColdReader) offsetForTimestamp(ctx context.Context, obj ColdObject, ts, from int64) (OffsetTime, bool, error) {
	x, err := c.Index(ctx, obj)
	if err != nil {
		return OffsetTime{}, false, err
	}
	start, ok := x.TimestampStart(ts)
	if !ok || from > x.Footer.LastOffset {
		return OffsetTime{}, false, nil
	}
	if from > x.Footer.BaseOffset {
		fromStart, _, err := x.OffsetSpan(from)
		if err != nil {
			return OffsetTime{}, false, err
		}
		start = max(start, fromStart)
	}
	cur := &coldCursor{c: c, ctx: ctx, obj: obj, x: x, pos: start}
	defer cur.release()
	for batchesLen := x.Footer.Sections[SectionBatches].Length; cur.pos < batchesLen; {
		batch, h, err := cur.next()
		if err != nil {
			return OffsetTime{}, false, err
		}
		if h.LastOffset() < from || h.MaxTimestamp < ts {
			continue
		}
		if res, found, err := searchBatch(batch, h, ts, from); found || err != nil {
			return res, found, err
		}
	}
	return OffsetTime{}, false, nil
}

// coldCursor walks the batches of one object through cached blocks. Owned
// by one goroutine.
type coldCursor struct {
	c         *ColdReader
	ctx       context.Context
	obj       ColdObject
	x         *ObjectIndex
	pos       int64 // position of the next batch in the batches section
	lastBlock int64 // last block read
	// hold keeps every block walked in held (a Read: a few blocks at most,
	// its answer is cut from them); otherwise only the last one is kept
	// (a walk over a whole object must not pin all of it).
	hold bool
	held []heldBlock
	// cacheOnly fails a block the cache lacks with ErrNotCached.
	cacheOnly bool
}

// heldBlock is a block a cursor keeps a reference to.
type heldBlock struct {
	index int64
	block *coldBlock
}

// next returns the batch at cur.pos (a view of a held block when it lies
// in one block: valid until the cursor moves past that block or is
// released; callers never modify it) and advances.
func (cur *coldCursor) next() ([]byte, recordbatch.Header, error) {
	remaining := cur.x.Footer.Sections[SectionBatches].Length - cur.pos
	prefix, err := cur.bytes(cur.pos, min(recordbatch.LengthPrefix, remaining))
	if err != nil {
		return nil, recordbatch.Header{}, err
	}
	if len(prefix) < recordbatch.LengthPrefix {
		return nil, recordbatch.Header{}, corruptf("%s: torn batch header at %d", cur.obj.Key, cur.pos)
	}
	length := int64(int32(binary.BigEndian.Uint32(prefix[8:])))
	if length < recordbatch.MinLength || length > remaining-recordbatch.LengthPrefix {
		return nil, recordbatch.Header{}, corruptf("%s: batch length %d at %d with %d bytes left", cur.obj.Key, length, cur.pos, remaining)
	}
	batch, err := cur.bytes(cur.pos, recordbatch.LengthPrefix+length)
	if err != nil {
		return nil, recordbatch.Header{}, err
	}
	// Every cached block passed its chunk CRCs (cold_cache.go), which cover
	// these bytes; only the framing is checked here.
	h, err := checkStoredBatchFrame(batch)
	if err != nil {
		return nil, h, fmt.Errorf("%w: %s at %d: %v", ErrCorruptObject, cur.obj.Key, cur.pos, err)
	}
	cur.pos += int64(len(batch))
	return batch, h, nil
}

// bytes returns n bytes of the batches section at pos: a view of one
// cached block, or a copy assembled from consecutive blocks.
func (cur *coldCursor) bytes(pos, n int64) ([]byte, error) {
	size := cur.c.blockSize(cur.x)
	first, last := pos/size, (pos+n-1)/size
	if n == 0 {
		return nil, nil
	}
	if first == last {
		data, err := cur.block(first)
		if err != nil {
			return nil, err
		}
		return data[pos-first*size : pos-first*size+n], nil
	}
	return cur.appendRange(make([]byte, 0, n), pos, n)
}

// appendRange appends n bytes of the batches section at pos to dst, block
// by block.
func (cur *coldCursor) appendRange(dst []byte, pos, n int64) ([]byte, error) {
	size := cur.c.blockSize(cur.x)
	for b := pos / size; b <= (pos+n-1)/size; b++ {
		data, err := cur.block(b)
		if err != nil {
			return dst, err
		}
		lo, hi := max(pos-b*size, 0), min(pos+n-b*size, int64(len(data)))
		dst = append(dst, data[lo:hi]...)
	}
	return dst, nil
}

// copyOut copies n bytes of the batches section at pos out of the blocks
// (the answer outlives the cursor's references): into a pooled buffer
// handed to bufs when bufs is not nil, else into a fresh one.
func (cur *coldCursor) copyOut(pos, n int64, bufs *bufpool.Set) ([]byte, error) {
	if bufs == nil {
		return cur.appendRange(make([]byte, 0, n), pos, n)
	}
	out, err := cur.appendRange(bufpool.Get(int(n)), pos, n)
	if err != nil {
		bufpool.Put(out)
		return nil, err
	}
	bufs.Add(out)
	return out, nil
}

// block returns block i, remembering the blocks held so that walking a
// block takes the cache lock (and counts a hit or miss) once.
func (cur *coldCursor) block(i int64) ([]byte, error) {
	for _, h := range cur.held {
		if h.index == i {
			cur.lastBlock = i
			return h.block.data, nil
		}
	}
	var b *coldBlock
	var err error
	if cur.cacheOnly {
		b, err = cur.c.cachedBlock(cur.obj, i)
	} else {
		b, err = cur.c.block(cur.ctx, cur.obj, cur.x, i)
	}
	if err != nil {
		return nil, err
	}
	if !cur.hold {
		cur.release()
	}
	cur.held = append(cur.held, heldBlock{index: i, block: b})
	if int64(len(b.data)) != cur.c.blockLen(cur.x, i) {
		return nil, corruptf("%s: block %d is %d bytes", cur.obj.Key, i, len(b.data))
	}
	cur.lastBlock = i
	return b.data, nil
}

// release lets go of every block the cursor holds; views from it are
// invalid after.
func (cur *coldCursor) release() {
	for _, h := range cur.held {
		cur.c.releaseBlocks(h.block)
	}
	cur.held = cur.held[:0]
}

func (c *ColdReader) blockLen(x *ObjectIndex, i int64) int64 {
	_, length := c.blockRange(x, i)
	return length
}

// noteEnd remembers the block a read of key ended in, for sequential
// detection. The map is bounded: cleared when it grows past the index cache.
func (c *ColdReader) noteEnd(key string, block int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.mu.lastBlock) >= c.cfg.IndexCacheEntries {
		clear(c.mu.lastBlock)
	}
	c.mu.lastBlock[key] = block
}

// scheduleReadAhead starts background GETs of the ReadAhead blocks after
// block when the read is sequential: it starts at the object's first block
// or in (or right after) the block where the previous read of the object
// ended. Blocks past the object's end come from r.Next.
func (c *ColdReader) scheduleReadAhead(r ColdRead, x *ObjectIndex, block int64) {
	if c.cfg.ReadAhead == 0 {
		return
	}
	c.mu.Lock()
	last, seen := c.mu.lastBlock[r.Object.Key]
	c.mu.Unlock()
	if block != 0 && !(seen && (block == last || block == last+1)) {
		return
	}
	n := c.numBlocks(x)
	for i := block + 1; i <= block+int64(c.cfg.ReadAhead) && i < n; i++ {
		c.startBlock(r.Object, x, i, true)
	}
	if spill := block + int64(c.cfg.ReadAhead) - (n - 1); spill > 0 && r.Next != nil {
		c.prefetchObject(*r.Next, spill)
	}
}

// prefetchObject loads obj's index and its first blocks in the background.
func (c *ColdReader) prefetchObject(obj ColdObject, blocks int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		x, err := c.Index(c.lifetime, obj)
		if err != nil {
			return // the reader that needs it will see the error
		}
		for i := int64(0); i < min(blocks, c.numBlocks(x)); i++ {
			c.startBlock(obj, x, i, true)
		}
		c.noteEnd(obj.Key, 0)
	}()
}

// byteQuota is a token bucket over bytes: rate per second, burst bytes.
// Tokens may go negative: a reservation larger than what is left waits
// for the deficit, so one block is never split.
type byteQuota struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu     sync.Mutex
	tokens float64   // guarded by mu
	last   time.Time // guarded by mu
}

func newByteQuota(rate, burst int64, now func() time.Time) *byteQuota {
	return &byteQuota{rate: float64(rate), burst: float64(max(rate, burst)), now: now, tokens: float64(max(rate, burst)), last: now()}
}

// setRate changes the rate; tokens already taken stay taken.
func (q *byteQuota) setRate(rate float64) {
	q.mu.Lock()
	q.refillLocked()
	q.rate = rate
	q.mu.Unlock()
}

// refillLocked adds the tokens earned since the last refill.
// REQUIRES: q.mu held.
func (q *byteQuota) refillLocked() {
	now := q.now()
	q.tokens = min(q.burst, q.tokens+now.Sub(q.last).Seconds()*q.rate)
	q.last = now
}

// reserve takes n bytes and returns how long to wait before using them.
func (q *byteQuota) reserve(n int64) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked()
	q.tokens -= float64(n)
	if q.tokens >= 0 {
		return 0
	}
	return time.Duration(-q.tokens / q.rate * float64(time.Second))
}

// NoteHot tells the governor a hot request (a produce, or a fetch served
// from local logs) is running: only then does it throttle the cold path.
// A nil reader (tiering off) ignores it.
func (c *ColdReader) NoteHot() {
	if c != nil && c.gov != nil {
		c.gov.noteHot()
	}
}

// governLoop steps the governor every interval until Close.
func (c *ColdReader) governLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.gov.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			c.gov.sample(now, c.stats.getBytes.Load())
		case <-c.lifetime.Done():
			return
		}
	}
}

func (c *ColdReader) governorStats() GovernorStats {
	if c.gov == nil {
		return GovernorStats{}
	}
	return c.gov.stats()
}

// waitGovernor waits until the governor lets n more bytes be fetched.
func (c *ColdReader) waitGovernor(n int64) error {
	if c.gov == nil {
		return nil
	}
	return c.sleep(c.gov.delay(n))
}

// sleep waits d, or until Close.
func (c *ColdReader) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.lifetime.Done():
		return c.lifetime.Err()
	}
}

// waitQuota waits until n bytes may be fetched.
func (c *ColdReader) waitQuota(n int64) error {
	if c.quota == nil {
		return nil
	}
	d := c.quota.reserve(n)
	if d > 0 {
		c.stats.quotaWaitNanos.Add(int64(d))
	}
	return c.sleep(d)
}
