package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/group/consumer"
)

// OffsetsLog is one partition of __consumer_offsets that this broker leads.
// The broker implements it on its partitions; tests use memLog.
type OffsetsLog interface {
	// Append appends one RecordBatch v2 (its base offset is assigned) as
	// leader and returns the offset of its first record.
	Append(batch []byte) (baseOffset int64, err error)
	// WaitDurable blocks until the high watermark is above offset.
	WaitDurable(ctx context.Context, offset int64) error
	// Read returns whole batches starting at offset, below the high
	// watermark, about maxBytes at most (at least one batch).
	Read(offset int64, maxBytes int) ([]byte, error)
	LogStartOffset() int64
	HighWatermark() int64
}

// ErrNotLeader is returned when a partition is not (or no longer) led here.
var ErrNotLeader = errors.New("group: offsets partition not led by this broker")

// Coordinator serves the groups of the offsets partitions this broker
// leads: the I/O shell around Machine (doc.go).
//
// Lock order: mu is never held across WaitDurable or a log Read; it is held
// across Append so that records reach the log in the order the machine
// produced them.
type Coordinator struct {
	cfg         Config
	log         *slog.Logger
	topicExists func(topic string) bool
	// partitionCount maps groups to offsets partitions: the partition count
	// of __consumer_offsets once it exists (as Kafka), else the config's.
	partitionCount atomic.Int32

	mu struct {
		sync.Mutex
		machine    *Machine
		partitions map[int32]*offsetsPartition // led partitions
		waiters    map[uint64]chan Response    // request id -> its delayed answer
		nextReq    uint64
		closed     bool // Close was called: lead nothing any more
		// consumers are the consumer-protocol groups (KIP-848) of the led
		// partitions; a group id is in consumers or in machine, not both
		// with members (coordinator_consumer.go).
		consumers map[string]*consumer.Group
		// pending are appended batches of consumer groups not yet handed
		// to a delivery: flushLocked takes them.
		pending []appended
	}
	// topicMetadata lists the existing topics for consumer-protocol groups;
	// called without mu (SetTopicMetadata).
	topicMetadata atomic.Pointer[TopicMetadataFunc]

	lifetime context.Context
	cancel   context.CancelFunc
	loops    sync.WaitGroup
}

// offsetsPartition is a led partition; loaded is false while it is read.
// Guarded by Coordinator.mu.
type offsetsPartition struct {
	log    OffsetsLog
	loaded bool
}

// New returns a coordinator leading no partition. topicExists reports
// whether a topic exists (offsets of deleted topics are removed).
func New(cfg Config, topicExists func(string) bool) (*Coordinator, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mc := cfg.machineConfig()
	mc.NewMemberID = newMemberID
	c := &Coordinator{cfg: cfg, log: cfg.Logger, topicExists: topicExists}
	c.mu.machine = NewMachine(mc)
	c.mu.partitions = map[int32]*offsetsPartition{}
	c.mu.waiters = map[uint64]chan Response{}
	c.mu.consumers = map[string]*consumer.Group{}
	c.lifetime, c.cancel = context.WithCancel(context.Background())
	c.partitionCount.Store(cfg.OffsetsTopicPartitions)
	return c, nil
}

// newMemberID is Kafka's form: prefix, a dash, a random UUID.
func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s-%s", prefix, h[:8], h[8:12], h[12:16], h[16:20], h[20:])
}

// Partitions is the partition count groups are mapped over.
func (c *Coordinator) Partitions() int32 { return c.partitionCount.Load() }

// PartitionFor is the offsets partition of group.
func (c *Coordinator) PartitionFor(group string) int32 {
	return PartitionFor(group, c.partitionCount.Load())
}

// UsePartitionCount adopts the partition count of an existing
// __consumer_offsets (which wins over offsets.topic.num.partitions, as in
// Kafka). Ignored while partitions are led: the mapping of loaded groups
// must not change under them.
func (c *Coordinator) UsePartitionCount(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n < 1 || n == c.partitionCount.Load() {
		return
	}
	if len(c.mu.partitions) > 0 {
		c.log.Error("__consumer_offsets changed its partition count while led; keeping the old mapping",
			"partitions", c.partitionCount.Load(), "topic_partitions", n)
		return
	}
	c.partitionCount.Store(n)
}

// Start runs the clock and the offsets expiry.
func (c *Coordinator) Start() {
	c.loops.Add(2)
	go c.loop(c.cfg.TickInterval, func(now int64) {
		c.mu.machine.Tick(now)
		c.tickConsumersLocked(now)
	})
	go c.expireLoop()
}

// expireLoop removes expired offsets and offsets of deleted topics.
func (c *Coordinator) expireLoop() {
	defer c.loops.Done()
	t := time.NewTicker(c.cfg.OffsetsRetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.lifetime.Done():
			return
		case <-t.C:
		}
		c.expire("")
	}
}

// expire runs ExpireOffsets, with deleted (if not empty) counted as gone,
// then deletes the consumer-protocol groups left empty and offset-less.
// Topic existence is asked before taking mu (lock order, see Coordinator).
func (c *Coordinator) expire(deleted string) {
	c.mu.Lock()
	topics := c.mu.machine.Topics()
	c.mu.Unlock()
	exists := map[string]bool{}
	for _, t := range topics {
		exists[t] = t != deleted && c.topicExists(t)
	}
	c.mu.Lock()
	c.mu.machine.ExpireOffsetsExcept(c.nowMs(), func(t string) bool {
		e, known := exists[t]
		return e || !known // committed meanwhile: judged next time
	}, c.consumerActiveLocked)
	c.deleteExpiredConsumersLocked()
	d := c.flushLocked()
	c.mu.Unlock()
	c.complete(d)
}

// Close resigns every partition: requests waiting for a rebalance, and
// later requests, get NOT_COORDINATOR. Safe to call more than once.
func (c *Coordinator) Close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.machine.DropGroups(func(string) bool { return true }, kerr.NotCoordinator.Code)
	d := c.flushLocked()
	c.mu.partitions = map[int32]*offsetsPartition{}
	c.mu.consumers = map[string]*consumer.Group{}
	c.mu.Unlock()
	c.cancel()
	c.complete(d)
	c.loops.Wait()
}

func (c *Coordinator) loop(every time.Duration, fn func(now int64)) {
	defer c.loops.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.lifetime.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		fn(c.nowMs())
		d := c.flushLocked()
		c.mu.Unlock()
		c.complete(d)
	}
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// statusLocked is the error code for a request about group: 0 when this
// coordinator serves it. REQUIRES: mu held.
func (c *Coordinator) statusLocked(group string) int16 {
	p, ok := c.mu.partitions[c.PartitionFor(group)]
	switch {
	case !ok:
		return kerr.NotCoordinator.Code
	case !p.loaded:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return 0
}

// Status is the error code for a request about group (0: served here).
func (c *Coordinator) Status(group string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(group)
}
