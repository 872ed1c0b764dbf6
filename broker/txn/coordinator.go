package txn

import (
	"context"
	"log/slog"
	"sync"

	"github.com/strata-log/strata/broker/coordinator"
)

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
// order) and newProducerID (an occasional metadata round trip).
type Coordinator struct {
	cfg    Config
	log    *slog.Logger
	sender MarkerSender
	// newProducerID allocates a producer id never used before; called
	// under mu when the machine asks for one (stepLocked).
	newProducerID func() (int64, error)
	// partitions are the __transaction_state partitions led here (the
	// coordinator epoch of a partition's markers is its leader epoch) and
	// the partition count ids are mapped over. Its led set is guarded by
	// mu.
	partitions *coordinator.Partitions
	loops      *coordinator.Loops

	mu struct {
		sync.Mutex
		machine *Machine
		markers map[string]bool // ids whose marker job runs
	}
}

// New returns a coordinator leading no partition. newProducerID allocates
// producer ids.
func New(cfg Config, newProducerID func() (int64, error), sender MarkerSender) (*Coordinator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{cfg: cfg, log: cfg.Logger, sender: sender, newProducerID: newProducerID}
	c.partitions = coordinator.NewPartitions(cfg.Partitions)
	c.loops = coordinator.NewLoops()
	c.mu.machine = NewMachine(MachineConfig{
		MaxTimeoutMs: int32(cfg.MaxTimeout.Milliseconds()), ExpirationMs: cfg.Expiration.Milliseconds(),
	})
	c.mu.markers = map[string]bool{}
	return c, nil
}

// Partitions is the partition count ids are mapped over.
func (c *Coordinator) Partitions() int32 { return c.partitions.Count() }

// PartitionFor is the __transaction_state partition of id.
func (c *Coordinator) PartitionFor(id string) int32 { return c.partitions.PartitionFor(id) }

// UsePartitionCount adopts the partition count of an existing topic;
// ignored while partitions are led.
func (c *Coordinator) UsePartitionCount(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitions.AdoptCountLocked(n)
}

// Start runs the timeout/expiry clock.
func (c *Coordinator) Start() { c.loops.Every(c.cfg.TickInterval, c.Tick) }

// Tick runs one round of timeouts and expiry now.
func (c *Coordinator) Tick() {
	c.mu.Lock()
	now := c.nowMs()
	c.stepLocked(func() { c.mu.machine.Tick(now, func(id string) bool { return c.statusLocked(id) == 0 }) })
	d := c.flushLocked()
	c.mu.Unlock()
	c.complete(d)
}

// stepLocked runs a machine step, allocating producer ids as the machine
// asks for them (StepWithProducerIDs). REQUIRES: mu held.
func (c *Coordinator) stepLocked(step func()) {
	StepWithProducerIDs(c.mu.machine, c.newProducerID, step)
}

// StepWithProducerIDs runs step on m; each time the step stops because a
// transition needs a new producer id, it allocates one with alloc, hands
// it (or the failure) to m, and runs the step again. A stopped step
// changed nothing, so the rerun continues where it stopped, and ids are
// allocated only when a transition uses them. step must do the same thing
// each time it is called (the same inputs, the same logical time).
func StepWithProducerIDs(m *Machine, alloc func() (int64, error), step func()) {
	for step(); m.NeedsProducerID(); step() {
		id, err := alloc()
		if err != nil {
			m.ProducerIDUnavailable()
			continue
		}
		m.SupplyProducerID(id)
	}
}

// Close stops serving; marker jobs end (a later leader resumes them).
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.partitions.CloseLocked()
	c.mu.machine.DropIDs(func(string) bool { return true })
	c.mu.Unlock()
	c.loops.Cancel()
	c.loops.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// statusLocked is the error code for a request about id (0: served here).
// REQUIRES: mu held.
func (c *Coordinator) statusLocked(id string) int16 { return c.partitions.StatusLocked(id) }

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
	_, ok := c.partitions.LookupLocked(partition)
	return ok
}
