package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/strata-log/strata/metadata"
)

// memBrokerLister is an in-memory brokerLister.
type memBrokerLister struct {
	list []metadata.BrokerInfo
	err  error
}

func (m *memBrokerLister) Brokers(context.Context) ([]metadata.BrokerInfo, error) {
	return m.list, m.err
}

var _ brokerLister = (*memBrokerLister)(nil)

func nodeIDs(list []metadata.BrokerInfo) []int32 {
	ids := make([]int32, len(list))
	for i, info := range list {
		ids[i] = info.NodeID
	}
	return ids
}

func TestLiveBrokersIncludeSelfSorted(t *testing.T) {
	var lb liveBrokers
	lb.setSelf(metadata.BrokerInfo{NodeID: 2, Host: "self"})
	if got := nodeIDs(lb.all()); !slices.Equal(got, []int32{2}) {
		t.Fatalf("empty cache: %v, want [2]", got)
	}
	lb.set([]metadata.BrokerInfo{{NodeID: 3}, {NodeID: 1}})
	if got := nodeIDs(lb.all()); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("with self missing: %v, want [1 2 3]", got)
	}
	lb.set([]metadata.BrokerInfo{{NodeID: 2, Host: "registered"}, {NodeID: 1}})
	list := lb.all()
	if got := nodeIDs(list); !slices.Equal(got, []int32{1, 2}) || list[1].Host != "registered" {
		t.Fatalf("with self registered: %+v", list)
	}
	view := lb.view()
	if !view.live(1) || !view.live(2) || view.live(3) {
		t.Fatalf("view liveness wrong: %+v", view.list)
	}
}

func TestLiveBrokersRefreshKeepsListOnError(t *testing.T) {
	var lb liveBrokers
	lb.setSelf(metadata.BrokerInfo{NodeID: 1})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store := &memBrokerLister{list: []metadata.BrokerInfo{{NodeID: 1}, {NodeID: 4}}}
	lb.refresh(context.Background(), store, log)
	store.list, store.err = nil, errors.New("etcd down")
	lb.refresh(context.Background(), store, log)
	if got := nodeIDs(lb.all()); !slices.Equal(got, []int32{1, 4}) {
		t.Fatalf("after a failed refresh: %v, want [1 4]", got)
	}
}
