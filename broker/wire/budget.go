package wire

import (
	"context"
	"sync"
)

// ByteBudget bounds the bytes of requests read but not yet handled, across
// the broker (queued.max.request.bytes). A reader waits for room before it
// allocates a frame. One frame larger than the whole budget is let through
// when nothing else is held, so it cannot wait forever.
type ByteBudget struct {
	limit int64 // <= 0: unbounded; set by NewByteBudget, read-only
	mu    sync.Mutex
	used  int64         // guarded by mu
	freed chan struct{} // guarded by mu; closed and replaced at every release
}

// NewByteBudget returns a budget of limit bytes; limit <= 0 is unbounded.
func NewByteBudget(limit int64) *ByteBudget {
	return &ByteBudget{limit: limit, freed: make(chan struct{})}
}

// Acquire waits until n bytes fit, or ctx ends (false then).
func (q *ByteBudget) Acquire(ctx context.Context, n int64) bool {
	if q.limit <= 0 {
		return true
	}
	for {
		q.mu.Lock()
		if q.used == 0 || q.used+n <= q.limit {
			q.used += n
			q.mu.Unlock()
			return true
		}
		freed := q.freed
		q.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
	}
}

// Release gives back n bytes taken by Acquire.
func (q *ByteBudget) Release(n int64) {
	if q.limit <= 0 || n == 0 {
		return
	}
	q.mu.Lock()
	q.used -= n
	close(q.freed)
	q.freed = make(chan struct{})
	q.mu.Unlock()
}

// InUse is the bytes held (tests, metrics).
func (q *ByteBudget) InUse() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}
