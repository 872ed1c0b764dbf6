package replica

// Applying a partition state from metadata to the replica: lead it when
// the consumer's rule says this broker leads st, follow st's leader when
// this broker is another replica of it, else neither lead nor fetch.

import (
	"errors"
	"slices"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

// Leadership is what applying a partition state needs from the consumer.
// Its methods are called inside WithReplica (the Core's mu held).
type Leadership interface {
	// Leads is the consumer's rule: this broker leads st now. Asked under
	// the replica's lock, so it cannot interleave with a StepDownIfLeader
	// of the same partition.
	Leads(st metadata.PartitionState) bool
	// PrepareToLead readies the local log before r, not leading yet,
	// becomes leader (e.g. restarting a log that ends below the tiered
	// end). REQUIRES: inside WithReplica.
	PrepareToLead(r *replication.Replica) error
	// InheritedHighWatermark is the HW r brings into leadership (at least
	// r.HighWatermark()).
	InheritedHighWatermark(r *replication.Replica) int64
}

// ApplyState drives the replica to st, a partition state from metadata.
// States older than one applied before are ignored; errors are logged
// (a stale epoch at Debug: the controller raises the epoch).
func (c *Core) ApplyState(st metadata.PartitionState, minInsync int, lead Leadership) {
	err := c.WithReplica(func(r *replication.Replica) error {
		if err := r.SetMinInsyncReplicas(minInsync); err != nil {
			return err
		}
		if st.Version < c.applied.Version {
			return nil // read before a newer state was applied
		}
		c.applied.Version = st.Version
		self := c.shell.cfg.ReplicaID
		switch {
		case lead.Leads(st):
			return c.BecomeLeaderLocked(r, st, lead)
		case st.Leader >= 0 && st.Leader != self && slices.Contains(st.Replicas, self):
			return r.BecomeFollower(replication.FollowerState{
				Epoch: st.LeaderEpoch, Leader: st.Leader,
				LEO: c.log.LogEndOffset(), HighWatermark: r.HighWatermark(),
			})
		}
		return StepDown(r, st.LeaderEpoch, c.log)
	})
	log := c.shell.cfg.Logger
	switch {
	case err == nil, errors.Is(err, ErrClosed):
	case errors.Is(err, replication.ErrStaleEpoch):
		// An older state than the replica knows (a late event), or a
		// restarted replica asked to lead an epoch its log holds: the
		// controller raises the epoch.
		log.Debug("partition state not applied", "topic", c.part.Topic, "partition", c.part.Index,
			"leader", st.Leader, "epoch", st.LeaderEpoch, "err", err)
	default:
		log.Warn("applying partition state to replica", "topic", c.part.Topic, "partition", c.part.Index,
			"leader", st.Leader, "epoch", st.LeaderEpoch, "err", err)
	}
}

// BecomeLeaderLocked feeds BecomeLeader with the local log's positions and
// remembers the state the replica then leads with (the ISR CAS base). A
// replica not leading yet is first prepared by lead.PrepareToLead.
// REQUIRES: inside WithReplica.
func (c *Core) BecomeLeaderLocked(r *replication.Replica, st metadata.PartitionState, lead Leadership) error {
	if committedProposal(r, st) {
		// The watch brought our own ISR write before the CAS answer did:
		// commit it as such (an expanded follower then counts as caught
		// up now, as ISRCommitted does, and is not dropped at the next
		// tick); the late answer finds no proposal and is ignored.
		if err := r.ISRCommitted(st.Version); err != nil {
			return err
		}
		c.applied.Led = st
		return nil
	}
	if r.Role() != replication.RoleLeader {
		if err := lead.PrepareToLead(r); err != nil {
			return err
		}
	}
	durable := c.log.FlushedOffset() // first: durable <= LEO
	leo := c.log.LogEndOffset()
	err := r.BecomeLeader(replication.LeaderState{
		Epoch: st.LeaderEpoch, Version: st.Version, Replicas: st.Replicas, ISR: st.ISR,
		LEO: leo, DurableOffset: durable, HighWatermark: lead.InheritedHighWatermark(r),
	})
	if err != nil {
		return err
	}
	if s := r.Status(); s.Role == replication.RoleLeader && s.LeaderEpoch == st.LeaderEpoch && s.Version == st.Version {
		c.applied.Led = st
		// Report through the machine, never by storing the log's positions
		// as reported: a repeated state (the same epoch and version applied
		// again, as after registering) leaves the machine as it was, and a
		// stored "reported" above what it was told would hide the progress
		// from the watcher and the tick for good (acks=all waiters then
		// time out with the data on disk).
		return c.ReportLocalLogLocked(r)
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
