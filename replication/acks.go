package replication

import (
	"fmt"
)

// AckWaiter is one acks=all produce to one partition waiting for the HW.
type AckWaiter struct {
	// ID is the shell's handle; echoed in the AckResult.
	ID uint64
	// RequiredOffset is the last appended offset + 1: the waiter is
	// satisfied once HW >= RequiredOffset (Kafka's requiredOffset).
	RequiredOffset int64
	// TimeoutMs is the produce request's timeout in logical milliseconds.
	TimeoutMs int64
}

type ackWaiter struct {
	AckWaiter
	deadlineMs int64
}

// CheckAcksAll says whether an acks=all produce may be appended now:
// nil, ErrNotLeader, or ErrNotEnoughReplicas when the committed ISR is
// smaller than min.insync.replicas.
func (r *Replica) CheckAcksAll() error {
	if r.role != RoleLeader {
		return ErrNotLeader
	}
	if len(r.leader.isr) < r.minISR {
		return fmt.Errorf("%w: ISR %d < min.insync.replicas %d", ErrNotEnoughReplicas, len(r.leader.isr), r.minISR)
	}
	return nil
}

// WaitForAcks registers an acks=all waiter for data already appended (and
// reported with Append). Its result appears in a later Ready's Acks, or in
// the next one if the HW has already passed it.
func (r *Replica) WaitForAcks(w AckWaiter) error {
	if r.role != RoleLeader {
		return ErrNotLeader
	}
	l := r.leader
	if w.RequiredOffset < 0 || w.RequiredOffset > l.leo || w.TimeoutMs < 0 {
		return fmt.Errorf("%w: acks=all for offset %d (LEO %d), timeout %d", ErrInvalidOffset, w.RequiredOffset, l.leo, w.TimeoutMs)
	}
	if len(l.waiters) >= r.cfg.MaxAckWaiters {
		return ErrTooManyWaiters
	}
	l.waiters = append(l.waiters, ackWaiter{AckWaiter: w, deadlineMs: saturatingAdd(r.nowMs, w.TimeoutMs)})
	r.completeWaiters()
	return nil
}

// completeWaiters answers the waiters the HW has passed. As in Kafka's
// checkEnoughReplicasReachOffset, a waiter the HW passes while the
// committed ISR is below min.insync.replicas gets
// ErrNotEnoughReplicasAfterAppend rather than success.
func (r *Replica) completeWaiters() {
	l := r.leader
	var result error
	if len(l.isr) < r.minISR {
		result = ErrNotEnoughReplicasAfterAppend
	}
	r.resolveWaiters(func(w *ackWaiter) (error, bool) {
		return result, w.RequiredOffset <= r.highWatermark
	})
}

// expireWaiters times out waiters whose deadline has come.
func (r *Replica) expireWaiters() {
	r.resolveWaiters(func(w *ackWaiter) (error, bool) {
		return ErrTimedOut, r.nowMs >= w.deadlineMs
	})
}

// failWaiters answers every waiter with err (leadership lost).
func (r *Replica) failWaiters(err error) {
	if r.leader == nil {
		return
	}
	r.resolveWaiters(func(*ackWaiter) (error, bool) { return err, true })
}

// resolveWaiters moves the waiters for which decide says done to the
// output, keeping the others in order.
func (r *Replica) resolveWaiters(decide func(*ackWaiter) (error, bool)) {
	l := r.leader
	kept := l.waiters[:0]
	for i := range l.waiters {
		w := &l.waiters[i]
		err, done := decide(w)
		if !done {
			kept = append(kept, *w)
			continue
		}
		r.out.acks = append(r.out.acks, AckResult{ID: w.ID, RequiredOffset: w.RequiredOffset, Err: err})
	}
	clear(l.waiters[len(kept):])
	l.waiters = kept
}
