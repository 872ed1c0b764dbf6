package broker

// The replication shell, leader side and per-partition core (DESIGN.md §4,
// issue 5): every hosted partition drives one replication.Replica (the pure
// state machine; replication/doc.go is the spec of this shell) and carries
// out its outputs.
//
// # Ownership and lock order
//
// A partition's replicaCore holds two mutexes. applyMu serializes
// withReplica: an input, and the carrying out of the Ready it produced,
// finish before the next input starts, so outputs are applied in the
// documented order (a truncation completes before the fetch that follows
// it starts, an HW is published before the acks it completes are
// answered). mu guards the Replica itself and is held only around calls
// into it, so queries (replicationStatus) never wait for the I/O done under
// applyMu (truncation). One exception, deliberate: a leader's local append
// (appendAsLeader) runs under mu, as Kafka appends under its
// leaderIsrUpdateLock, so a batch is never stamped with an epoch this
// replica no longer leads; that is a page-cache write, never an fsync.
//
// Lock order: partitionManager.applyMu → partitionManager.mu →
// replicaCore.applyMu → replicaCore.mu → partitionState.mu. withReplica
// never takes partitionManager.mu (leadershipChanged runs apart). State
// application still collects its work under partitionManager.mu and runs
// it after, so a follower's truncation I/O does not hold up lookups.
//
// # Published values
//
// After every withReplica the HW, role and epoch are stored in atomics the
// data path reads without locks; an HW change closes the hwChanged channel
// (fetch long polls and acks=all waits select on it).

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/txn"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

// replicaTickInterval is how often every replica gets Tick (ISR shrink and
// acks=all timeouts run on logical time).
const replicaTickInterval = 100 * time.Millisecond

// errPartitionClosed: the partition's log was closed or removed.
var errPartitionClosed = errors.New("broker: partition closed")

// replicaCore is one partition's replication state machine and what the
// shell publishes from it. See the file comment for the locking.
type replicaCore struct {
	owner *Broker // the shell; read-only

	applyMu sync.Mutex
	retired bool // guarded by applyMu: the partition closed; inputs are refused
	// fetching is true from a carried-out EpochQuery or Fetch until the
	// followers are told to stop (guarded by applyMu), so a leader's hot
	// path never touches the follower Manager.
	fetching bool

	mu sync.Mutex
	r  *replication.Replica // guarded by mu
	// led is the partition state the replica leads with, updated by
	// accepted BecomeLeader inputs and committed ISR changes: the base of
	// the next ISR compare-and-swap. Guarded by mu.
	led metadata.PartitionState
	// appliedVersion is the newest partition-state version applied (or
	// written by this leader); older states are stale and ignored.
	// Guarded by mu.
	appliedVersion int64

	// Published after each withReplica; read lock-free.
	hw    atomic.Int64
	role  atomic.Int32 // replication.Role
	epoch atomic.Int32
	// reportedLEO and reportedFlushed are the local log positions last
	// reported to a leading replica (Append/Flushed), so the log watcher
	// can skip taking the locks when nothing moved.
	reportedLEO, reportedFlushed atomic.Int64
	// behind is the tick's note of a report the watcher still owed (see
	// reportMissedProgressLocked). Guarded by mu.
	behind owedReport

	hwChanged signal
	// leading has a pending token after the replica became leader: the log
	// watcher skips changes while the published role is not leader, so a
	// change in between (after the new leader's own report, before the
	// role is published) would wait for the next one. Capacity 1.
	leading chan struct{}
	// stop is closed when the partition closes; it ends its log watcher.
	stop     chan struct{}
	stopOnce sync.Once
}

// signal is a broadcast: wait returns a channel closed at the next
// broadcast.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// newReplicaCore builds a partition's state machine (RoleNone: nobody
// leads until a state says so).
func (b *Broker) newReplicaCore(l *hotlog.Log, cfg metadata.TopicConfig) (*replicaCore, error) {
	r, err := replication.New(replication.Config{
		ReplicaID:           b.cfg.NodeID,
		ReplicaLagTimeMaxMs: max(b.cfg.ReplicaLagTimeMax.Milliseconds(), 1),
		MinInsyncReplicas:   minInsync(cfg),
		FsyncDurability:     b.cfg.Durability == hotlog.DurabilityFsync,
	}, l)
	if err != nil {
		return nil, err
	}
	c := &replicaCore{owner: b, r: r, stop: make(chan struct{}), leading: make(chan struct{}, 1)}
	c.behind.mark = -1
	c.role.Store(int32(replication.RoleNone))
	c.epoch.Store(-1)
	c.reportedLEO.Store(-1)
	c.reportedFlushed.Store(-1)
	return c, nil
}

// minInsync bounds a topic's min.insync.replicas to what the machine accepts.
func minInsync(cfg metadata.TopicConfig) int {
	return int(min(max(cfg.MinInsyncReplicas, 1), replication.MaxReplicas))
}

// withReplica runs fn on p's replica, then carries out the Ready it left,
// in the order replication/doc.go prescribes, and publishes the HW, role
// and epoch. fn's error is returned (the replica's outputs are carried out
// either way). errPartitionClosed once the partition closed.
func (b *Broker) withReplica(p *partition, fn func(r *replication.Replica) error) error {
	c := p.replica
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	if c.retired {
		return errPartitionClosed
	}
	c.mu.Lock()
	wasLeader := c.r.Role() == replication.RoleLeader
	err := fn(c.r)
	var rd replication.Ready
	hasReady := c.r.HasReady()
	if hasReady {
		rd = c.r.Ready()
		c.r.Advance(rd)
	}
	role, epoch := c.r.Role(), c.r.LeaderEpoch()
	following := role == replication.RoleFollower && c.r.Status().Leader >= 0
	base := c.led
	c.mu.Unlock()
	c.role.Store(int32(role))
	c.epoch.Store(epoch)
	if hasReady {
		b.carryOut(p, rd, base)
	}
	if c.fetching && !following {
		c.fetching = false
		b.stopFollowing(p)
	}
	if wasLeader != (role == replication.RoleLeader) {
		if !wasLeader {
			select {
			case c.leading <- struct{}{}:
			default: // a token is pending already
			}
		}
		b.leadershipChanged(p)
	}
	return err
}

// carryOut applies one Ready in doc order. base is the state the replica
// leads with (for the proposal's CAS).
// REQUIRES: p.replica.applyMu held.
func (b *Broker) carryOut(p *partition, rd replication.Ready, base metadata.PartitionState) {
	c := p.replica
	if rd.HighWatermarkChanged {
		c.hw.Store(max(rd.HighWatermark, 0))
		c.hwChanged.broadcast()
	}
	if rd.Proposal != nil {
		b.proposeISR(p, *rd.Proposal, base)
	}
	b.parts.repl.acks.complete(rd.Acks)
	if rd.Fenced {
		b.log.Warn("ISR change rejected: deposed as leader", "topic", p.topic, "partition", p.index)
	}
	if rd.Truncate != nil {
		b.truncateFollower(p, rd.Truncate.Offset)
	}
	if b.followers == nil {
		return
	}
	if rd.EpochQuery != nil {
		c.fetching = true
		b.followers.Query(followedPartition{p}, *rd.EpochQuery)
	}
	if rd.Fetch != nil {
		c.fetching = true
		b.followers.Follow(followedPartition{p}, *rd.Fetch)
	}
}

// truncateFollower drops the log from offset on (KIP-101). A failure
// fences the log (sticky, hotlog); it is logged, and the follower's next
// append fails until the log is reopened.
func (b *Broker) truncateFollower(p *partition, offset int64) {
	before := p.log.LogEndOffset()
	if err := p.log.Truncate(offset); err != nil {
		b.log.Error("follower truncation failed", "topic", p.topic, "partition", p.index, "offset", offset, "err", err)
		return
	}
	b.log.Info("follower truncated", "topic", p.topic, "partition", p.index, "offset", offset, "leo_before", before)
}

// stopFollowing tells the followers to drop p (no-op when not following it).
func (b *Broker) stopFollowing(p *partition) {
	if b.followers != nil {
		b.followers.Stop(followedPartition{p})
	}
}

// leadershipChanged re-evaluates what depends on this node leading p: the
// group coordinator for __consumer_offsets partitions and the transaction
// coordinator for __transaction_state partitions. It runs on its own
// goroutine because it takes b.parts.mu, which may be held by whoever
// waits for this replica's applyMu (lock order). The evaluation reads the
// roles when it runs and is idempotent, so evaluations running out of
// order still leave the coordinator matching the last change.
func (b *Broker) leadershipChanged(p *partition) {
	if (p.topic != group.OffsetsTopic && p.topic != txn.TopicName) || b.lifetime.Err() != nil {
		return
	}
	b.parts.repl.bg.Add(1)
	go func() {
		defer b.parts.repl.bg.Done()
		m := &b.parts
		m.mu.Lock()
		defer m.mu.Unlock()
		if e := m.byName[p.topic]; e != nil && e.topic.ID == p.topicID {
			b.offsetsLeadershipLocked(e)
		}
	}()
}

// replicationStatus is a snapshot of p's replica (for Metadata and status).
func (p *partition) replicationStatus() replication.Status {
	c := p.replica
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.r.Status()
}

// isLeader reports whether p's replica leads now.
func (p *partition) isLeader() bool {
	return replication.Role(p.replica.role.Load()) == replication.RoleLeader
}

// startLogWatcher starts the goroutine that reports p's local log
// progress to its replica while it leads: the flusher's progress
// (Flushed, fsync durability) and appends that bypass appendAsLeader.
func (b *Broker) startLogWatcher(p *partition) {
	b.parts.repl.bg.Add(1)
	go func() {
		defer b.parts.repl.bg.Done()
		for {
			ch := p.log.Changed()
			if p.isLeader() {
				b.reportLocalLog(p)
			}
			select {
			case <-ch:
			case <-p.replica.leading:
			case <-p.replica.stop:
				return
			case <-b.lifetime.Done():
				return
			}
		}
	}()
}

// reportLocalLog feeds a leader's LEO and flushed offset to its replica.
// Both are read under the replica's lock, so successive reports never go
// backwards (a leader's log only grows).
func (b *Broker) reportLocalLog(p *partition) {
	c := p.replica
	fsync := b.cfg.Durability == hotlog.DurabilityFsync
	if (!fsync || p.log.FlushedOffset() <= c.reportedFlushed.Load()) && p.log.LogEndOffset() <= c.reportedLEO.Load() {
		return
	}
	err := b.withReplica(p, func(r *replication.Replica) error {
		if r.Role() != replication.RoleLeader {
			return nil
		}
		return b.reportLocalLogLocked(p, r)
	})
	if err != nil && !errors.Is(err, errPartitionClosed) {
		b.log.Warn("reporting log progress to replication", "topic", p.topic, "partition", p.index, "err", err)
	}
}

// reportLocalLogLocked: REQUIRES p.replica.mu held and r leading.
func (b *Broker) reportLocalLogLocked(p *partition, r *replication.Replica) error {
	flushed := p.log.FlushedOffset() // first: flushed <= LEO read after it
	leo := p.log.LogEndOffset()
	if err := r.Append(leo); err != nil {
		return err
	}
	p.replica.reportedLEO.Store(leo)
	if b.cfg.Durability != hotlog.DurabilityFsync {
		return nil
	}
	if err := r.Flushed(flushed); err != nil {
		return err
	}
	p.replica.reportedFlushed.Store(flushed)
	return nil
}

// retireReplica ends p's replication when its log closes: a leader's
// acks=all waiters are answered NOT_LEADER_OR_FOLLOWER, fetching stops,
// the log watcher ends, and later inputs get errPartitionClosed. It does
// not call back into the partition manager (callers may hold its lock).
func (b *Broker) retireReplica(p *partition) {
	c := p.replica
	c.stopOnce.Do(func() { close(c.stop) })
	c.applyMu.Lock()
	defer c.applyMu.Unlock()
	if c.retired {
		return
	}
	c.retired = true
	c.mu.Lock()
	_ = stepDown(c.r, c.r.LeaderEpoch(), p.log)
	var acks []replication.AckResult
	if c.r.HasReady() {
		rd := c.r.Ready()
		c.r.Advance(rd)
		acks = rd.Acks
	}
	c.mu.Unlock()
	c.role.Store(int32(replication.RoleNone))
	b.parts.repl.acks.complete(acks)
	b.stopFollowing(p)
}

// tickLoop drives logical time: every replicaTickInterval each replica
// gets Tick with the wall-clock milliseconds elapsed. It also notices a new
// registration epoch (the first one at start, or after re-registering) and
// re-applies the partition states, so no state applied before the epoch
// was known stays unled.
func (b *Broker) tickLoop() {
	defer b.loops.Done()
	t := time.NewTicker(replicaTickInterval)
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
			b.tickReplicas(ms)
		}
	}
}

func (b *Broker) tickReplicas(ms int64) {
	for _, p := range b.parts.localPartitions() {
		err := b.withReplica(p, func(r *replication.Replica) error {
			if err := b.reportMissedProgressLocked(p, r); err != nil {
				return err
			}
			return r.Tick(ms)
		})
		if err != nil && !errors.Is(err, errPartitionClosed) {
			b.log.Warn("replica tick", "topic", p.topic, "partition", p.index, "err", err)
		}
	}
}

// owedReport is a leader's log progress the tick found unreported: mark
// identifies what had been reported then (reportedLEO+reportedFlushed; -1:
// nothing owed) and since is when the tick first saw it.
type owedReport struct {
	mark  int64
	since time.Time
}

// reportMissedProgressLocked is a safety net under the log watcher: a
// leader whose log has been ahead of what its replica was told for a whole
// tick interval of wall time (a change the watcher did not report) reports
// it now, so acks=all waiters and consumers never wait for a notification
// that will not come. Wall time, not the count of ticks: a tick loop held
// up by one slow partition checks the next ones twice in quick succession,
// and progress made just before both checks is no miss. It counts and logs
// when it reports (ReplicaStats.MissedProgress): the watcher should make
// it unnecessary, so a count above zero is a bug.
// REQUIRES: p.replica.mu held.
func (b *Broker) reportMissedProgressLocked(p *partition, r *replication.Replica) error {
	c := p.replica
	if r.Role() != replication.RoleLeader {
		c.behind.mark = -1
		return nil
	}
	ahead := max(p.log.LogEndOffset()-c.reportedLEO.Load(), 0)
	if b.cfg.Durability == hotlog.DurabilityFsync {
		ahead = max(ahead, p.log.FlushedOffset()-c.reportedFlushed.Load())
	}
	if ahead == 0 {
		c.behind.mark = -1
		return nil
	}
	now := time.Now()
	if mark := c.reportedLEO.Load() + c.reportedFlushed.Load(); c.behind.mark != mark {
		c.behind = owedReport{mark: mark, since: now} // behind since now only: the watcher may be on it
		return nil
	}
	if now.Sub(c.behind.since) < replicaTickInterval {
		return nil
	}
	b.parts.repl.missedProgress.Add(1)
	b.log.Warn("log progress not reported by the watcher; reporting from the tick", "topic", p.topic, "partition", p.index,
		"leo", p.log.LogEndOffset(), "flushed", p.log.FlushedOffset(), "reported_leo", c.reportedLEO.Load(),
		"reported_flushed", c.reportedFlushed.Load(), "behind_for", now.Sub(c.behind.since))
	return b.reportLocalLogLocked(p, r)
}

// registrationLost: the etcd registration is gone (lease lost or not
// renewed in time). Every leading replica steps down now, before the lease
// can expire on the server: acks=all waiters get NOT_LEADER_OR_FOLLOWER,
// and produce and fetch answer NOT_LEADER_OR_FOLLOWER until the controller
// elects again (the lost registration's Lost channel is closed, so no
// state naming it is led again: see leadsState).
func (b *Broker) registrationLost() {
	for _, p := range b.parts.localPartitions() {
		err := b.withReplica(p, func(r *replication.Replica) error {
			if r.Role() != replication.RoleLeader {
				return nil
			}
			return stepDown(r, r.LeaderEpoch(), p.log)
		})
		if err != nil && !errors.Is(err, errPartitionClosed) {
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
	b.applyReplicaUpdates(work)
}

// ackPurgatory holds the produce requests waiting for acks=all, keyed by
// the AckWaiter ID given to the replica. A waiter's channel gets exactly
// one result (buffered), from the Ready that completes it.
type ackPurgatory struct {
	next    atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]chan error // guarded by mu
}

// register returns a new waiter id and its result channel.
func (a *ackPurgatory) register() (uint64, chan error) {
	id := a.next.Add(1)
	ch := make(chan error, 1)
	a.mu.Lock()
	if a.waiting == nil {
		a.waiting = map[uint64]chan error{}
	}
	a.waiting[id] = ch
	a.mu.Unlock()
	return id, ch
}

// forget drops a waiter whose request no longer waits.
func (a *ackPurgatory) forget(id uint64) {
	a.mu.Lock()
	delete(a.waiting, id)
	a.mu.Unlock()
}

// complete answers the waiters of a Ready's Acks (unknown ids: their
// request already gave up).
func (a *ackPurgatory) complete(acks []replication.AckResult) {
	if len(acks) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, ack := range acks {
		if ch, ok := a.waiting[ack.ID]; ok {
			ch <- ack.Err
			delete(a.waiting, ack.ID)
		}
	}
}

// replicaManager is the broker-wide part of the replication shell.
type replicaManager struct {
	acks ackPurgatory
	// bg counts the shell's goroutines (log watchers, ISR CAS writers);
	// they end with b.lifetime and closeAll waits for them.
	bg sync.WaitGroup
	// missedProgress counts the tick's reports of log progress the watcher
	// had not reported for a whole tick (reportMissedProgressLocked).
	missedProgress atomic.Uint64
}

// ReplicaStats are the replication shell's broker-wide counters.
type ReplicaStats struct {
	// MissedProgress counts leader log progress (an append or a flush)
	// that the log watcher had not reported to the replica for a whole
	// tick, so that the tick's safety net reported it: each is a wake-up
	// that acks=all producers and long polls waited for in vain.
	MissedProgress uint64
}

// ReplicaStats returns the replication shell's counters.
func (b *Broker) ReplicaStats() ReplicaStats {
	return ReplicaStats{MissedProgress: b.parts.repl.missedProgress.Load()}
}

// waitBackground waits for the shell's goroutines, at most d.
func (m *replicaManager) waitBackground(d time.Duration) {
	waitTimeout(&m.bg, d)
}
