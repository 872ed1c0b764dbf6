package objstore

import (
	"context"
	"io"
	"time"
)

// Latency is an ObjectStore that waits a fixed delay before every call of
// the one it wraps, as a distant bucket would (tests of timeouts,
// read-ahead and isolation; benchmarks).
type Latency struct {
	inner ObjectStore
	delay time.Duration
}

var _ ObjectStore = (*Latency)(nil)

// NewLatency wraps inner; every call first waits delay (or until ctx ends).
func NewLatency(inner ObjectStore, delay time.Duration) *Latency {
	return &Latency{inner: inner, delay: delay}
}

// ReadRange implements ObjectStore.
func (l *Latency) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if err := sleepCtx(ctx, l.delay); err != nil {
		return nil, err
	}
	return l.inner.ReadRange(ctx, key, offset, length)
}

// Put implements ObjectStore.
func (l *Latency) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := sleepCtx(ctx, l.delay); err != nil {
		return err
	}
	return l.inner.Put(ctx, key, body, size)
}

// List implements ObjectStore.
func (l *Latency) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := sleepCtx(ctx, l.delay); err != nil {
		return nil, err
	}
	return l.inner.List(ctx, prefix)
}

// Delete implements ObjectStore.
func (l *Latency) Delete(ctx context.Context, key string) error {
	if err := sleepCtx(ctx, l.delay); err != nil {
		return err
	}
	return l.inner.Delete(ctx, key)
}

// Stat implements ObjectStore.
func (l *Latency) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := sleepCtx(ctx, l.delay); err != nil {
		return ObjectInfo{}, err
	}
	return l.inner.Stat(ctx, key)
}

// IsNotFound implements ObjectStore.
func (l *Latency) IsNotFound(err error) bool { return l.inner.IsNotFound(err) }
