// Package coordtest holds an in-memory coordinator.Log for the tests of the
// coordinator shell and of the group and transaction coordinators.
package coordtest

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/strata-log/strata/broker/coordinator"
)

// MemLog is an in-memory coordinator partition. Appends are durable at
// once unless the high watermark is held (a slow fsync or follower), and
// fail while FailAppends is set (leadership lost). Safe for concurrent
// use: mu guards every field.
type MemLog struct {
	mu      sync.Mutex
	batches [][]byte // each with its base offset written in
	leo, hw int64    // invariant: hw <= leo
	holdHW  bool
	failure error
	changed chan struct{} // closed when hw moves
}

var _ coordinator.Log = (*MemLog)(nil)

// NewMemLog returns an empty log.
func NewMemLog() *MemLog { return &MemLog{changed: make(chan struct{})} }

// Append writes batch's base offset into a copy of it and appends that.
// batch must be a RecordBatch v2 (its last offset delta is read).
func (l *MemLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failure != nil {
		return 0, l.failure
	}
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(b[0:8], uint64(l.leo))
	base := l.leo
	l.leo += int64(binary.BigEndian.Uint32(b[23:27])) + 1
	l.batches = append(l.batches, b)
	if !l.holdHW {
		l.advanceLocked()
	}
	return base, nil
}

// advanceLocked makes everything appended durable. REQUIRES: mu held.
func (l *MemLog) advanceLocked() {
	l.hw = l.leo
	close(l.changed)
	l.changed = make(chan struct{})
}

// HoldHW keeps the high watermark where it is until Release.
func (l *MemLog) HoldHW() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holdHW = true
}

// Release makes everything appended durable, and later appends at once.
func (l *MemLog) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holdHW = false
	l.advanceLocked()
}

// FailAppends makes appends fail with err until it is called with nil.
func (l *MemLog) FailAppends(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failure = err
}

// WaitDurable blocks until the high watermark is above offset.
func (l *MemLog) WaitDurable(ctx context.Context, offset int64) error {
	for {
		l.mu.Lock()
		hw, ch := l.hw, l.changed
		l.mu.Unlock()
		if hw > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Read returns the whole batches below the high watermark that hold
// offsets at or after offset, stopping once maxBytes are reached.
func (l *MemLog) Read(offset int64, maxBytes int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	for _, b := range l.batches {
		base := int64(binary.BigEndian.Uint64(b[0:8]))
		last := base + int64(binary.BigEndian.Uint32(b[23:27]))
		if last < offset || last >= l.hw {
			continue
		}
		out = append(out, b...)
		if len(out) >= maxBytes {
			break
		}
	}
	return out, nil
}

// LogStartOffset is 0: nothing is ever deleted.
func (l *MemLog) LogStartOffset() int64 { return 0 }

// HighWatermark is the offset after the last durable record.
func (l *MemLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw
}
