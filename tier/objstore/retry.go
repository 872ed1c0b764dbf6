package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how often and how long to retry transient errors.
type RetryPolicy struct {
	// MaxAttempts is the number of tries per call, including the first. Default 10.
	MaxAttempts int
	// InitialBackoff is the cap of the first wait; each retry doubles the cap. Default 50ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between attempts. Default 5s.
	MaxBackoff time.Duration
	// AttemptTimeout bounds one attempt (0: no bound beyond the caller's context).
	// A GET attempt's timeout covers opening the body, not reading it.
	AttemptTimeout time.Duration
	// Logger receives one debug line per retry. Default slog.Default().
	Logger *slog.Logger
	// Sleep waits d or until ctx ends; tests replace it. Default: a timer.
	Sleep func(ctx context.Context, d time.Duration) error
}

// WithDefaults fills zero fields.
func (p RetryPolicy) WithDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 10
	}
	if p.InitialBackoff == 0 {
		p.InitialBackoff = 50 * time.Millisecond
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = 5 * time.Second
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Sleep == nil {
		p.Sleep = sleepCtx
	}
	return p
}

// Validate rejects nonsense.
func (p RetryPolicy) Validate() error {
	if p.MaxAttempts < 1 || p.InitialBackoff <= 0 || p.MaxBackoff < p.InitialBackoff || p.AttemptTimeout < 0 {
		return fmt.Errorf("objstore: invalid retry policy %+v", p)
	}
	return nil
}

// Backoff returns the wait before retry number retry (1 for the first
// retry): uniformly random in [0, min(MaxBackoff, InitialBackoff*2^(retry-1))]
// ("full jitter", so that many brokers hitting one SlowDown spread out).
func (p RetryPolicy) Backoff(retry int) time.Duration {
	limit := p.InitialBackoff
	for i := 1; i < retry && limit < p.MaxBackoff; i++ {
		limit *= 2
	}
	limit = min(limit, p.MaxBackoff)
	return time.Duration(rand.Int64N(int64(limit) + 1))
}

// Do runs op until it succeeds, fails permanently, the attempts run out or
// ctx ends. op gets a context bounded by AttemptTimeout. The last error is
// returned.
// REQUIRES: p has defaults applied (WithDefaults).
func (p RetryPolicy) Do(ctx context.Context, what string, op func(ctx context.Context) error) error {
	var err error
	for attempt := 1; ; attempt++ {
		err = p.attempt(ctx, op)
		if err == nil || !IsTransient(err) || ctx.Err() != nil || attempt >= p.MaxAttempts {
			return err
		}
		wait := p.Backoff(attempt)
		p.Logger.Debug("object store: retrying", "op", what, "attempt", attempt, "wait", wait, "err", err)
		if sleepErr := p.Sleep(ctx, wait); sleepErr != nil {
			return err
		}
	}
}

func (p RetryPolicy) attempt(ctx context.Context, op func(ctx context.Context) error) error {
	if p.AttemptTimeout <= 0 {
		return op(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
	defer cancel()
	return op(actx)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retrying is an ObjectStore that retries transient errors of the one it wraps.
type Retrying struct {
	inner  ObjectStore
	policy RetryPolicy
}

var _ ObjectStore = (*Retrying)(nil)

// NewRetrying wraps inner. Zero fields of policy get defaults.
func NewRetrying(inner ObjectStore, policy RetryPolicy) (*Retrying, error) {
	policy = policy.WithDefaults()
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	return &Retrying{inner: inner, policy: policy}, nil
}

// ReadRange implements ObjectStore. The returned body resumes after a
// transient error mid-stream by reading the rest of the range again.
func (r *Retrying) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	body, err := r.openRange(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	return &resumingReader{store: r, ctx: ctx, key: key, next: offset, end: offset + length, body: body}, nil
}

// openRange opens a range with retries. The attempt timeout does not apply:
// the body outlives this call, and cancelling its context would cut it.
func (r *Retrying) openRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	var body io.ReadCloser
	policy := r.policy
	policy.AttemptTimeout = 0
	err := policy.Do(ctx, "get", func(ctx context.Context) error {
		var err error
		body, err = r.inner.ReadRange(ctx, key, offset, length)
		return err
	})
	return body, err
}

// Put implements ObjectStore. Bodies that cannot be replayed (neither
// io.ReaderAt nor io.Seeker) get one attempt.
func (r *Retrying) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	replay, ok := replayable(body, size)
	if !ok {
		return r.inner.Put(ctx, key, body, size)
	}
	return r.policy.Do(ctx, "put", func(ctx context.Context) error {
		b, err := replay()
		if err != nil {
			return err
		}
		return r.inner.Put(ctx, key, b, size)
	})
}

// replayable returns a function giving a fresh copy of body for each attempt.
func replayable(body io.Reader, size int64) (func() (io.Reader, error), bool) {
	if sized, ok := body.(interface{ Size() int64 }); ok && sized.Size() != size {
		return nil, false // let the backend report ErrShortBody
	}
	if ra, ok := body.(io.ReaderAt); ok {
		return func() (io.Reader, error) { return io.NewSectionReader(ra, 0, size), nil }, true
	}
	seeker, ok := body.(io.Seeker)
	if !ok {
		return nil, false
	}
	start, err := seeker.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, false
	}
	return func() (io.Reader, error) {
		if _, err := seeker.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("objstore: rewinding put body: %w", err)
		}
		return body, nil
	}, true
}

// List implements ObjectStore.
func (r *Retrying) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	var out []ObjectInfo
	err := r.policy.Do(ctx, "list", func(ctx context.Context) error {
		var err error
		out, err = r.inner.List(ctx, prefix)
		return err
	})
	return out, err
}

// Delete implements ObjectStore.
func (r *Retrying) Delete(ctx context.Context, key string) error {
	return r.policy.Do(ctx, "delete", func(ctx context.Context) error { return r.inner.Delete(ctx, key) })
}

// Stat implements ObjectStore.
func (r *Retrying) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	var info ObjectInfo
	err := r.policy.Do(ctx, "stat", func(ctx context.Context) error {
		var err error
		info, err = r.inner.Stat(ctx, key)
		return err
	})
	return info, err
}

// IsNotFound implements ObjectStore.
func (r *Retrying) IsNotFound(err error) bool { return r.inner.IsNotFound(err) }

// resumingReader reads [next, end) of key, reopening the range after a
// transient error. Owned by the caller's goroutine, like any io.Reader.
type resumingReader struct {
	store     *Retrying
	ctx       context.Context
	key       string
	next, end int64
	body      io.ReadCloser
	resumes   int
}

func (rr *resumingReader) Read(p []byte) (int, error) {
	for {
		if rr.next >= rr.end {
			return 0, io.EOF
		}
		if int64(len(p)) > rr.end-rr.next {
			p = p[:rr.end-rr.next]
		}
		n, err := rr.body.Read(p)
		rr.next += int64(n)
		if n > 0 {
			return n, nil // a pending error shows up again on the next Read
		}
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // rr.next < rr.end: the body ended early
		}
		if !IsTransient(err) || rr.resumes >= rr.store.policy.MaxAttempts {
			return 0, err
		}
		if err := rr.reopen(); err != nil {
			return 0, err
		}
	}
}

func (rr *resumingReader) reopen() error {
	rr.resumes++
	rr.body.Close()
	if err := rr.store.policy.Sleep(rr.ctx, rr.store.policy.Backoff(rr.resumes)); err != nil {
		return err
	}
	body, err := rr.store.openRange(rr.ctx, rr.key, rr.next, rr.end-rr.next)
	if err != nil {
		rr.body = io.NopCloser(eofReader{})
		return err
	}
	rr.body = body
	return nil
}

func (rr *resumingReader) Close() error { return rr.body.Close() }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
