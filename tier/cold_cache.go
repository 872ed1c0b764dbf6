package tier

import (
	"container/list"
	"context"
	"fmt"
	"time"

	"github.com/strata-log/strata/tier/objstore"
)

// index is Index, or with cacheOnly the cached index alone (ErrNotCached
// when it is not cached).
func (c *ColdReader) index(ctx context.Context, obj ColdObject, cacheOnly bool) (*ObjectIndex, error) {
	if !cacheOnly {
		return c.Index(ctx, obj)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.mu.indexByKey[obj.Key]
	if !ok {
		return nil, ErrNotCached
	}
	c.mu.indexes.MoveToFront(el)
	c.stats.indexHits.Add(1)
	return el.Value.(*cacheEntry).index, nil
}

// cachedBlock is block i of obj if the cache holds it (a hit), else
// ErrNotCached; it never starts a GET. The caller owns a reference to the
// block (releaseBlocks).
func (c *ColdReader) cachedBlock(obj ColdObject, i int64) (*coldBlock, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.mu.blockByKey[blockKey{key: obj.Key, block: i}]
	if !ok {
		return nil, ErrNotCached
	}
	c.mu.blocks.MoveToFront(el)
	c.stats.blockHits.Add(1)
	b := el.Value.(*cacheEntry).block
	b.refs++
	return b, nil
}

// Index returns the decoded index of obj, from the cache or by reading the
// object's tail once (concurrent callers share the read).
func (c *ColdReader) Index(ctx context.Context, obj ColdObject) (*ObjectIndex, error) {
	c.mu.Lock()
	if el, ok := c.mu.indexByKey[obj.Key]; ok {
		c.mu.indexes.MoveToFront(el)
		x := el.Value.(*cacheEntry).index
		c.mu.Unlock()
		c.stats.indexHits.Add(1)
		return x, nil
	}
	c.stats.indexMisses.Add(1)
	f, ok := c.mu.idxFlights[obj.Key]
	switch {
	case !ok && c.mu.closed:
		f = closedFlight()
	case !ok:
		f = &flight{done: make(chan struct{})}
		c.mu.idxFlights[obj.Key] = f
		c.wg.Add(1)
		go c.loadIndex(obj, f)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, c.gone(obj.Key, f.err)
	}
	return f.index, nil
}

// loadIndex reads obj's footer and index sections and caches them.
func (c *ColdReader) loadIndex(obj ColdObject, f *flight) {
	defer c.wg.Done()
	var r *ObjectReader
	err := c.retry(func(ctx context.Context) error {
		var err error
		r, err = OpenObject(ctx, c.store, obj.Key, obj.Size)
		return err
	})
	c.mu.Lock()
	delete(c.mu.idxFlights, obj.Key)
	f.finished = true
	if err == nil {
		f.index = r.Index
		c.addIndexLocked(obj.Key, r.Index)
	} else {
		f.err = err
		if isCorrupt(err) {
			c.stats.corrupt.Add(1)
		}
	}
	c.mu.Unlock()
	close(f.done)
}

// addIndexLocked caches an index, evicting the least recently used.
// REQUIRES: c.mu held.
func (c *ColdReader) addIndexLocked(key string, x *ObjectIndex) {
	if _, ok := c.mu.indexByKey[key]; ok {
		return
	}
	c.mu.indexByKey[key] = c.mu.indexes.PushFront(&cacheEntry{key: key, index: x})
	for c.mu.indexes.Len() > c.cfg.IndexCacheEntries {
		old := c.mu.indexes.Remove(c.mu.indexes.Back()).(*cacheEntry)
		delete(c.mu.indexByKey, old.key.(string))
	}
}

// Forget drops an object's index and blocks from the cache (the object was
// deleted by retention).
func (c *ColdReader) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.indexByKey[key]; ok {
		c.mu.indexes.Remove(el)
		delete(c.mu.indexByKey, key)
	}
	for k, el := range c.mu.blockByKey {
		if k.key == key {
			c.removeBlockLocked(el)
		}
	}
	delete(c.mu.lastBlock, key)
}

// block returns block i of obj: cached, joined in flight, or fetched. The
// caller owns a reference to it (releaseBlocks).
func (c *ColdReader) block(ctx context.Context, obj ColdObject, x *ObjectIndex, i int64) (*coldBlock, error) {
	f, b := c.startBlock(obj, x, i, false)
	if b != nil {
		return b, nil
	}
	select {
	case <-f.done:
		return f.block, f.err
	case <-ctx.Done():
		c.mu.Lock()
		if !f.finished {
			f.waiters--
		} else if f.block != nil {
			c.releaseLocked(f.block)
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// startBlock returns the cached block (with a reference for the caller),
// or the flight fetching it (started if none is in progress; the caller
// joins its waiters). Read-ahead neither waits nor takes a reference: it
// gets neither back.
func (c *ColdReader) startBlock(obj ColdObject, x *ObjectIndex, i int64, readAhead bool) (*flight, *coldBlock) {
	k := blockKey{key: obj.Key, block: i}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.mu.blockByKey[k]; ok {
		c.mu.blocks.MoveToFront(el)
		if readAhead {
			return nil, nil
		}
		c.stats.blockHits.Add(1)
		b := el.Value.(*cacheEntry).block
		b.refs++
		return nil, b
	}
	f, ok := c.mu.flights[k]
	switch {
	case !ok && c.mu.closed:
		return closedFlight(), nil
	case ok && !readAhead:
		c.stats.blockMisses.Add(1)
		c.stats.sharedGets.Add(1)
	case !ok:
		if readAhead {
			c.stats.readAhead.Add(1)
		} else {
			c.stats.blockMisses.Add(1)
		}
		f = &flight{done: make(chan struct{})}
		c.mu.flights[k] = f
		c.wg.Add(1)
		go c.fetchBlock(obj, x, k, f)
	}
	if !readAhead {
		f.waiters++
	}
	return f, nil
}

// fetchBlock GETs one block under a worker slot and the quota, checks every
// chunk CRC, and caches it; each waiter gets a reference. A corrupt block
// is counted and never cached.
func (c *ColdReader) fetchBlock(obj ColdObject, x *ObjectIndex, k blockKey, f *flight) {
	defer c.wg.Done()
	b, err := c.getBlock(obj, x, k.block)
	c.mu.Lock()
	delete(c.mu.flights, k)
	if err == nil {
		b.refs = f.waiters
		c.addBlockLocked(k, b)
		if b.refs == 0 {
			c.freeLocked(b)
		}
	}
	f.block, f.err, f.finished = b, err, true
	c.mu.Unlock()
	if err != nil && isCorrupt(err) {
		c.stats.corrupt.Add(1)
		c.cfg.Logger.Warn("corrupt block in segment object, not served", "key", obj.Key, "block", k.block, "err", err)
	}
	close(f.done)
}

// getBlock reads and verifies block i, retrying transient failures. A CRC
// mismatch is retried too (a flaky network can flip bits the transport did
// not catch) but reported as corrupt if it persists.
func (c *ColdReader) getBlock(obj ColdObject, x *ObjectIndex, i int64) (*coldBlock, error) {
	select {
	case c.workers <- struct{}{}:
	case <-c.lifetime.Done():
		return nil, c.lifetime.Err()
	}
	defer func() { <-c.workers }()
	offset, length := c.blockRange(x, i)
	if err := c.waitQuota(length); err != nil {
		return nil, err
	}
	if err := c.waitGovernor(length); err != nil {
		return nil, err
	}
	c.mu.Lock()
	b := c.newBlockLocked(length)
	c.mu.Unlock()
	err := c.retry(func(ctx context.Context) error {
		c.stats.gets.Add(1)
		err := objstore.ReadInto(ctx, c.store, obj.Key, offset, b.data)
		if err != nil {
			c.stats.getErrors.Add(1)
			return err
		}
		c.stats.getBytes.Add(length)
		return c.verifyBlock(x, offset, b.data)
	})
	if err != nil {
		c.mu.Lock()
		c.freeLocked(b)
		c.mu.Unlock()
		return nil, fmt.Errorf("tier: %s block %d: %w", obj.Key, i, err)
	}
	return b, nil
}

// verifyBlock checks every CRC chunk of a block that starts at offset.
func (c *ColdReader) verifyBlock(x *ObjectIndex, offset int64, data []byte) error {
	chunk := int64(x.Footer.ChunkSize)
	for pos := int64(0); pos < int64(len(data)); pos += chunk {
		end := min(pos+chunk, int64(len(data)))
		if err := x.VerifyChunk((offset+pos)/chunk, data[pos:end]); err != nil {
			return err
		}
	}
	return nil
}

// retry runs op under the reader's lifetime up to GetAttempts times while
// it fails transiently, with a short growing pause.
func (c *ColdReader) retry(op func(ctx context.Context) error) error {
	var err error
	for attempt := 0; attempt < c.cfg.GetAttempts; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(time.Duration(attempt*attempt) * 50 * time.Millisecond)
			select {
			case <-t.C:
			case <-c.lifetime.Done():
				t.Stop()
				return c.lifetime.Err()
			}
		}
		if err = op(c.lifetime); err == nil || !(transient(err) || isCorrupt(err)) {
			return err
		}
	}
	return err
}

// newBlockLocked returns a block of n bytes with no references: an arena
// slot, evicting the least recently used blocks no reader holds until the
// arena has one, or heap memory when every slot is in use (blocks in
// flight or held by readers). REQUIRES: c.mu held.
func (c *ColdReader) newBlockLocked(n int64) *coldBlock {
	for {
		if data, ok := c.mu.arena.get(n); ok {
			return &coldBlock{data: data, inArena: true}
		}
		el := c.oldestUnheldLocked()
		if el == nil {
			return &coldBlock{data: make([]byte, n)}
		}
		c.removeBlockLocked(el)
	}
}

// oldestUnheldLocked is the least recently used cached block that only the
// cache references (evicting a held one would free nothing), or nil.
// REQUIRES: c.mu held.
func (c *ColdReader) oldestUnheldLocked() *list.Element {
	for el := c.mu.blocks.Back(); el != nil; el = el.Prev() {
		if el.Value.(*cacheEntry).block.refs == 1 {
			return el
		}
	}
	return nil
}

// addBlockLocked caches an arena block, taking a reference for the cache.
// The arena bounds the cache: a block is evicted only to make room for
// another (newBlockLocked). REQUIRES: c.mu held.
func (c *ColdReader) addBlockLocked(k blockKey, b *coldBlock) {
	if _, ok := c.mu.blockByKey[k]; ok || !b.inArena {
		return
	}
	c.mu.blockByKey[k] = c.mu.blocks.PushFront(&cacheEntry{key: k, block: b})
	c.mu.cachedBytes += int64(cap(b.data))
	b.cached = true
	b.refs++
}

// removeBlockLocked drops one cached block and the cache's reference.
// REQUIRES: c.mu held.
func (c *ColdReader) removeBlockLocked(el *list.Element) {
	e := c.mu.blocks.Remove(el).(*cacheEntry)
	delete(c.mu.blockByKey, e.key.(blockKey))
	c.mu.cachedBytes -= int64(cap(e.block.data))
	e.block.cached = false
	c.releaseLocked(e.block)
}

// releaseBlocks drops the caller's reference to each block.
func (c *ColdReader) releaseBlocks(bs ...*coldBlock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range bs {
		c.releaseLocked(b)
	}
}

// releaseLocked drops one reference; the last frees the block.
// REQUIRES: c.mu held.
func (c *ColdReader) releaseLocked(b *coldBlock) {
	b.refs--
	if b.refs == 0 {
		c.freeLocked(b)
	}
}

// freeLocked returns an unreferenced block's slot to the arena.
// REQUIRES: c.mu held.
func (c *ColdReader) freeLocked(b *coldBlock) {
	if b.inArena && b.data != nil {
		c.mu.arena.put(b.data)
	}
	b.data = nil
}
