package group

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/strata-log/strata/broker/coordinator"
)

// memLog is an in-memory offsets partition (coordinator.Log). With holdHW set, the high watermark
// stays where it is until release is called (a slow fsync).
type memLog struct {
	mu      sync.Mutex
	batches [][]byte // each with its base offset written in
	leo, hw int64
	holdHW  bool
	changed chan struct{}
}

var _ coordinator.Log = (*memLog)(nil)

func newMemLog() *memLog { return &memLog{changed: make(chan struct{})} }

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(b[0:8], uint64(l.leo))
	base := l.leo
	l.leo += int64(binary.BigEndian.Uint32(b[23:27])) + 1
	l.batches = append(l.batches, b)
	if !l.holdHW {
		l.hw = l.leo
		l.notifyLocked()
	}
	return base, nil
}

func (l *memLog) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// release makes everything appended durable.
func (l *memLog) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hw = l.leo
	l.notifyLocked()
}

func (l *memLog) WaitDurable(ctx context.Context, offset int64) error {
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

func (l *memLog) Read(offset int64, maxBytes int) ([]byte, error) {
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

func (l *memLog) LogStartOffset() int64 { return 0 }

func (l *memLog) HighWatermark() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hw
}
