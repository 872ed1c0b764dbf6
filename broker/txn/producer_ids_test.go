package txn

import (
	"errors"
	"testing"
)

// allocations hands out the outcomes in order and counts the calls.
type allocations struct {
	outcomes []int64 // -1: the allocation fails
	calls    int
}

func (a *allocations) next() (int64, error) {
	id := a.outcomes[a.calls]
	a.calls++
	if id < 0 {
		return 0, errors.New("metadata unavailable")
	}
	return id, nil
}

func TestStepStopsForAProducerIDWithoutChange(t *testing.T) {
	m := NewMachine(MachineConfig{MaxTimeoutMs: 60000, ExpirationMs: 1000})
	r := m.InitProducerID(5, InitInput{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if r.Code != codeNotAvailable || !m.NeedsProducerID() {
		t.Fatalf("a new id without a producer id: %+v needs %v", r, m.NeedsProducerID())
	}
	if _, ok := m.Describe("tx"); ok || len(m.Ready().Records) != 0 {
		t.Fatal("a stopped step changed the machine")
	}
	m.SupplyProducerID(42)
	if m.NeedsProducerID() {
		t.Fatal("still needs an id after one was supplied")
	}
	r = m.InitProducerID(5, InitInput{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	if r.Code != 0 || r.ProducerID != 42 || len(m.Ready().Records) != 1 {
		t.Fatalf("run again: %+v", r)
	}
}

func TestStepAllocatesOnlyWhenATransitionNeedsAnID(t *testing.T) {
	m := NewMachine(MachineConfig{MaxTimeoutMs: 60000, ExpirationMs: 1000})
	alloc := &allocations{outcomes: []int64{-1, 7}}
	var r InitResult
	initTx := func() {
		r = m.InitProducerID(0, InitInput{ID: "tx", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	}
	StepWithProducerIDs(m, alloc.next, initTx)
	if r.Code != codeNotAvailable || alloc.calls != 1 || m.NeedsProducerID() {
		t.Fatalf("failed allocation: %+v after %d calls", r, alloc.calls)
	}
	StepWithProducerIDs(m, alloc.next, initTx)
	if r.Code != 0 || r.ProducerID != 7 || alloc.calls != 2 {
		t.Fatalf("allocated: %+v after %d calls", r, alloc.calls)
	}
	m.WriteDone("tx", true)
	StepWithProducerIDs(m, alloc.next, initTx) // an epoch bump on the same id
	if r.Code != 0 || r.ProducerID != 7 || r.ProducerEpoch != 1 || alloc.calls != 2 {
		t.Fatalf("bump: %+v after %d calls", r, alloc.calls)
	}
}

// A Tick that rotates several exhausted producer ids allocates once per
// rotation, in id order, and skips an id whose allocation failed (it is
// retried next tick), as an allocator called inside the transition did.
func TestTickRotatesExhaustedIDsInOrder(t *testing.T) {
	m := NewMachine(MachineConfig{MaxTimeoutMs: 60000, ExpirationMs: 1 << 40})
	for i, id := range []string{"a", "b", "c"} {
		m.ApplyRecord(Meta{ID: id, ProducerID: int64(i + 1), ProducerEpoch: maxEpoch - 1, LastProducerID: -1,
			LastProducerEpoch: -1, TimeoutMs: 10, State: StateOngoing, StartMs: 0, LastUpdateMs: 0,
			Partitions: []TopicPartition{{Topic: "t", Partition: 0}}})
	}
	alloc := &allocations{outcomes: []int64{-1, 500, 501}}
	StepWithProducerIDs(m, alloc.next, func() { m.Tick(100, func(string) bool { return true }) })
	if alloc.calls != 3 {
		t.Fatalf("allocations: %d", alloc.calls)
	}
	var got []string
	for _, r := range m.Ready().Records {
		got = append(got, r.ID)
	}
	if len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("records: %v", got)
	}
	for id, want := range map[string]int64{"a": 1, "b": 500, "c": 501} {
		if meta, _ := m.Describe(id); meta.ProducerID != want {
			t.Errorf("%s: producer id %d, want %d", id, meta.ProducerID, want)
		}
	}
	if meta, _ := m.Describe("a"); meta.State != StateOngoing {
		t.Errorf("a: %v, want Ongoing until the next tick", StateName(meta.State))
	}
}
