package replica

// ISR changes proposed by a leading replica are written to the partition
// state in etcd with a compare-and-swap on the state's version (Kafka's
// AlterPartition). The write runs on its own goroutine; its outcome goes
// back into the replica through WithReplica (ISRCommitted / ISRRejected).

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/replication"
)

const (
	// isrWriteTimeout bounds one CAS attempt.
	isrWriteTimeout = 10 * time.Second
	// isrRetryBackoff and isrMaxRetryBackoff pace retries after errors
	// that leave the outcome unknown (etcd unreachable, timeouts).
	isrRetryBackoff    = 100 * time.Millisecond
	isrMaxRetryBackoff = 2 * time.Second
)

// proposeISR starts writing prop. base is the state the replica leads with;
// its Version must be prop.ExpectedVersion (else the proposal is stale by
// construction and is rejected, which fences the replica until the next
// state arrives).
func (c *Core) proposeISR(prop replication.ISRProposal, base metadata.PartitionState) {
	want := base
	want.ISR = slices.Clone(prop.ISR)
	want.Version = prop.ExpectedVersion
	c.shell.cfg.Logger.Info("proposing ISR change", "topic", c.part.Topic, "partition", c.part.Index, "change", prop.Change.String(),
		"isr", prop.ISR, "changed", prop.Changed, "epoch", prop.LeaderEpoch, "version", prop.ExpectedVersion)
	c.shell.Go(func() {
		if base.Version != prop.ExpectedVersion || base.LeaderEpoch != prop.LeaderEpoch {
			c.isrOutcome(prop, 0, false)
			return
		}
		version, ok, done := c.writeISR(want)
		if done {
			c.isrOutcome(prop, version, ok)
		}
	})
}

// writeISR compare-and-swaps want until the outcome is known: (new
// version, true) written; (_, false) the state changed under us (deposed,
// or the controller changed it). done is false when the shell's lifetime
// ends first. After an attempt whose answer was lost, a failed CAS may
// mean our own write landed: the stored state is compared with want.
func (c *Core) writeISR(want metadata.PartitionState) (version int64, ok, done bool) {
	lifetime := c.shell.cfg.Lifetime
	backoff := isrRetryBackoff
	uncertain := false
	for lifetime.Err() == nil {
		ctx, cancel := context.WithTimeout(lifetime, isrWriteTimeout)
		v, err := c.shell.cfg.Store.CASPartitionState(ctx, c.part.TopicID, c.part.Index, want)
		cancel()
		switch {
		case err == nil:
			return v, true, true
		case errors.Is(err, metadata.ErrCASFailed):
			if uncertain {
				if v, landed := c.storedAs(want); landed {
					return v, true, true
				}
			}
			return 0, false, true
		case errors.Is(err, metadata.ErrTopicNotFound), errors.Is(err, metadata.ErrInvalidReplicas):
			return 0, false, true
		}
		uncertain = true
		c.shell.cfg.Logger.Warn("writing ISR change; retrying", "topic", c.part.Topic, "partition", c.part.Index, "err", err)
		select {
		case <-lifetime.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, isrMaxRetryBackoff)
	}
	return 0, false, false
}

// storedAs reports whether the stored state is want (our write landed) and
// its version.
func (c *Core) storedAs(want metadata.PartitionState) (int64, bool) {
	ctx, cancel := context.WithTimeout(c.shell.cfg.Lifetime, isrWriteTimeout)
	defer cancel()
	states, err := c.shell.cfg.Store.PartitionStates(ctx, c.part.TopicID)
	if err != nil || int(c.part.Index) >= len(states) {
		return 0, false
	}
	st := states[c.part.Index]
	same := st.Leader == want.Leader && st.LeaderEpoch == want.LeaderEpoch &&
		st.LeaderBrokerEpoch == want.LeaderBrokerEpoch && slices.Equal(st.ISR, want.ISR) &&
		slices.Equal(st.Replicas, want.Replicas)
	return st.Version, same && st.Version > want.Version
}

// isrOutcome reports a CAS outcome to the replica, unless the proposal is
// no longer the one in flight (a newer state resolved it meanwhile).
func (c *Core) isrOutcome(prop replication.ISRProposal, version int64, committed bool) {
	err := c.WithReplica(func(r *replication.Replica) error {
		cur := r.Status().Proposal
		if cur == nil || cur.LeaderEpoch != prop.LeaderEpoch || cur.ExpectedVersion != prop.ExpectedVersion ||
			!slices.Equal(cur.ISR, prop.ISR) {
			return replication.ErrNoProposal
		}
		if !committed {
			return r.ISRRejected()
		}
		if err := r.ISRCommitted(version); err != nil {
			return err
		}
		c.applied.Led.ISR = slices.Clone(prop.ISR)
		c.applied.Led.Version = version
		c.applied.Version = max(c.applied.Version, version)
		return nil
	})
	log := c.shell.cfg.Logger
	switch {
	case err == nil:
		log.Info("ISR change done", "topic", c.part.Topic, "partition", c.part.Index, "committed", committed,
			"isr", prop.ISR, "version", version)
	case errors.Is(err, replication.ErrNoProposal), errors.Is(err, ErrClosed):
	default:
		log.Warn("ISR change outcome", "topic", c.part.Topic, "partition", c.part.Index, "err", err)
	}
}
