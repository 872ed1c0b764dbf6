package wire

import (
	"context"
	"testing"
	"time"
)

func TestByteBudgetWaitsForRoom(t *testing.T) {
	q := NewByteBudget(100)
	ctx := context.Background()
	if !q.Acquire(ctx, 60) || !q.Acquire(ctx, 40) {
		t.Fatal("acquire within the budget failed")
	}
	got := make(chan bool, 1)
	go func() { got <- q.Acquire(ctx, 10) }()
	select {
	case <-got:
		t.Fatal("acquire beyond the budget did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	q.Release(60)
	if ok := <-got; !ok || q.InUse() != 50 {
		t.Fatalf("after release: ok %v, in use %d (want 50)", ok, q.InUse())
	}
	// A frame larger than the whole budget passes alone.
	q.Release(50)
	if !q.Acquire(ctx, 1000) {
		t.Fatal("oversized frame refused with nothing held")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if q.Acquire(cctx, 1) {
		t.Fatal("acquire succeeded after its context ended with the budget full")
	}
	q.Release(1000)
	if q.InUse() != 0 {
		t.Fatalf("in use %d after releasing all", q.InUse())
	}
}
