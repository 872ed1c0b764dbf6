package metadata

import (
	"context"
	"testing"
)

// memProducerIDCounter is an in-memory ProducerIDCounter with the store's
// semantics.
type memProducerIDCounter struct {
	next   int64
	blocks int
}

var _ ProducerIDCounter = (*memProducerIDCounter)(nil)

func (m *memProducerIDCounter) AllocateProducerIDs(_ context.Context, n int64) (int64, error) {
	first := m.next
	m.next += n
	m.blocks++
	return first, nil
}

func (m *memProducerIDCounter) RaiseNextProducerID(_ context.Context, floor int64) error {
	m.next = max(m.next, floor)
	return nil
}

func TestProducerIDsAllocateFromBlocks(t *testing.T) {
	ctx := context.Background()
	counter := &memProducerIDCounter{}
	ids := NewProducerIDs(counter)
	for want := int64(0); want < ProducerIDBlock+1; want++ {
		got, err := ids.Allocate(ctx)
		if err != nil || got != want {
			t.Fatalf("allocate: %d, %v; want %d", got, err, want)
		}
	}
	if counter.blocks != 2 {
		t.Fatalf("%d blocks reserved, want 2", counter.blocks)
	}
}

func TestProducerIDsReserveDropsLowerBlock(t *testing.T) {
	ctx := context.Background()
	counter := &memProducerIDCounter{}
	ids := NewProducerIDs(counter)
	if _, err := ids.Allocate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ids.Reserve(ctx, 0); err != nil || counter.next != ProducerIDBlock {
		t.Fatalf("Reserve(0) changed the counter: next %d, err %v", counter.next, err)
	}
	if err := ids.Reserve(ctx, 5000); err != nil {
		t.Fatal(err)
	}
	if got, err := ids.Allocate(ctx); err != nil || got != 5000 {
		t.Fatalf("after Reserve(5000): %d, %v; want 5000", got, err)
	}
	if err := ids.Reserve(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if got, _ := ids.Allocate(ctx); got != 5001 {
		t.Fatalf("a lower reserve dropped the block: %d, want 5001", got)
	}
}
