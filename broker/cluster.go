package broker

import (
	"context"
	"log/slog"
	"slices"
	"sync"

	"github.com/strata-log/strata/metadata"
)

// brokerLister is the slice of the metadata store the live-brokers view
// reloads from (*metadata.Store implements it).
type brokerLister interface {
	Brokers(ctx context.Context) ([]metadata.BrokerInfo, error)
}

// liveBrokers caches the registered brokers (refreshed on BrokersChanged).
// Both fields are guarded by mu.
type liveBrokers struct {
	mu   sync.RWMutex
	list []metadata.BrokerInfo // sorted by NodeID
	// self is this broker as advertised: always part of the view, since
	// its own registration may not have reached the cache yet.
	self metadata.BrokerInfo
}

// setSelf sets this broker's entry (its node id at New, its advertised
// address once Start has bound the listeners).
func (lb *liveBrokers) setSelf(info metadata.BrokerInfo) {
	lb.mu.Lock()
	lb.self = info
	lb.mu.Unlock()
}

// refresh reloads the broker list; on error the old list stays.
func (lb *liveBrokers) refresh(ctx context.Context, store brokerLister, log *slog.Logger) {
	list, err := store.Brokers(ctx)
	if err != nil {
		log.Warn("listing brokers", "err", err)
		return
	}
	lb.set(list)
}

// set replaces the cached broker list.
func (lb *liveBrokers) set(list []metadata.BrokerInfo) {
	list = slices.Clone(list)
	slices.SortFunc(list, func(x, y metadata.BrokerInfo) int { return int(x.NodeID) - int(y.NodeID) })
	lb.mu.Lock()
	lb.list = list
	lb.mu.Unlock()
}

// all lists live brokers sorted by node id, always including this one.
func (lb *liveBrokers) all() []metadata.BrokerInfo {
	lb.mu.RLock()
	list, self := slices.Clone(lb.list), lb.self
	lb.mu.RUnlock()
	if !slices.ContainsFunc(list, func(i metadata.BrokerInfo) bool { return i.NodeID == self.NodeID }) {
		list = append(list, self)
		slices.SortFunc(list, func(x, y metadata.BrokerInfo) int { return int(x.NodeID) - int(y.NodeID) })
	}
	return list
}

// view is the live brokers at this moment, for one response.
func (lb *liveBrokers) view() brokerView { return brokerView{list: lb.all()} }

// producerIDAllocator is the slice of the metadata store that hands out
// producer-id blocks (*metadata.Store implements it).
type producerIDAllocator interface {
	// AllocateProducerIDs reserves n ids cluster-wide and returns the first.
	AllocateProducerIDs(ctx context.Context, n int64) (int64, error)
}

// producerIDs hands out producer ids from blocks reserved in metadata.
type producerIDs struct {
	mu         sync.Mutex // held across the etcd call that refills the block
	next, last int64      // next id to give; last id of the block (inclusive)
	valid      bool
}

const producerIDBlock = 1000

// allocate returns an id never given out before, cluster-wide.
func (ids *producerIDs) allocate(ctx context.Context, store producerIDAllocator) (int64, error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if !ids.valid || ids.next > ids.last {
		first, err := store.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, err
		}
		ids.next, ids.last, ids.valid = first, first+producerIDBlock-1, true
	}
	id := ids.next
	ids.next++
	return id, nil
}

// producerIDRaiser is the slice of the metadata store a restore raises the
// producer-id allocator through (*metadata.Store implements it).
type producerIDRaiser interface {
	RaiseNextProducerID(ctx context.Context, floor int64) error
}

// reserve raises the cluster's producer-id allocator to next (a restored
// topic's producers used ids below it) and drops this broker's cached
// block if it lies below. Other brokers' cached blocks are not reached:
// restore into a cluster whose producers have not started
// (docs/ARCHITECTURE.md, "Restore"). next <= 0 reserves nothing.
func (ids *producerIDs) reserve(ctx context.Context, store producerIDRaiser, next int64) error {
	if next <= 0 {
		return nil
	}
	if err := store.RaiseNextProducerID(ctx, next); err != nil {
		return err
	}
	ids.mu.Lock()
	if ids.valid && ids.next < next {
		ids.valid = false
	}
	ids.mu.Unlock()
	return nil
}
