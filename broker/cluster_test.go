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

// memProducerIDStore is an in-memory producerIDAllocator and
// producerIDRaiser with the metadata store's semantics.
type memProducerIDStore struct {
	next   int64
	blocks int
}

func (m *memProducerIDStore) AllocateProducerIDs(_ context.Context, n int64) (int64, error) {
	first := m.next
	m.next += n
	m.blocks++
	return first, nil
}

func (m *memProducerIDStore) RaiseNextProducerID(_ context.Context, floor int64) error {
	m.next = max(m.next, floor)
	return nil
}

var (
	_ producerIDAllocator = (*memProducerIDStore)(nil)
	_ producerIDRaiser    = (*memProducerIDStore)(nil)
)

func TestProducerIDsAllocateFromBlocks(t *testing.T) {
	ctx := context.Background()
	store := &memProducerIDStore{}
	var ids producerIDs
	for want := int64(0); want < producerIDBlock+1; want++ {
		got, err := ids.allocate(ctx, store)
		if err != nil || got != want {
			t.Fatalf("allocate: %d, %v; want %d", got, err, want)
		}
	}
	if store.blocks != 2 {
		t.Fatalf("%d blocks reserved, want 2", store.blocks)
	}
}

func TestProducerIDsReserveDropsLowerBlock(t *testing.T) {
	ctx := context.Background()
	store := &memProducerIDStore{}
	var ids producerIDs
	if _, err := ids.allocate(ctx, store); err != nil {
		t.Fatal(err)
	}
	if err := ids.reserve(ctx, store, 0); err != nil || store.next != producerIDBlock {
		t.Fatalf("reserve(0) changed the allocator: next %d, err %v", store.next, err)
	}
	if err := ids.reserve(ctx, store, 5000); err != nil {
		t.Fatal(err)
	}
	if got, err := ids.allocate(ctx, store); err != nil || got != 5000 {
		t.Fatalf("after reserve(5000): %d, %v; want 5000", got, err)
	}
	if err := ids.reserve(ctx, store, 10); err != nil {
		t.Fatal(err)
	}
	if got, _ := ids.allocate(ctx, store); got != 5001 {
		t.Fatalf("a lower reserve dropped the block: %d, want 5001", got)
	}
}
