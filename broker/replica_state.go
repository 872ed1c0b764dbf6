package broker

// Applying partition states from metadata to the replicas (the contract's
// RULE): broker N leads partition P iff state.Leader == N and
// state.LeaderBrokerEpoch is N's live registration epoch. A state naming
// another live leader makes this replica its follower; anything else (no
// leader, this node named by a stale registration, not a replica any more)
// makes it stop leading and fetching. replica.Core.ApplyState does the
// driving; this file decides the RULE and prepares a leader's log.

import (
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/follower"
	"github.com/strata-log/strata/replication/replica"
)

// replicaUpdate is one state to apply to one open partition's replica.
type replicaUpdate struct {
	p     *partition
	state metadata.PartitionState
	cfg   metadata.TopicConfig
}

// replicaUpdates lists the open partitions of e with their states.
// REQUIRES: partitionManager.mu held (read or write).
func replicaUpdates(e *topicEntry) []replicaUpdate {
	var out []replicaUpdate
	for i, p := range e.parts {
		if p != nil && i < len(e.states) {
			out = append(out, replicaUpdate{p: p, state: e.states[i], cfg: e.cfg})
		}
	}
	return out
}

// applyReplicaState drives p's replica to st (replica.Core.ApplyState).
// The registration check runs under the replica's lock, so it cannot
// interleave with registrationLost's step-down of the same partition.
func (b *Broker) applyReplicaState(p *partition, st metadata.PartitionState, cfg metadata.TopicConfig) {
	lead := leadership{b: b, p: p}
	if b.reg.Leads(st) && !p.isLeader() { // may read the bucket: before the replica mutex
		lead.restart = follower.PrepareLeaderRestart(b.lifetime, b.log, followedPartition{p}, tieredEnd(p), followerSnapshots{b})
	}
	p.replica.ApplyState(st, replica.MinInsync(cfg), lead)
}

// leadership answers the replica shell's questions while it applies a
// state to p.
type leadership struct {
	b       *Broker
	p       *partition
	restart follower.LeaderRestart // read before the replica mutex
}

var _ replica.Leadership = leadership{}

func (l leadership) Leads(st metadata.PartitionState) bool { return l.b.reg.Leads(st) }

// PrepareToLead restarts a log that ends below the tiered end there.
func (l leadership) PrepareToLead(r *replication.Replica) error {
	if r.Role() == replication.RoleLeader {
		return nil
	}
	return follower.RestartBeforeLeading(l.b.log, followedPartition{l.p}, tieredEnd(l.p), l.restart)
}

// tieredEnd is where p must restart its log before leading.
func tieredEnd(p *partition) follower.TieredEnd {
	return func(logEnd int64) (int64, bool) { return p.manifest.RestartOffset(tp(p), logEnd) }
}

// InheritedHighWatermark is the HW a replica brings into leadership: its
// own (as follower, or as leader before), or, for a replica that never had
// one since the broker started, the end of the partition's gap-free run in
// the bucket (only committed offsets are tiered). Without an HW checkpoint
// a restarted leader otherwise starts at 0 and waits for its followers.
func (l leadership) InheritedHighWatermark(r *replication.Replica) int64 {
	hw := r.HighWatermark()
	if end, ok := l.p.manifest.ContiguousEnd(l.p.topicID, l.p.index); ok {
		hw = max(hw, end)
	}
	return hw
}
