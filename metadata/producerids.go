package metadata

// A broker's producer ids: handed out from blocks reserved cluster-wide
// (Store.AllocateProducerIDs), so InitProducerId costs an etcd round trip
// once per ProducerIDBlock ids.

import (
	"context"
	"sync"
)

// ProducerIDCounter is the cluster-wide producer-id counter (*Store
// implements it).
type ProducerIDCounter interface {
	// AllocateProducerIDs reserves n ids and returns the first.
	AllocateProducerIDs(ctx context.Context, n int64) (int64, error)
	// RaiseNextProducerID makes every later block start at floor or above.
	RaiseNextProducerID(ctx context.Context, floor int64) error
}

// ProducerIDBlock is how many ids one reservation takes.
const ProducerIDBlock = 1000

// ProducerIDs hands out producer ids from blocks reserved in the counter.
// Safe for concurrent use.
type ProducerIDs struct {
	counter ProducerIDCounter

	mu         sync.Mutex // held across the etcd call that refills the block
	next, last int64      // next id to give; last id of the block (inclusive)
	valid      bool
}

// NewProducerIDs hands out ids reserved in counter.
func NewProducerIDs(counter ProducerIDCounter) *ProducerIDs {
	return &ProducerIDs{counter: counter}
}

// Allocate returns an id never given out before, cluster-wide.
func (ids *ProducerIDs) Allocate(ctx context.Context) (int64, error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if !ids.valid || ids.next > ids.last {
		first, err := ids.counter.AllocateProducerIDs(ctx, ProducerIDBlock)
		if err != nil {
			return 0, err
		}
		ids.next, ids.last, ids.valid = first, first+ProducerIDBlock-1, true
	}
	id := ids.next
	ids.next++
	return id, nil
}

// Reserve raises the cluster's counter to next (a restored topic's
// producers used ids below it) and drops this broker's cached block if it
// lies below. Other brokers' cached blocks are not reached: restore into a
// cluster whose producers have not started (docs/ARCHITECTURE.md,
// "Restore"). next <= 0 reserves nothing.
func (ids *ProducerIDs) Reserve(ctx context.Context, next int64) error {
	if next <= 0 {
		return nil
	}
	if err := ids.counter.RaiseNextProducerID(ctx, next); err != nil {
		return err
	}
	ids.mu.Lock()
	if ids.valid && ids.next < next {
		ids.valid = false
	}
	ids.mu.Unlock()
	return nil
}
