package replica

import (
	"sync"
	"sync/atomic"

	"github.com/strata-log/strata/replication"
)

// AckPurgatory holds the produce requests waiting for acks=all, keyed by
// the AckWaiter ID given to the replica. A waiter's channel gets exactly
// one result (buffered), from the Ready that completes it.
type AckPurgatory struct {
	next    atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]chan error // guarded by mu
}

// Register returns a new waiter id and its result channel.
func (a *AckPurgatory) Register() (uint64, chan error) {
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

// Forget drops a waiter whose request no longer waits.
func (a *AckPurgatory) Forget(id uint64) {
	a.mu.Lock()
	delete(a.waiting, id)
	a.mu.Unlock()
}

// complete answers the waiters of a Ready's Acks (unknown ids: their
// request already gave up).
func (a *AckPurgatory) complete(acks []replication.AckResult) {
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
