package txn

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Log is one partition of __transaction_state that this broker leads (the
// broker implements it like group.OffsetsLog).
type Log interface {
	Append(batch []byte) (baseOffset int64, err error)
	WaitDurable(ctx context.Context, offset int64) error
	Read(offset int64, maxBytes int) ([]byte, error)
	LogStartOffset() int64
	HighWatermark() int64
}

// MarkerSender writes a job's markers to the partitions' leaders with the
// coordinator epoch, and returns the partitions that must be retried. A
// partition that no longer exists counts as done.
type MarkerSender interface {
	SendMarkers(ctx context.Context, job Markers, coordinatorEpoch int32) (retry []TopicPartition)
}

// Coordinator serves the transactional ids of the __transaction_state
// partitions this broker leads: the I/O shell around Machine (doc.go).
//
// Lock order: mu is never held across WaitDurable, a log Read or
// SendMarkers; it is held across Append (records reach the log in machine
// order) and NewProducerID (an occasional metadata round trip).
type Coordinator struct {
	cfg    Config
	log    *slog.Logger
	sender MarkerSender
	count  atomic.Int32 // partition count ids are mapped over

	mu struct {
		sync.Mutex
		machine    *Machine
		partitions map[int32]*statePartition
		markers    map[string]bool // ids whose marker job runs
		closed     bool
	}

	lifetime context.Context
	cancel   context.CancelFunc
	loops    sync.WaitGroup
}

// statePartition is a led partition. Guarded by Coordinator.mu.
type statePartition struct {
	log    Log
	epoch  int32 // leader epoch: the coordinator epoch of markers
	loaded bool
}

// New returns a coordinator leading no partition. newProducerID allocates
// producer ids.
func New(cfg Config, newProducerID func() (int64, error), sender MarkerSender) (*Coordinator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, sender: sender}
	c.mu.machine = NewMachine(MachineConfig{
		MaxTimeoutMs: int32(cfg.MaxTimeout.Milliseconds()), ExpirationMs: cfg.Expiration.Milliseconds(),
		NewProducerID: newProducerID,
	})
	c.mu.partitions = map[int32]*statePartition{}
	c.mu.markers = map[string]bool{}
	c.lifetime, c.cancel = context.WithCancel(context.Background())
	c.count.Store(cfg.Partitions)
	return c, nil
}

// Partitions is the partition count ids are mapped over.
func (c *Coordinator) Partitions() int32 { return c.count.Load() }

// PartitionFor is the __transaction_state partition of id.
func (c *Coordinator) PartitionFor(id string) int32 { return PartitionFor(id, c.count.Load()) }

// UsePartitionCount adopts the partition count of an existing topic;
// ignored while partitions are led.
func (c *Coordinator) UsePartitionCount(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n >= 1 && len(c.mu.partitions) == 0 {
		c.count.Store(n)
	}
}

// Start runs the timeout/expiry clock.
func (c *Coordinator) Start() {
	c.loops.Add(1)
	go func() {
		defer c.loops.Done()
		t := time.NewTicker(c.cfg.TickInterval)
		defer t.Stop()
		for {
			select {
			case <-c.lifetime.Done():
				return
			case <-t.C:
			}
			c.Tick()
		}
	}()
}

// Tick runs one round of timeouts and expiry now.
func (c *Coordinator) Tick() {
	c.mu.Lock()
	c.mu.machine.Tick(c.nowMs(), func(id string) bool { return c.statusLocked(id) == 0 })
	d := c.flushLocked()
	c.mu.Unlock()
	c.complete(d)
}

// Close stops serving; marker jobs end (a later leader resumes them).
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.partitions = map[int32]*statePartition{}
	c.mu.machine.DropIDs(func(string) bool { return true })
	c.mu.Unlock()
	c.cancel()
	c.loops.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// statusLocked is the error code for a request about id (0: served here).
// REQUIRES: mu held.
func (c *Coordinator) statusLocked(id string) int16 {
	p, ok := c.mu.partitions[c.PartitionFor(id)]
	switch {
	case !ok:
		return kerr.NotCoordinator.Code
	case !p.loaded:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// Status is the error code for a request about id (0: served here).
func (c *Coordinator) Status(id string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(id)
}

// Leads reports whether partition is led (loaded or loading) here.
func (c *Coordinator) Leads(partition int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.mu.partitions[partition]
	return ok
}
