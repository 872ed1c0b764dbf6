package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/datadir"
	"github.com/strata-log/strata/compaction"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication/replica"
	"github.com/strata-log/strata/tier"
)

// maxPartitions bounds a topic's partition count from a request before
// anything is allocated for it.
const maxPartitions = 100_000

// partition is one local replica: the log and what the data path needs.
// Owned by the partition registry (partitionManager); handlers reach one
// through b.parts.lookup / lookupByID (a Kafka error code when not found or
// not led here) and only call its methods: highWatermark, lastStableOffset,
// leaderEpoch, config, changed (closed when the HW moves), isLeader,
// waitHighWatermark, logStartOffset (across both tiers) and
// localLogStartOffset.
type partition struct {
	topic   string
	topicID metadata.TopicID
	index   int32
	log     *hotlog.Log
	// manifest is the broker's tier manifest (never nil); tier_wiring.go
	// derives the partition's global log start from it.
	manifest *tier.Manifest
	// uploadLag is the bytes of sealed segments not yet tiered, as of the
	// uploader's last look (written by the uploader, read by Produce).
	uploadLag atomic.Int64
	// cleaned is the log cleaner's memory of this partition (its
	// checkpoints in the bucket, its totals for metrics and status); only
	// the cleaner writes it.
	cleaned compaction.PartitionState
	// self is this broker's node id (the replica's id).
	self int32
	// replica is the partition's replication state machine and what the
	// shell publishes from it (replication/replica, wired in replica.go).
	// Set at open, never nil.
	replica *replica.Core
	// state is the mutable part (config, leader epoch, ...), below.
	partitionState
}

// partitionState is the mutable part of a partition.
type partitionState struct {
	durability hotlog.Durability
	mu         sync.Mutex
	state      metadata.PartitionState // guarded by mu
	cfg        metadata.TopicConfig    // guarded by mu
}

// highWatermark is what consumers may read up to (exclusive): the HW
// published by the partition's replica (replication/replica). Leader: the minimum
// LEO over the ISR, where the leader's own is its flushed offset with
// fsync durability; follower: the leader's HW as last fetched, capped by
// the local LEO. A single replica is its own ISR, so HW = flushed offset
// (fsync) or LEO (replication durability).
func (p *partition) highWatermark() int64 { return p.replica.HighWatermark() }

// lastStableOffset is Kafka's LSO: min(first offset of the earliest open
// transaction, HW). read_committed reads and ListOffsets stop there. The
// HW is read first: both only move up while the replica leads, so the
// replicatedState is the partition's replicated state as last applied.
func (p *partition) replicatedState() metadata.PartitionState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// result never exceeds the HW read.
func (p *partition) lastStableOffset() int64 {
	hw := p.highWatermark()
	if first, ok := p.log.FirstUnstableOffset(); ok && first < hw {
		return first
	}
	return hw
}

func (p *partition) leaderEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state.LeaderEpoch
}

func (p *partition) config() metadata.TopicConfig {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// leader is the partition's leader as this node serves it: this node while
// its replica leads; otherwise the state's leader if that is another node,
// else -1 (a state naming this node that it does not lead: an initial
// state, a stale registration, a fenced leader).
func (p *partition) leader() int32 {
	if p.isLeader() {
		return p.self
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Leader == p.self {
		return -1
	}
	return p.state.Leader
}

// changed is closed the next time the published HW moves (what a
// consumer's long poll waits for).
func (p *partition) changed() <-chan struct{} { return p.replica.HWChanged() }

// waitHighWatermark blocks until highWatermark() > offset or ctx ends.
func (p *partition) waitHighWatermark(ctx context.Context, offset int64) error {
	for {
		ch := p.changed()
		if p.highWatermark() > offset {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// topicEntry mirrors one topic. Guarded by partitionManager.mu.
type topicEntry struct {
	topic  metadata.Topic
	cfg    metadata.TopicConfig
	states []metadata.PartitionState // by partition index; len == len(topic.Replicas)
	parts  []*partition              // by partition index; nil where this node holds no replica
}

// partitionManager is the partition registry: the broker's mirror of the
// topics and partition states in metadata, and the owner of the local
// partitions (their directories, logs and replicas). It keeps the mirror in
// step with metadata (partitions_sync.go) and answers the handlers' lookups.
// What it needs from the rest of the broker comes in through registryDeps.
//
// Lock order: applyMu, then mu. applyMu serializes every change to the
// mirror (metadata application, deletes) and is held while logs are opened,
// which can take long (recovery, fsyncs); mu is held only briefly, so
// lookups by request handlers never wait for a log to open.
//
// Invariants (under mu): byName and byID index the same entries; an id in
// deleted is never in byID again; a non-nil entry of parts has an open log
// and a replica that is not retired.
type partitionManager struct {
	applyMu sync.Mutex
	mu      sync.RWMutex
	byName  map[string]*topicEntry
	byID    map[metadata.TopicID]*topicEntry
	deleted map[metadata.TopicID]struct{} // ids this broker saw deleted
	// repl is the broker-wide part of the replication shell
	// (replication/replica); not reset by init.
	repl replica.Shell
	// deps and layout are set by configure before the first partition
	// opens and are read-only afterwards.
	deps   registryDeps
	layout datadir.Layout
}

// registryDeps is what the registry needs from the rest of the broker.
type registryDeps struct {
	// node is this broker's id: which replicas are local, and which
	// partitions lookups find (those whose replica leads here).
	node int32
	// dataDir holds one directory per local partition, <topic>-<index>.
	dataDir              string
	durability           hotlog.Durability
	flushInterval        time.Duration
	producerIDExpiration time.Duration
	// manifest is the tier manifest each partition derives its global log
	// start from (never nil).
	manifest *tier.Manifest
	// tiered reports whether a topic's sealed segments go to the bucket
	// (its local log then keeps only the hot tail).
	tiered   func(topic string, cfg metadata.TopicConfig) bool
	replicas replicaDriver
	coords   coordinatorHooks
	// moveDone is told how long each reassignment this broker leads at
	// its completion took (nil: not told).
	moveDone func(time.Duration)
	log      *slog.Logger
}

// replicaDriver builds and drives the replicas of local partitions (the
// replication shell's wiring, replica*.go).
type replicaDriver interface {
	// newReplicaCore builds p's replica over p's log (leading nobody yet).
	newReplicaCore(p *partition, cfg metadata.TopicConfig) (*replica.Core, error)
	// applyReplicaState drives p's replica to st. Called without mu held
	// (it may do I/O, and the replica's outputs take mu).
	applyReplicaState(p *partition, st metadata.PartitionState, cfg metadata.TopicConfig)
}

// coordinatorHooks tell the group and transaction coordinators about the
// internal topics they live on. Both are idempotent.
type coordinatorHooks interface {
	// offsetsLeadershipLocked re-evaluates which partitions of e this node
	// leads. REQUIRES: mu held.
	offsetsLeadershipLocked(e *topicEntry)
	// offsetsTopicRemovedLocked: e was deleted; stop using its logs.
	// REQUIRES: mu held for writing.
	offsetsTopicRemovedLocked(e *topicEntry)
}

// The broker is the registry's replica driver (replica*.go) and relays its
// coordinator hooks (groups.go, txn_wiring.go).
var (
	_ replicaDriver    = (*Broker)(nil)
	_ coordinatorHooks = (*Broker)(nil)
)

// configure sets the registry's dependencies.
// REQUIRES: no partition open yet.
func (m *partitionManager) configure(deps registryDeps) {
	m.deps, m.layout = deps, dataLayout(deps.dataDir)
}

func (m *partitionManager) init() {
	m.byName = map[string]*topicEntry{}
	m.byID = map[metadata.TopicID]*topicEntry{}
	m.deleted = map[metadata.TopicID]struct{}{}
}

// topicView is a copy of a topic's mirror for handlers.
type topicView struct {
	topic  metadata.Topic
	cfg    metadata.TopicConfig
	states []metadata.PartitionState
}

func (e *topicEntry) view() topicView {
	return topicView{topic: e.topic, cfg: e.cfg, states: slices.Clone(e.states)}
}

func (m *partitionManager) topic(name string) (topicView, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.byName[name]
	if !ok {
		return topicView{}, false
	}
	return e.view(), true
}

func (m *partitionManager) topicByID(id metadata.TopicID) (topicView, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.byID[id]
	if !ok {
		return topicView{}, false
	}
	return e.view(), true
}

// allTopics lists every topic, sorted by name.
func (m *partitionManager) allTopics() []topicView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]topicView, 0, len(m.byName))
	for _, e := range m.byName {
		out = append(out, e.view())
	}
	slices.SortFunc(out, func(a, b topicView) int { return compareStrings(a.topic.Name, b.topic.Name) })
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// localPartitions lists every open partition.
func (m *partitionManager) localPartitions() []*partition {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []*partition
	for _, e := range m.byName {
		for _, p := range e.parts {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// closeAll retires every replica and closes every log (shutdown, after
// the broker's lifetime ended, so the shell's goroutines are ending), then
// waits for those goroutines (some may need m.mu to finish).
func (m *partitionManager) closeAll(log *slog.Logger) error {
	err := m.closeLogs(log)
	m.repl.WaitBackground(5 * time.Second)
	return err
}

func (m *partitionManager) closeLogs(log *slog.Logger) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, e := range m.byName {
		for _, p := range e.parts {
			if p == nil {
				continue
			}
			p.replica.Retire()
			if err := p.log.Close(); err != nil && !errors.Is(err, hotlog.ErrClosed) {
				log.Error("closing log", "topic", p.topic, "partition", p.index, "err", err)
				errs = append(errs, err)
			}
		}
	}
	m.init()
	return errors.Join(errs...)
}

// lookup finds partition index of topic where this node's replica leads;
// the code is UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER when it
// does not (0 when found).
func (m *partitionManager) lookup(topic string, index int32) (*partition, int16) {
	m.mu.RLock()
	e, ok := m.byName[topic]
	m.mu.RUnlock()
	if !ok {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	return m.lookupIn(e, index)
}

// hosted finds partition index of topic where this node holds a replica,
// leader or follower.
func (m *partitionManager) hosted(topic string, index int32) (*partition, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.byName[topic]
	if !ok || index < 0 || int(index) >= len(e.parts) || e.parts[index] == nil {
		return nil, false
	}
	return e.parts[index], true
}

// lookupByID is lookup by topic id (UNKNOWN_TOPIC_ID for an unknown id).
func (m *partitionManager) lookupByID(id metadata.TopicID, index int32) (*partition, int16) {
	m.mu.RLock()
	e, ok := m.byID[id]
	m.mu.RUnlock()
	if !ok {
		return nil, kerr.UnknownTopicID.Code
	}
	return m.lookupIn(e, index)
}

// lookupIn finds a partition this node leads.
func (m *partitionManager) lookupIn(e *topicEntry, index int32) (*partition, int16) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if index < 0 || int(index) >= len(e.parts) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	p := e.parts[index]
	if p == nil || p.leader() != m.deps.node {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
}

func (m *partitionManager) topicName(id metadata.TopicID) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.byID[id]
	if !ok {
		return "", false
	}
	return e.topic.Name, true
}

func (m *partitionManager) topicID(name string) (metadata.TopicID, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.byName[name]
	if !ok {
		return metadata.TopicID{}, false
	}
	return e.topic.ID, true
}

// retentionLoop applies retention to every local log each interval.
func (b *Broker) retentionLoop() {
	defer b.loops.Done()
	t := time.NewTicker(b.cfg.RetentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-b.lifetime.Done():
			return
		case now := <-t.C:
			b.tiering.ApplyRetention(b.lifetime, now)
		}
	}
}

// logConfig maps a topic's effective configs to a log's.
func (m *partitionManager) logConfig(topic string, index int32, cfg metadata.TopicConfig) hotlog.Config {
	retentionMs, retentionBytes := cfg.RetentionMs, cfg.RetentionBytes
	if !cfg.HasDelete() {
		retentionMs, retentionBytes = -1, -1
	}
	// A tiered partition keeps only its hot tail (local.retention.*) on
	// disk, compacted or not (the bucket keeps the rest); tier retention
	// also never deletes what the manifest lacks. __consumer_offsets keeps
	// its untiered retention (keepsLocalLog).
	if m.deps.tiered(topic, cfg) && !keepsLocalLog(topic) {
		retentionMs, retentionBytes = cfg.EffectiveLocalRetentionMs(), cfg.EffectiveLocalRetentionBytes()
	}
	return hotlog.Config{
		Dir:                  m.partitionDir(topic, index),
		SegmentBytes:         cfg.SegmentBytes,
		SegmentMs:            time.Duration(cfg.SegmentMs) * time.Millisecond,
		IndexIntervalBytes:   int(cfg.IndexIntervalBytes),
		RetentionMs:          time.Duration(retentionMs) * time.Millisecond,
		RetentionBytes:       retentionBytes,
		Durability:           m.deps.durability,
		FlushInterval:        m.deps.flushInterval,
		ProducerIDExpiration: m.deps.producerIDExpiration,
		Logger:               m.deps.log.With("topic", topic, "partition", index),
	}
}

// hostsReplica reports whether replicas holds node.
func hostsReplica(replicas []int32, node int32) bool { return slices.Contains(replicas, node) }

// defaultState is the state CreateTopic writes for a new partition; used
// until the real one is known.
func defaultState(replicas []int32) metadata.PartitionState {
	leader := int32(-1)
	if len(replicas) > 0 {
		leader = replicas[0]
	}
	return metadata.PartitionState{Leader: leader, Replicas: replicas, ISR: replicas}
}

var errUnknownTopic = fmt.Errorf("broker: %w", metadata.ErrTopicNotFound)
