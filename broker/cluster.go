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
