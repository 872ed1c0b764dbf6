package objstore

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// FaultKind is what an injected fault does.
type FaultKind int

const (
	// FaultSlowDown fails the call with an S3-style 503 SlowDown (transient).
	FaultSlowDown FaultKind = iota + 1
	// FaultTimeout waits Fault.Delay (or until ctx ends), then fails with a
	// timeout error (transient).
	FaultTimeout
	// FaultPermanent fails the call with a permanent error.
	FaultPermanent
	// FaultTruncate (GET only) returns a body that ends with
	// io.ErrUnexpectedEOF after half of the range (transient).
	FaultTruncate
	// FaultLostAck lets the call reach the wrapped store, then returns a
	// transient error: the caller cannot tell that the PUT or DELETE happened.
	FaultLostAck
)

// Fault is one injection rule.
type Fault struct {
	Op          Op        // operation to match; OpAny matches all
	KeyContains string    // match only keys (or List prefixes) containing this; "" matches all
	Kind        FaultKind // what to do
	// Nth fires the fault on the Nth matching call (1-based) and the Times-1
	// matching calls after it. 0 means from the first matching call.
	Nth int
	// Times is how many times the rule fires; 0 means forever.
	Times int
	// Delay is FaultTimeout's wait.
	Delay time.Duration
}

// FaultError is the error an injected fault returns.
type FaultError struct {
	Kind      FaultKind
	Op        Op
	Key       string
	transient bool
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("objstore: injected fault %s on %s %s", e.Kind, e.Op, e.Key)
}

// Unwrap makes transient faults match ErrTransient.
func (e *FaultError) Unwrap() error {
	if e.transient {
		return ErrTransient
	}
	return nil
}

// Timeout marks FaultTimeout errors as timeouts, as net errors are.
func (e *FaultError) Timeout() bool { return e.Kind == FaultTimeout }

func (k FaultKind) String() string {
	switch k {
	case FaultSlowDown:
		return "503 SlowDown"
	case FaultTimeout:
		return "timeout"
	case FaultPermanent:
		return "error"
	case FaultTruncate:
		return "truncated body"
	case FaultLostAck:
		return "lost acknowledgement"
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// Faulty is an ObjectStore that injects faults into calls to the one it wraps.
type Faulty struct {
	inner ObjectStore

	mu struct {
		sync.Mutex
		rules []*faultRule // guarded by mu
		fired int          // faults injected so far; guarded by mu
	}
}

type faultRule struct {
	Fault
	seen  int // matching calls so far
	fired int
}

var _ ObjectStore = (*Faulty)(nil)

// NewFaulty wraps inner with no rules.
func NewFaulty(inner ObjectStore) *Faulty { return &Faulty{inner: inner} }

// Inject adds a rule. Rules are checked in the order added; the first that
// fires decides.
func (f *Faulty) Inject(fault Fault) {
	f.mu.Lock()
	f.mu.rules = append(f.mu.rules, &faultRule{Fault: fault})
	f.mu.Unlock()
}

// Clear removes every rule (the store "recovers").
func (f *Faulty) Clear() {
	f.mu.Lock()
	f.mu.rules = nil
	f.mu.Unlock()
}

// Fired returns how many faults were injected so far.
func (f *Faulty) Fired() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.fired
}

// match returns the fault to inject into this call, if any.
func (f *Faulty) match(op Op, key string) (Fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.mu.rules {
		if (r.Op != OpAny && r.Op != op) || !strings.Contains(key, r.KeyContains) {
			continue
		}
		r.seen++
		if r.seen < r.Nth || (r.Times > 0 && r.fired >= r.Times) {
			continue
		}
		if r.Kind == FaultTruncate && op != OpGet {
			continue
		}
		r.fired++
		f.mu.fired++
		return r.Fault, true
	}
	return Fault{}, false
}

// before injects faults that happen instead of the call. It returns
// (fault, nil) when the call should proceed, with the fault to apply after.
func (f *Faulty) before(ctx context.Context, op Op, key string) (Fault, error) {
	fault, ok := f.match(op, key)
	if !ok {
		return Fault{}, nil
	}
	fe := &FaultError{Kind: fault.Kind, Op: op, Key: key, transient: fault.Kind != FaultPermanent}
	switch fault.Kind {
	case FaultTimeout:
		if err := sleepCtx(ctx, fault.Delay); err != nil {
			return Fault{}, err
		}
		return Fault{}, fe
	case FaultSlowDown, FaultPermanent:
		return Fault{}, fe
	}
	return fault, nil
}

// after applies a FaultLostAck once the wrapped call succeeded.
func after(fault Fault, op Op, key string, err error) error {
	if err == nil && fault.Kind == FaultLostAck {
		return &FaultError{Kind: fault.Kind, Op: op, Key: key, transient: true}
	}
	return err
}

// ReadRange implements ObjectStore.
func (f *Faulty) ReadRange(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	fault, err := f.before(ctx, OpGet, key)
	if err != nil {
		return nil, err
	}
	body, err := f.inner.ReadRange(ctx, key, offset, length)
	if err != nil {
		return nil, err
	}
	if fault.Kind == FaultLostAck {
		body.Close()
		return nil, after(fault, OpGet, key, nil)
	}
	if fault.Kind != FaultTruncate {
		return body, nil
	}
	return &truncatedBody{ReadCloser: body, left: length / 2}, nil
}

// truncatedBody yields left bytes, then io.ErrUnexpectedEOF forever.
type truncatedBody struct {
	io.ReadCloser
	left int64
}

func (t *truncatedBody) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.ReadCloser.Read(p)
	t.left -= int64(n)
	return n, err
}

// Put implements ObjectStore.
func (f *Faulty) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	fault, err := f.before(ctx, OpPut, key)
	if err != nil {
		return err
	}
	return after(fault, OpPut, key, f.inner.Put(ctx, key, body, size))
}

// List implements ObjectStore.
func (f *Faulty) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	fault, err := f.before(ctx, OpList, prefix)
	if err != nil {
		return nil, err
	}
	out, err := f.inner.List(ctx, prefix)
	if err = after(fault, OpList, prefix, err); err != nil {
		return nil, err
	}
	return out, nil
}

// Delete implements ObjectStore.
func (f *Faulty) Delete(ctx context.Context, key string) error {
	fault, err := f.before(ctx, OpDelete, key)
	if err != nil {
		return err
	}
	return after(fault, OpDelete, key, f.inner.Delete(ctx, key))
}

// Stat implements ObjectStore.
func (f *Faulty) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	fault, err := f.before(ctx, OpStat, key)
	if err != nil {
		return ObjectInfo{}, err
	}
	info, err := f.inner.Stat(ctx, key)
	if err = after(fault, OpStat, key, err); err != nil {
		return ObjectInfo{}, err
	}
	return info, nil
}

// IsNotFound implements ObjectStore.
func (f *Faulty) IsNotFound(err error) bool { return f.inner.IsNotFound(err) }
