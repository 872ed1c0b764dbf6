package broker

import (
	"context"
	"slices"
	"sync"

	"github.com/strata-log/strata/metadata"
)

// liveBrokers caches the registered brokers (refreshed on BrokersChanged).
type liveBrokers struct {
	mu   sync.RWMutex
	list []metadata.BrokerInfo // sorted by NodeID
}

// refreshBrokers reloads the broker list; on error the old list stays.
func (b *Broker) refreshBrokers(ctx context.Context) {
	list, err := b.store.Brokers(ctx)
	if err != nil {
		b.log.Warn("listing brokers", "err", err)
		return
	}
	b.setBrokers(list)
}

// setBrokers replaces the cached broker list.
func (b *Broker) setBrokers(list []metadata.BrokerInfo) {
	list = slices.Clone(list)
	slices.SortFunc(list, func(x, y metadata.BrokerInfo) int { return int(x.NodeID) - int(y.NodeID) })
	b.liveBrks.mu.Lock()
	b.liveBrks.list = list
	b.liveBrks.mu.Unlock()
}

// brokers lists live brokers, always including this one (its registration
// may not have reached the cache yet).
func (b *Broker) brokers() []metadata.BrokerInfo {
	b.liveBrks.mu.RLock()
	list := slices.Clone(b.liveBrks.list)
	b.liveBrks.mu.RUnlock()
	if !slices.ContainsFunc(list, func(i metadata.BrokerInfo) bool { return i.NodeID == b.cfg.NodeID }) {
		list = append(list, b.advertised)
		slices.SortFunc(list, func(x, y metadata.BrokerInfo) int { return int(x.NodeID) - int(y.NodeID) })
	}
	return list
}

func (b *Broker) isLive(node int32) bool {
	return slices.ContainsFunc(b.brokers(), func(i metadata.BrokerInfo) bool { return i.NodeID == node })
}

// producerIDs hands out producer ids from blocks reserved in metadata.
type producerIDs struct {
	mu         sync.Mutex // held across the etcd call that refills the block
	next, last int64      // next id to give; last id of the block (inclusive)
	valid      bool
}

const producerIDBlock = 1000

// nextProducerID returns an id never given out before, cluster-wide.
func (b *Broker) nextProducerID(ctx context.Context) (int64, error) {
	b.pids.mu.Lock()
	defer b.pids.mu.Unlock()
	if !b.pids.valid || b.pids.next > b.pids.last {
		first, err := b.store.AllocateProducerIDs(ctx, producerIDBlock)
		if err != nil {
			return 0, err
		}
		b.pids.next, b.pids.last, b.pids.valid = first, first+producerIDBlock-1, true
	}
	id := b.pids.next
	b.pids.next++
	return id, nil
}
