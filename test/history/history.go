package history

import (
	"fmt"
	"slices"
	"sync"
)

// Outcome is what a producer learnt about one attempt.
type Outcome int8

const (
	// Unknown: no answer, or an error after which the write may exist.
	Unknown Outcome = iota
	// Acked: the broker acknowledged the write at (Partition, Offset).
	Acked
	// Failed: the write certainly did not happen.
	Failed
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "acked"
	case Failed:
		return "failed"
	default:
		return "unknown"
	}
}

// Attempt is one produce attempt and its outcome.
type Attempt struct {
	Producer  string
	Seq       int // position among all Produce calls (send order per producer)
	Value     string
	Key       string
	Partition int32
	// Txn is the transaction the attempt was produced in; "" for a
	// non-transactional (idempotent) attempt.
	Txn     string
	Outcome Outcome
	Offset  int64 // valid when Outcome == Acked
}

// Observation is one record a consumer session saw, in poll order.
type Observation struct {
	Session   string
	Group     string // the consumer group of the session; "" for a group-less consumer
	Partition int32
	Offset    int64
	Value     string
}

// Record is one record of a final read.
type Record struct {
	Offset int64
	Value  string
}

// FinalLog is a complete read of one partition after the faults stopped.
type FinalLog struct {
	LogStart int64
	Records  []Record // in offset order
}

// History records a workload. The zero value is not usable: call New.
type History struct {
	mu struct {
		sync.Mutex
		attempts     []*Attempt
		byValue      map[string]*Attempt
		observations []Observation
		final        map[int32]FinalLog
		txns         map[string]TxnOutcome
		commits      []Commit
	}
}

// New returns an empty history.
func New() *History {
	h := &History{}
	h.mu.byValue = map[string]*Attempt{}
	h.mu.final = map[int32]FinalLog{}
	h.mu.txns = map[string]TxnOutcome{}
	return h
}

// Produce records an attempt before it is sent. A value used twice is a bug
// of the workload and panics (tests only).
func (h *History) Produce(producer, value, key string, partition int32) {
	h.ProduceTxn(producer, "", value, key, partition)
}

// ProduceTxn records an attempt sent inside transaction txn (unique in the
// history; "" is Produce). Its outcome is recorded as for Produce (Ack: the
// write is in the log, committed or not); the transaction's own outcome is
// recorded with EndTxn.
func (h *History) ProduceTxn(producer, txn, value, key string, partition int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.mu.byValue[value]; dup {
		panic(fmt.Sprintf("history: value %q produced twice", value))
	}
	a := &Attempt{Producer: producer, Seq: len(h.mu.attempts), Value: value, Key: key, Partition: partition, Txn: txn, Offset: -1}
	h.mu.attempts = append(h.mu.attempts, a)
	h.mu.byValue[value] = a
	if _, ok := h.mu.txns[txn]; txn != "" && !ok {
		h.mu.txns[txn] = TxnUnknown
	}
}

// Ack records that value was acknowledged at (partition, offset).
func (h *History) Ack(value string, partition int32, offset int64) {
	h.setOutcome(value, func(a *Attempt) { a.Outcome, a.Partition, a.Offset = Acked, partition, offset })
}

// Fail records that value was certainly not written.
func (h *History) Fail(value string) {
	h.setOutcome(value, func(a *Attempt) { a.Outcome = Failed })
}

// Unknown records an error after which the write may or may not exist.
func (h *History) Unknown(value string) {
	h.setOutcome(value, func(a *Attempt) { a.Outcome = Unknown })
}

func (h *History) setOutcome(value string, set func(*Attempt)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, ok := h.mu.byValue[value]
	if !ok {
		panic(fmt.Sprintf("history: outcome for value %q never produced", value))
	}
	set(a)
}

// Observe records that consumer session saw value at (partition, offset).
func (h *History) Observe(session string, partition int32, offset int64, value string) {
	h.ObserveGroup("", session, partition, offset, value)
}

// ObserveGroup records that session, a member of consumer group group, saw
// value at (partition, offset). A member's session ends whenever it may
// seek: at every assignment of the partition to it.
func (h *History) ObserveGroup(group, session string, partition int32, offset int64, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.observations = append(h.mu.observations, Observation{session, group, partition, offset, value})
}

// Final records the complete read of partition from logStart (records in
// offset order). A second call replaces the first.
func (h *History) Final(partition int32, logStart int64, records []Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.final[partition] = FinalLog{LogStart: logStart, Records: slices.Clone(records)}
}

// Acked returns the number of acknowledged attempts so far.
func (h *History) Acked() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, a := range h.mu.attempts {
		if a.Outcome == Acked {
			n++
		}
	}
	return n
}

// Snapshot copies the recorded history for Check.
func (h *History) Snapshot() Input {
	h.mu.Lock()
	defer h.mu.Unlock()
	in := Input{Observations: slices.Clone(h.mu.observations), Final: map[int32]FinalLog{},
		Txns: map[string]TxnOutcome{}, Commits: slices.Clone(h.mu.commits)}
	for _, a := range h.mu.attempts {
		in.Attempts = append(in.Attempts, *a)
	}
	for p, f := range h.mu.final {
		in.Final[p] = f
	}
	for txn, o := range h.mu.txns {
		in.Txns[txn] = o
	}
	return in
}

// Check checks everything recorded so far.
func (h *History) Check() Report { return Check(h.Snapshot()) }
