package broker

// Wiring of the replication shell (package replication/replica; DESIGN.md
// §4): every hosted partition has a replica.Core driving its
// replication.Replica. The broker feeds it: partition states from
// metadata (replica_state.go), local appends and acks=all waits
// (replica_leader.go), follower fetches (replica_fetch.go), logical time
// (tickLoop) and the loss of its registration. It takes the Core's
// outputs that reach beyond the partition (replicaOutputs): the follower's
// fetches go to the follower Manager (follower.go), leadership changes to
// the group and transaction coordinators.
//
// Lock order: partitionManager.applyMu → partitionManager.mu →
// Core.applyMu → Core.mu → partitionState.mu (replica/doc.go). A Core's
// WithReplica never takes partitionManager.mu (leadershipChanged runs
// apart). State application still collects its work under
// partitionManager.mu and runs it after, so a follower's truncation I/O
// does not hold up lookups.

import (
	"errors"
	"time"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/replica"
)

// initReplicaShell configures the broker-wide part of the shell.
// REQUIRES: b.lifetime set, no partition open yet.
func (b *Broker) initReplicaShell() {
	b.parts.repl.Init(replica.ShellConfig{
		ReplicaID:  b.cfg.NodeID,
		LagTimeMax: b.cfg.ReplicaLagTimeMax,
		Fsync:      b.cfg.Durability == hotlog.DurabilityFsync,
		Store:      b.store,
		Lifetime:   b.lifetime,
		Logger:     b.componentLog("replica"),
	})
}

// newReplicaCore builds p's state machine (RoleNone: nobody leads until a
// state says so) over p's log.
func (b *Broker) newReplicaCore(p *partition, cfg metadata.TopicConfig) (*replica.Core, error) {
	return b.parts.repl.New(replica.Partition{Topic: p.topic, TopicID: p.topicID, Index: p.index},
		p.log, replica.MinInsync(cfg), replicaOutputs{b: b, p: p})
}

// replicaOutputs carries out a partition's Core outputs for the broker.
type replicaOutputs struct {
	b *Broker
	p *partition
}

var _ replica.Outputs = replicaOutputs{}

func (o replicaOutputs) Follow(fs replication.FetchStart) {
	if o.b.followers != nil {
		o.b.followers.Follow(followedPartition{o.p}, fs)
	}
}

func (o replicaOutputs) Query(q replication.EpochQuery) {
	if o.b.followers != nil {
		o.b.followers.Query(followedPartition{o.p}, q)
	}
}

func (o replicaOutputs) StopFollowing() {
	if o.b.followers != nil {
		o.b.followers.Stop(followedPartition{o.p})
	}
}

// LeadershipChanged re-evaluates what depends on this node leading p: the
// group coordinator for __consumer_offsets partitions and the transaction
// coordinator for __transaction_state partitions. It runs on its own
// goroutine because it takes b.parts.mu, which may be held by whoever
// waits for this replica's applyMu (lock order). The evaluation reads the
// roles when it runs and is idempotent, so evaluations running out of
// order still leave the coordinator matching the last change.
func (o replicaOutputs) LeadershipChanged() {
	b, p := o.b, o.p
	if (p.topic != group.OffsetsTopic && p.topic != txn.TopicName) || b.lifetime.Err() != nil {
		return
	}
	b.parts.repl.Go(func() {
		m := &b.parts
		m.mu.Lock()
		defer m.mu.Unlock()
		if e := m.byName[p.topic]; e != nil && e.topic.ID == p.topicID {
			b.offsetsLeadershipLocked(e)
		}
	})
}

// replicationStatus is a snapshot of p's replica (for Metadata and status).
func (p *partition) replicationStatus() replication.Status { return p.replica.Status() }

// isLeader reports whether p's replica leads now.
func (p *partition) isLeader() bool { return p.replica.IsLeader() }

// tickLoop drives logical time: every replica.TickInterval each replica
// gets Tick with the wall-clock milliseconds elapsed. It also notices a new
// registration epoch (the first one at start, or after re-registering) and
// re-applies the partition states, so no state applied before the epoch
// was known stays unled.
func (b *Broker) tickLoop() {
	defer b.loops.Done()
	t := time.NewTicker(replica.TickInterval)
	defer t.Stop()
	last := time.Now()
	var appliedEpoch int64
	for {
		select {
		case <-b.lifetime.Done():
			return
		case now := <-t.C:
			if epoch := b.registration().Epoch; epoch != appliedEpoch {
				appliedEpoch = epoch
				b.registered()
			}
			ms := now.Sub(last).Milliseconds()
			if ms <= 0 {
				continue
			}
			last = last.Add(time.Duration(ms) * time.Millisecond)
			for _, p := range b.parts.localPartitions() {
				if err := p.replica.Tick(ms); err != nil && !errors.Is(err, replica.ErrClosed) {
					b.log.Warn("replica tick", "topic", p.topic, "partition", p.index, "err", err)
				}
			}
		}
	}
}

// registrationLost: the etcd registration is gone (lease lost or not
// renewed in time). Every leading replica steps down now, before the lease
// can expire on the server: acks=all waiters get NOT_LEADER_OR_FOLLOWER,
// and produce and fetch answer NOT_LEADER_OR_FOLLOWER until the controller
// elects again (the lost registration's Lost channel is closed, so no
// state naming it is led again: see metadata.Registrar.Leads).
func (b *Broker) registrationLost() {
	for _, p := range b.parts.localPartitions() {
		if err := p.replica.StepDownIfLeader(); err != nil && !errors.Is(err, replica.ErrClosed) {
			b.log.Error("stepping down after registration loss", "topic", p.topic, "partition", p.index, "err", err)
		}
	}
}

// registered: a new registration (b.registration()) is live; re-apply the
// partition states (a broker leads only states whose LeaderBrokerEpoch is
// its registration epoch).
func (b *Broker) registered() {
	m := &b.parts
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	var work []replicaUpdate
	m.mu.RLock()
	for _, e := range m.byName {
		work = append(work, replicaUpdates(e)...)
	}
	m.mu.RUnlock()
	m.applyReplicaUpdates(work)
}

// ReplicaStats are the replication shell's broker-wide counters.
type ReplicaStats struct {
	// MissedProgress counts leader log progress (an append or a flush)
	// that the log watcher had not reported to the replica for a whole
	// tick, so that the tick's safety net reported it: each is a wake-up
	// that acks=all producers and long polls waited for in vain.
	MissedProgress uint64
	// ReassignmentsLed is the partitions this broker leads that are being
	// reassigned; ReassignmentBytesOut the record bytes it served, as
	// leader, to replicas being added (what moves copy: the hot tail).
	ReassignmentsLed     int
	ReassignmentBytesOut uint64
	// MoveDurations are the completed moves this broker led at their end:
	// cumulative counts per MoveDurationBuckets bound, sum of seconds, count.
	MoveDurations     []uint64
	MoveDurationSum   float64
	MoveDurationCount uint64
}

// ReplicaStats returns the replication shell's counters.
func (b *Broker) ReplicaStats() ReplicaStats {
	stats := ReplicaStats{MissedProgress: b.parts.repl.Stats().MissedProgress,
		ReassignmentBytesOut: b.metrics.moveBytesOut.Load()}
	stats.MoveDurations, stats.MoveDurationSum, stats.MoveDurationCount = b.metrics.moveDurations.snapshot()
	for _, p := range b.parts.localPartitions() {
		if p.isLeader() && p.replicatedState().Reassigning() {
			stats.ReassignmentsLed++
		}
	}
	return stats
}
