package broker

// ISR changes proposed by a leading replica are written to the partition
// state in etcd with a compare-and-swap on the state's version (Kafka's
// AlterPartition). The write runs on its own goroutine; its outcome goes
// back into the replica through withReplica (ISRCommitted / ISRRejected).

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
func (b *Broker) proposeISR(p *partition, prop replication.ISRProposal, base metadata.PartitionState) {
	want := base
	want.ISR = slices.Clone(prop.ISR)
	want.Version = prop.ExpectedVersion
	b.log.Info("proposing ISR change", "topic", p.topic, "partition", p.index, "change", prop.Change.String(),
		"isr", prop.ISR, "changed", prop.Changed, "epoch", prop.LeaderEpoch, "version", prop.ExpectedVersion)
	b.parts.repl.bg.Add(1)
	go func() {
		defer b.parts.repl.bg.Done()
		if base.Version != prop.ExpectedVersion || base.LeaderEpoch != prop.LeaderEpoch {
			b.isrOutcome(p, prop, 0, false)
			return
		}
		version, ok, done := b.writeISR(p, want)
		if done {
			b.isrOutcome(p, prop, version, ok)
		}
	}()
}

// writeISR compare-and-swaps want until the outcome is known: (new
// version, true) written; (_, false) the state changed under us (deposed,
// or the controller changed it). done is false when the broker stops
// first. After an attempt whose answer was lost, a failed CAS may mean our
// own write landed: the stored state is compared with want.
func (b *Broker) writeISR(p *partition, want metadata.PartitionState) (version int64, ok, done bool) {
	backoff := isrRetryBackoff
	uncertain := false
	for b.lifetime.Err() == nil {
		ctx, cancel := context.WithTimeout(b.lifetime, isrWriteTimeout)
		v, err := b.store.CASPartitionState(ctx, p.topicID, p.index, want)
		cancel()
		switch {
		case err == nil:
			return v, true, true
		case errors.Is(err, metadata.ErrCASFailed):
			if uncertain {
				if v, landed := b.storedAs(p, want); landed {
					return v, true, true
				}
			}
			return 0, false, true
		case errors.Is(err, metadata.ErrTopicNotFound), errors.Is(err, metadata.ErrInvalidReplicas):
			return 0, false, true
		}
		uncertain = true
		b.log.Warn("writing ISR change; retrying", "topic", p.topic, "partition", p.index, "err", err)
		select {
		case <-b.lifetime.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, isrMaxRetryBackoff)
	}
	return 0, false, false
}

// storedAs reports whether the stored state is want (our write landed) and
// its version.
func (b *Broker) storedAs(p *partition, want metadata.PartitionState) (int64, bool) {
	ctx, cancel := context.WithTimeout(b.lifetime, isrWriteTimeout)
	defer cancel()
	states, err := b.store.PartitionStates(ctx, p.topicID)
	if err != nil || int(p.index) >= len(states) {
		return 0, false
	}
	st := states[p.index]
	same := st.Leader == want.Leader && st.LeaderEpoch == want.LeaderEpoch &&
		st.LeaderBrokerEpoch == want.LeaderBrokerEpoch && slices.Equal(st.ISR, want.ISR) &&
		slices.Equal(st.Replicas, want.Replicas)
	return st.Version, same && st.Version > want.Version
}

// isrOutcome reports a CAS outcome to the replica, unless the proposal is
// no longer the one in flight (a newer state resolved it meanwhile).
func (b *Broker) isrOutcome(p *partition, prop replication.ISRProposal, version int64, committed bool) {
	err := b.withReplica(p, func(r *replication.Replica) error {
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
		p.replica.led.ISR = slices.Clone(prop.ISR)
		p.replica.led.Version = version
		p.replica.appliedVersion = max(p.replica.appliedVersion, version)
		return nil
	})
	switch {
	case err == nil:
		b.log.Info("ISR change done", "topic", p.topic, "partition", p.index, "committed", committed,
			"isr", prop.ISR, "version", version)
	case errors.Is(err, replication.ErrNoProposal), errors.Is(err, errPartitionClosed):
	default:
		b.log.Warn("ISR change outcome", "topic", p.topic, "partition", p.index, "err", err)
	}
}
