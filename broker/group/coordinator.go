package group

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator"
	"github.com/strata-log/strata/broker/group/consumer"
)

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
	// partitions are the offsets partitions led here, and the partition
	// count groups are mapped over: that of __consumer_offsets once it
	// exists (as Kafka), else the config's. Its led set is guarded by mu.
	partitions *coordinator.Partitions
	loops      *coordinator.Loops

	mu struct {
		sync.Mutex
		machine *Machine
		waiters map[uint64]chan Response // request id -> its delayed answer
		nextReq uint64
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
	// logStart finds partitions' log starts for the skip check
	// (skipped.go); called without mu.
	logStart atomic.Pointer[LogStart]
	skipped  skippedCounts
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
	c.partitions = coordinator.NewPartitions(cfg.OffsetsTopicPartitions)
	c.loops = coordinator.NewLoops()
	c.mu.machine = NewMachine(mc)
	c.mu.waiters = map[uint64]chan Response{}
	c.mu.consumers = map[string]*consumer.Group{}
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
func (c *Coordinator) Partitions() int32 { return c.partitions.Count() }

// PartitionFor is the offsets partition of group.
func (c *Coordinator) PartitionFor(group string) int32 { return c.partitions.PartitionFor(group) }

// UsePartitionCount adopts the partition count of an existing
// __consumer_offsets (which wins over offsets.topic.num.partitions, as in
// Kafka). Ignored while partitions are led: the mapping of loaded groups
// must not change under them.
func (c *Coordinator) UsePartitionCount(n int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.partitions.AdoptCountLocked(n) {
		c.log.Error("__consumer_offsets changed its partition count while led; keeping the old mapping",
			"partitions", c.partitions.Count(), "topic_partitions", n)
	}
}

// Start runs the clock and the offsets expiry.
func (c *Coordinator) Start() {
	c.loops.Every(c.cfg.TickInterval, c.tick)
	c.loops.Every(c.cfg.OffsetsRetentionCheckInterval, func() { c.expire("") })
}

// tick advances the machine's and the consumer groups' logical time.
func (c *Coordinator) tick() {
	c.mu.Lock()
	now := c.nowMs()
	c.mu.machine.Tick(now)
	c.tickConsumersLocked(now)
	d := c.flushLocked()
	c.mu.Unlock()
	c.complete(d)
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
	c.mu.machine.DropGroups(func(string) bool { return true }, kerr.NotCoordinator.Code)
	d := c.flushLocked()
	c.partitions.CloseLocked()
	c.mu.consumers = map[string]*consumer.Group{}
	c.mu.Unlock()
	c.loops.Cancel()
	c.complete(d)
	c.loops.Wait()
}

func (c *Coordinator) nowMs() int64 { return c.cfg.Now().UnixMilli() }

// statusLocked is the error code for a request about group: 0 when this
// coordinator serves it. REQUIRES: mu held.
func (c *Coordinator) statusLocked(group string) int16 {
	return c.partitions.StatusLocked(group)
}

// Status is the error code for a request about group (0: served here).
func (c *Coordinator) Status(group string) int16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(group)
}
