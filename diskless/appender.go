package diskless

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// Defaults of Config (KIP-1150's names: diskless.append.linger.ms,
// diskless.append.max.bytes).
const (
	DefaultLinger   = 250 * time.Millisecond
	DefaultMaxBytes = 8 << 20
	// DefaultPutTimeout bounds one shared object's PUT, retries included.
	DefaultPutTimeout = 10 * time.Second
)

// ErrClosed: the appender stopped before the batch was written.
var ErrClosed = errors.New("diskless: appender stopped")

// ErrBackpressure: the appender already buffers MaxPending bytes (the
// bucket or etcd is slow or down); the producer retries
// (THROTTLING_QUOTA_EXCEEDED), so a stalled bucket cannot exhaust memory.
var ErrBackpressure = errors.New("diskless: too many bytes waiting for the bucket and etcd")

// Config configures an Appender.
type Config struct {
	// Cluster is the cluster name: objects go under <Cluster>/diskless/.
	Cluster string
	// Linger is how long the first buffered batch waits for others before
	// the object is written. Default DefaultLinger.
	Linger time.Duration
	// MaxBytes writes the object at once when the buffered batches reach
	// it. Default DefaultMaxBytes.
	MaxBytes int
	// PutTimeout bounds one PUT. Default DefaultPutTimeout.
	PutTimeout time.Duration
	// MaxPending bounds the bytes buffered and not yet taken by a flush.
	// Default 8 × MaxBytes.
	MaxPending int
	// Now is the clock (producer expiry stamps). Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Linger <= 0 {
		c.Linger = DefaultLinger
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.PutTimeout <= 0 {
		c.PutTimeout = DefaultPutTimeout
	}
	if c.MaxPending <= 0 {
		c.MaxPending = 8 * c.MaxBytes
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// ObjectKey is the bucket key of a shared object (doc.go).
func ObjectKey(cluster, objectID string) string {
	return cluster + "/diskless/" + objectID + ".shared"
}

// ObjectPrefix is the bucket prefix of a cluster's shared objects.
func ObjectPrefix(cluster string) string { return cluster + "/diskless/" }

// Appender buffers diskless batches of every partition and writes them as
// shared objects, one at a time (so a producer's pipelined requests commit
// in the order they arrived), answering each Append once its batches are
// committed or failed.
type Appender struct {
	cfg    Config
	store  Store
	bucket objstore.ObjectStore
	stats  *Stats

	mu       sync.Mutex
	pending  []*appendCall // guarded by mu
	bytes    int           // of pending, guarded by mu
	firstAt  time.Time     // when the oldest pending call arrived
	closed   bool          // guarded by mu
	kick     chan struct{} // a call arrived (coalesced)
	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// appendCall is one produce partition's batches, waiting for the flush
// that writes them.
type appendCall struct {
	part     metadata.TierPartition
	batches  [][]byte // each one RecordBatch v2, copied from the request
	hdrs     []recordbatch.Header
	arrived  time.Time
	outcomes []Outcome // set before done closes
	done     chan struct{}
}

// NewAppender starts an appender; Close stops it.
func NewAppender(cfg Config, store Store, bucket objstore.ObjectStore, stats *Stats) *Appender {
	cfg = cfg.withDefaults()
	a := &Appender{cfg: cfg, store: store, bucket: bucket, stats: stats,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// Result is a produce partition's answer: the offsets of its first and last
// batch (the original ones for duplicates).
type Result struct {
	BaseOffset, LastOffset int64
}

// Pending is a submitted produce partition waiting for its commit.
type Pending struct {
	a    *Appender
	call *appendCall
}

// Submit buffers one produce partition's validated batches (records holds
// whole RecordBatch v2 batches end to end, copied here) behind every batch
// submitted before; Wait gives the answer.
func (a *Appender) Submit(part metadata.TierPartition, records []byte) (*Pending, error) {
	call, err := newAppendCall(part, records, a.cfg.Now())
	if err != nil {
		return nil, err
	}
	if err := a.enqueue(call); err != nil {
		return nil, err
	}
	return &Pending{a: a, call: call}, nil
}

// Wait waits until the batches are committed or failed: the first error
// among them fails the partition. It ends early with ctx's error; the
// batches may then still be committed.
func (p *Pending) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.call.done:
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
	p.a.stats.appendLatency.observe(p.a.cfg.Now().Sub(p.call.arrived))
	res := Result{BaseOffset: -1, LastOffset: -1}
	for i, o := range p.call.outcomes {
		if o.Err != nil {
			return Result{}, o.Err
		}
		if i == 0 {
			res.BaseOffset = o.Base
		}
		res.LastOffset = o.Last
	}
	return res, nil
}

// Append is Submit then Wait.
func (a *Appender) Append(ctx context.Context, part metadata.TierPartition, records []byte) (Result, error) {
	p, err := a.Submit(part, records)
	if err != nil {
		return Result{}, err
	}
	return p.Wait(ctx)
}

func newAppendCall(part metadata.TierPartition, records []byte, now time.Time) (*appendCall, error) {
	call := &appendCall{part: part, arrived: now, done: make(chan struct{})}
	owned := bytes.Clone(records)
	for rest := owned; len(rest) > 0; {
		h, err := recordbatch.PeekHeader(rest)
		if err != nil {
			return nil, err
		}
		if h.Size() > len(rest) {
			return nil, fmt.Errorf("%w: batch of %d bytes in %d", recordbatch.ErrCorrupt, h.Size(), len(rest))
		}
		call.batches = append(call.batches, rest[:h.Size():h.Size()])
		call.hdrs = append(call.hdrs, h)
		rest = rest[h.Size():]
	}
	if len(call.batches) == 0 {
		return nil, recordbatch.ErrNoBatches
	}
	return call, nil
}

func (a *Appender) enqueue(call *appendCall) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	if a.bytes > 0 && a.bytes+call.size() > a.cfg.MaxPending {
		return fmt.Errorf("%w: %d bytes buffered, at most %d", ErrBackpressure, a.bytes, a.cfg.MaxPending)
	}
	if len(a.pending) == 0 {
		a.firstAt = call.arrived
	}
	a.pending = append(a.pending, call)
	a.bytes += call.size()
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return nil
}

// Close stops taking batches, fails the buffered ones with ErrClosed after
// the object being written (if any) is finished, and returns.
func (a *Appender) Close() {
	a.stopOnce.Do(func() { close(a.stop) })
	<-a.done
}

func (a *Appender) run() {
	defer close(a.done)
	for {
		select {
		case <-a.kick:
		case <-a.stop:
			a.failPending()
			return
		}
		if !a.linger() {
			a.failPending()
			return
		}
		if calls := a.take(); len(calls) > 0 {
			a.flush(calls)
		}
	}
}

// linger waits until the oldest pending call is Linger old or the pending
// bytes reach MaxBytes; false when the appender is stopping.
func (a *Appender) linger() bool {
	for {
		a.mu.Lock()
		full := a.bytes >= a.cfg.MaxBytes
		wait := a.cfg.Linger - a.cfg.Now().Sub(a.firstAt)
		empty := len(a.pending) == 0
		a.mu.Unlock()
		if full || wait <= 0 || empty {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-a.kick: // maybe full now
		case <-a.stop:
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// take removes the pending calls, up to MaxBytes (at least one call), so
// that one object stays near MaxBytes even when producers outrun it.
func (a *Appender) take() []*appendCall {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, size := 0, 0
	for n < len(a.pending) && (n == 0 || size < a.cfg.MaxBytes) {
		for _, b := range a.pending[n].batches {
			size += len(b)
		}
		n++
	}
	calls := a.pending[:n:n]
	a.pending = append([]*appendCall(nil), a.pending[n:]...)
	a.bytes -= size
	if len(a.pending) > 0 {
		a.firstAt = a.pending[0].arrived
		select {
		case a.kick <- struct{}{}:
		default:
		}
	}
	return calls
}

func (a *Appender) failPending() {
	a.mu.Lock()
	calls := a.pending
	a.pending, a.bytes, a.closed = nil, 0, true
	a.mu.Unlock()
	for _, c := range calls {
		c.fail(ErrClosed)
	}
}

// size is the bytes of the call's batches.
func (c *appendCall) size() int {
	n := 0
	for _, b := range c.batches {
		n += len(b)
	}
	return n
}

func (c *appendCall) fail(err error) {
	c.outcomes = make([]Outcome, len(c.batches))
	for i := range c.outcomes {
		c.outcomes[i].Err = err
	}
	close(c.done)
}

// flush writes one shared object holding calls' batches, commits it and
// answers every call.
func (a *Appender) flush(calls []*appendCall) {
	ctx := context.Background()
	objectID := newObjectID()
	object, batches, err := encodeCalls(calls)
	if err != nil {
		a.cfg.Logger.Error("diskless: encoding a shared object", "err", err)
		for _, c := range calls {
			c.fail(fmt.Errorf("%w: %v", ErrObjectPut, err))
		}
		return
	}
	if err := a.put(ctx, objectID, object); err != nil {
		a.cfg.Logger.Warn("diskless: writing a shared object failed", "object", objectID, "bytes", len(object), "err", err)
		for _, c := range calls {
			c.fail(fmt.Errorf("%w: %v", ErrObjectPut, err))
		}
		return
	}
	started := a.cfg.Now()
	outcomes := commitObject(ctx, countingStore{a.store, a.stats}, objectID, int64(len(object)), batches, a.cfg.Now)
	a.stats.commitLatency.observe(a.cfg.Now().Sub(started))
	i := 0
	for _, c := range calls {
		c.outcomes = outcomes[i : i+len(c.batches)]
		i += len(c.batches)
		close(c.done)
	}
}

func (a *Appender) put(ctx context.Context, objectID string, object []byte) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PutTimeout)
	defer cancel()
	a.stats.puts.Add(1)
	if err := a.bucket.Put(ctx, ObjectKey(a.cfg.Cluster, objectID), bytes.NewReader(object), int64(len(object))); err != nil {
		a.stats.putErrors.Add(1)
		return err
	}
	a.stats.objects.Add(1)
	a.stats.objectBytes.Add(int64(len(object)))
	return nil
}

// encodeCalls lays the calls' batches out in one shared object and returns
// them as staged batches in call order (the order of the outcomes). The
// object keeps each partition's batches in the order given, so the refs of
// a partition map back to its batches in turn.
func encodeCalls(calls []*appendCall) ([]byte, []staged, error) {
	var in []Batch
	var batches []staged
	queue := map[metadata.TierPartition][]int{} // indexes into batches, per partition
	for _, c := range calls {
		for j, b := range c.batches {
			in = append(in, Batch{TopicPartition: TopicPartition(c.part), Bytes: b})
			queue[c.part] = append(queue[c.part], len(batches))
			batches = append(batches, staged{part: c.part, hdr: c.hdrs[j]})
		}
	}
	object, refs, err := EncodeObject(in)
	if err != nil {
		return nil, nil, err
	}
	if len(refs) != len(batches) {
		return nil, nil, fmt.Errorf("diskless: %d refs for %d batches", len(refs), len(batches))
	}
	for _, ref := range refs {
		part := metadata.TierPartition(ref.TopicPartition)
		q := queue[part]
		if len(q) == 0 {
			return nil, nil, fmt.Errorf("diskless: object ref for an unknown partition %v", ref.TopicPartition)
		}
		batches[q[0]].position, batches[q[0]].length, batches[q[0]].crc = ref.Position, ref.Length, ref.CRC
		queue[part] = q[1:]
	}
	return object, batches, nil
}

// newObjectID is a random UUID (version 4) in its text form.
func newObjectID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// countingStore counts commit transactions for Stats. A failed read of the
// heads counts as a failed commit: during an etcd outage it is the call
// that fails, and the transaction is never tried.
type countingStore struct {
	Store
	stats *Stats
}

func (s countingStore) DisklessHeads(ctx context.Context, parts []metadata.TierPartition) ([]metadata.DisklessHead, error) {
	heads, err := s.Store.DisklessHeads(ctx, parts)
	if err != nil {
		s.stats.commitErrors.Add(1)
	}
	return heads, err
}

func (s countingStore) CommitDiskless(ctx context.Context, w []metadata.DisklessWrite) (bool, error) {
	ok, err := s.Store.CommitDiskless(ctx, w)
	switch {
	case err != nil:
		s.stats.commitErrors.Add(1)
	case ok:
		s.stats.commits.Add(1)
	default:
		s.stats.commitConflicts.Add(1)
	}
	return ok, err
}
