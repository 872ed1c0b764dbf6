package replica

// The leader's append path: a local append under the replica's lock,
// stamped with the epoch it leads, and the acks=all wait for the HW.

import (
	"context"
	"time"

	"github.com/strata-log/strata/replication"
)

// AckWait is an appended acks=all batch waiting for the HW.
type AckWait struct {
	id     uint64
	result chan error
	acks   *AckPurgatory
}

// AppendAsLeader runs appendFn while the replica leads, with the epoch to
// stamp the batches with, and reports the new LEO. appendFn returns the
// offset after the last one it appended (a retried idempotent batch that
// appends nothing returns the original's, so its waiter waits for the
// original). With acksAll it first checks min.insync.replicas
// (replication.ErrNotEnoughReplicas, appendFn not called) and then
// registers an acks=all waiter for the appended batches (timeoutMs of
// logical time). Errors: replication.ErrNotLeader, the machine's,
// appendFn's, or ErrClosed.
func (c *Core) AppendAsLeader(acksAll bool, timeoutMs int64, appendFn func(epoch int32) (next int64, err error)) (*AckWait, error) {
	var wait *AckWait
	err := c.WithReplica(func(r *replication.Replica) error {
		if r.Role() != replication.RoleLeader {
			return replication.ErrNotLeader
		}
		if acksAll {
			if err := r.CheckAcksAll(); err != nil {
				return err
			}
		}
		next, err := appendFn(r.LeaderEpoch())
		if err != nil {
			return err
		}
		if err := c.ReportLocalLogLocked(r); err != nil {
			return err
		}
		if !acksAll {
			return nil
		}
		acks := &c.shell.acks
		id, ch := acks.Register()
		w := replication.AckWaiter{ID: id, RequiredOffset: next, TimeoutMs: max(timeoutMs, 0)}
		if err := r.WaitForAcks(w); err != nil {
			acks.Forget(id)
			return err
		}
		wait = &AckWait{id: id, result: ch, acks: acks}
		return nil
	})
	return wait, err
}

// FlushWait is an appended acks=1 batch waiting, under fsync durability,
// for the leader's own flush. The ack then means durable, and, for a
// partition whose ISR is the leader alone, visible: the wait ends by
// reporting the flush to the replica, which moves the HW before the
// producer hears of it.
type FlushWait struct {
	c    *Core
	next int64 // the offset after the batches
}

// FlushWait returns the wait for everything below next to be flushed;
// nil without fsync durability (an append is all acks=1 waits for).
func (c *Core) FlushWait(next int64) *FlushWait {
	if !c.shell.cfg.Fsync {
		return nil
	}
	return &FlushWait{c: c, next: next}
}

// Await waits for the flush until ctx ends (its error; the caller's
// deadline is the produce timeout). A failed or closed log is its error.
func (w *FlushWait) Await(ctx context.Context) error {
	if err := w.c.log.WaitFlushed(ctx, w.next-1); err != nil {
		return err
	}
	w.c.reportLocalLog()
	return nil
}

// Await waits for w's result. The replica answers by its own timeout
// (Tick); the wall-clock deadline is a backstop should it never answer
// (replication.ErrTimedOut).
func (w *AckWait) Await(ctx context.Context, deadline <-chan time.Time) error {
	select {
	case err := <-w.result:
		return err
	case <-ctx.Done():
		w.acks.Forget(w.id)
		return ctx.Err()
	case <-deadline:
		w.acks.Forget(w.id)
		return replication.ErrTimedOut
	}
}
