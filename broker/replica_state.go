package broker

// Applying partition states from metadata to the replicas (the contract's
// RULE): broker N leads partition P iff state.Leader == N and
// state.LeaderBrokerEpoch is N's live registration epoch. A state naming
// another live leader makes this replica its follower; anything else (no
// leader, this node named by a stale registration, not a replica any more)
// makes it stop leading and fetching.

import (
	"errors"
	"slices"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/replica"
)

// replicaUpdate is one state to apply to one open partition's replica.
type replicaUpdate struct {
	p     *partition
	state metadata.PartitionState
	cfg   metadata.TopicConfig
}

// replicaUpdates lists the open partitions of e with their states.
// REQUIRES: b.parts.mu held (read or write).
func replicaUpdates(e *topicEntry) []replicaUpdate {
	var out []replicaUpdate
	for i, p := range e.parts {
		if p != nil && i < len(e.states) {
			out = append(out, replicaUpdate{p: p, state: e.states[i], cfg: e.cfg})
		}
	}
	return out
}

// applyReplicaUpdates applies states collected under b.parts.mu, after it
// is released (WithReplica may do I/O, and its outputs take b.parts.mu).
// REQUIRES: b.parts.applyMu held (states are applied in metadata order).
func (b *Broker) applyReplicaUpdates(work []replicaUpdate) {
	for _, u := range work {
		b.applyReplicaState(u.p, u.state, u.cfg)
	}
}

// leadsState is the RULE: this broker leads st while its live
// registration (whose Lost channel is still open) has st's
// LeaderBrokerEpoch. Initial states (LeaderBrokerEpoch 0) are led by
// nobody until the controller writes them.
func (b *Broker) leadsState(st metadata.PartitionState) bool {
	if st.Leader != b.cfg.NodeID || st.LeaderBrokerEpoch == 0 {
		return false
	}
	reg := b.registration()
	if reg.Epoch != st.LeaderBrokerEpoch {
		return false
	}
	if reg.Lost != nil {
		select {
		case <-reg.Lost:
			return false
		default:
		}
	}
	return true
}

// applyReplicaState drives p's replica to st. The registration check runs
// under the replica's lock, so it cannot interleave with
// registrationLost's step-down of the same partition.
func (b *Broker) applyReplicaState(p *partition, st metadata.PartitionState, cfg metadata.TopicConfig) {
	var restart leaderRestart
	if b.leadsState(st) {
		restart = b.prepareLeaderRestart(p) // may read the bucket: before the replica mutex
	}
	err := p.replica.WithReplica(func(r *replication.Replica) error {
		if err := r.SetMinInsyncReplicas(replica.MinInsync(cfg)); err != nil {
			return err
		}
		if st.Version < p.replica.AppliedLocked().Version {
			return nil // read before a newer state was applied
		}
		p.replica.AppliedLocked().Version = st.Version
		switch {
		case b.leadsState(st):
			return b.becomeLeaderLocked(p, r, st, restart)
		case st.Leader >= 0 && st.Leader != b.cfg.NodeID && hostsReplica(st.Replicas, b.cfg.NodeID):
			return r.BecomeFollower(replication.FollowerState{
				Epoch: st.LeaderEpoch, Leader: st.Leader,
				LEO: p.log.LogEndOffset(), HighWatermark: r.HighWatermark(),
			})
		}
		return replica.StepDown(r, st.LeaderEpoch, p.log)
	})
	switch {
	case err == nil, errors.Is(err, replica.ErrClosed):
	case errors.Is(err, replication.ErrStaleEpoch):
		// An older state than the replica knows (a late event), or a
		// restarted replica asked to lead an epoch its log holds: the
		// controller raises the epoch.
		b.log.Debug("partition state not applied", "topic", p.topic, "partition", p.index,
			"leader", st.Leader, "epoch", st.LeaderEpoch, "err", err)
	default:
		b.log.Warn("applying partition state to replica", "topic", p.topic, "partition", p.index,
			"leader", st.Leader, "epoch", st.LeaderEpoch, "err", err)
	}
}

// becomeLeaderLocked feeds BecomeLeader with the local log's positions and
// remembers the state the replica then leads with (the ISR CAS base). A
// replica not leading yet whose log ends below the tiered end first
// restarts it there (restart: prepareLeaderRestart's answer).
// REQUIRES: inside p.replica.WithReplica.
func (b *Broker) becomeLeaderLocked(p *partition, r *replication.Replica, st metadata.PartitionState, restart leaderRestart) error {
	if committedProposal(r, st) {
		// The watch brought our own ISR write before the CAS answer did:
		// commit it as such (an expanded follower then counts as caught
		// up now, as ISRCommitted does, and is not dropped at the next
		// tick); the late answer finds no proposal and is ignored.
		if err := r.ISRCommitted(st.Version); err != nil {
			return err
		}
		p.replica.AppliedLocked().Led = st
		return nil
	}
	if err := b.restartAtTieredEndLocked(p, r, restart); err != nil {
		return err
	}
	durable := p.log.FlushedOffset() // first: durable <= LEO
	leo := p.log.LogEndOffset()
	err := r.BecomeLeader(replication.LeaderState{
		Epoch: st.LeaderEpoch, Version: st.Version, Replicas: st.Replicas, ISR: st.ISR,
		LEO: leo, DurableOffset: durable, HighWatermark: b.inheritedHighWatermark(p, r),
	})
	if err != nil {
		return err
	}
	if s := r.Status(); s.Role == replication.RoleLeader && s.LeaderEpoch == st.LeaderEpoch && s.Version == st.Version {
		p.replica.AppliedLocked().Led = st
		// Report through the machine, never by storing the log's positions
		// as reported: a repeated state (the same epoch and version applied
		// again, as after registering) leaves the machine as it was, and a
		// stored "reported" above what it was told would hide the progress
		// from the watcher and the tick for good (acks=all waiters then
		// time out with the data on disk).
		return p.replica.ReportLocalLogLocked(r)
	}
	return nil
}

// committedProposal reports whether st is the outcome of r's ISR proposal
// in flight: same epoch and replicas, a newer version, the proposed ISR.
func committedProposal(r *replication.Replica, st metadata.PartitionState) bool {
	s := r.Status()
	if s.Role != replication.RoleLeader || s.Proposal == nil || s.LeaderEpoch != st.LeaderEpoch ||
		st.Version <= s.Version || !slices.Equal(s.Replicas, st.Replicas) {
		return false
	}
	return sameMembers(s.Proposal.ISR, st.ISR)
}

func sameMembers(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// inheritedHighWatermark is the HW a replica brings into leadership: its
// own (as follower, or as leader before), or, for a replica that never had
// one since the broker started, the end of the partition's gap-free run in
// the bucket (only committed offsets are tiered). Without an HW checkpoint
// a restarted leader otherwise starts at 0 and waits for its followers.
func (b *Broker) inheritedHighWatermark(p *partition, r *replication.Replica) int64 {
	hw := r.HighWatermark()
	if end, ok := p.manifest.ContiguousEnd(p.topicID, p.index); ok {
		hw = max(hw, end)
	}
	return hw
}
