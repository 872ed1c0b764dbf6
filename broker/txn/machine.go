package txn

import (
	"slices"
	"sort"
)

// MachineConfig is the machine's configuration, in milliseconds.
type MachineConfig struct {
	MaxTimeoutMs int32 // transaction.max.timeout.ms
	ExpirationMs int64 // transactional.id.expiration.ms
}

// Machine is every transactional id this coordinator serves, as a pure
// state machine (doc.go). Not safe for concurrent use.
type Machine struct {
	cfg  MachineConfig
	txns map[string]*txnState
	out  Ready
	// supply is the outcome of the allocation of a new producer id the
	// shell handed in, for the next transition that needs one.
	supply producerIDSupply
	// needsID is set when a step stopped, changing nothing, because a
	// transition needed a producer id and supply was empty.
	needsID bool
	// tickResume is the id a stopped Tick resumes at ("": the first).
	tickResume string
}

// producerIDSupply is one allocation's outcome: an id, a failure, or
// nothing handed in.
type producerIDSupply struct {
	id     int64
	ok     bool // id is a new producer id
	failed bool // the allocation failed: the transition answers COORDINATOR_NOT_AVAILABLE
}

// Ready is what steps produced: records to persist (each followed by a
// WriteDone for its id) and marker jobs (each followed by a MarkersDone).
type Ready struct {
	Records []Record
	Markers []Markers
}

// txnState is one transactional id. Invariant: while pending, exactly one
// record of the id is being persisted and no other transition happens.
type txnState struct {
	Meta
	pending bool
	prev    *Meta // state to restore if the pending write fails; nil: the id was new
}

// NewMachine returns an empty machine.
func NewMachine(cfg MachineConfig) *Machine {
	return &Machine{cfg: cfg, txns: map[string]*txnState{}}
}

// Ready drains the outputs accumulated since the last call.
func (m *Machine) Ready() Ready {
	r := m.out
	m.out = Ready{}
	return r
}

// write persists t's current state (a tombstone when Dead) and marks it
// pending; prev is the state to restore on failure.
func (m *Machine) write(t *txnState, prev *Meta) {
	t.pending, t.prev = true, prev
	m.out.Records = append(m.out.Records, encodeRecord(&t.Meta))
}

func (t *txnState) snapshot() *Meta {
	c := t.Meta
	c.Partitions = slices.Clone(t.Partitions)
	return &c
}

// NeedsProducerID reports whether the last step stopped, changing nothing,
// because a transition needed a new producer id (a new transactional id,
// or an epoch overflow) and none was handed in. The shell then allocates
// one, hands it in (SupplyProducerID, or ProducerIDUnavailable when the
// allocation failed) and runs the same step again, which continues where
// it stopped (StepWithProducerIDs). No other input may come in between.
func (m *Machine) NeedsProducerID() bool { return m.needsID }

// SupplyProducerID hands in a producer id never used before, for the next
// transition that needs one.
func (m *Machine) SupplyProducerID(id int64) {
	m.supply, m.needsID = producerIDSupply{id: id, ok: true}, false
}

// ProducerIDUnavailable reports that allocating a producer id failed: the
// next transition that needs one answers COORDINATOR_NOT_AVAILABLE.
func (m *Machine) ProducerIDUnavailable() {
	m.supply, m.needsID = producerIDSupply{failed: true}, false
}

// newProducerID takes the supplied producer id. With none supplied it
// sets needsID and fails like an allocation (codeNotAvailable); the
// caller must then change nothing, so that the step can run again.
func (m *Machine) newProducerID() (int64, int16) {
	s := m.supply
	m.supply = producerIDSupply{}
	switch {
	case s.ok:
		return s.id, 0
	case !s.failed:
		m.needsID = true
	}
	return -1, codeNotAvailable
}

// bump raises the epoch, rotating to a new producer id when it would reach
// maxEpoch (Kafka's isEpochExhausted: epoch >= Short.MaxValue-1). It
// changes nothing when no producer id is at hand (newProducerID).
func (m *Machine) bump(t *txnState) int16 {
	pid, epoch := t.ProducerID, t.ProducerEpoch+1
	if t.ProducerEpoch >= maxEpoch-1 {
		id, code := m.newProducerID()
		if code != 0 {
			return code
		}
		pid, epoch = id, 0
	}
	t.LastProducerID, t.LastProducerEpoch = t.ProducerID, t.ProducerEpoch
	t.ProducerID, t.ProducerEpoch = pid, epoch
	return 0
}

func isPrepare(s State) bool  { return s == StatePrepareCommit || s == StatePrepareAbort }
func isComplete(s State) bool { return s == StateCompleteCommit || s == StateCompleteAbort }

// WriteDone reports that the pending record of id is durable (ok) or was
// not written (the previous state comes back). A durable Prepare* starts
// its markers; a durable tombstone forgets the id.
func (m *Machine) WriteDone(id string, ok bool) {
	t := m.txns[id]
	if t == nil || !t.pending {
		return
	}
	t.pending = false
	prev := t.prev
	t.prev = nil
	switch {
	case !ok && prev == nil:
		delete(m.txns, id)
	case !ok:
		t.Meta = *prev
	case t.State == StateDead:
		delete(m.txns, id)
	case isPrepare(t.State):
		m.emitMarkers(t)
	}
}

func (m *Machine) emitMarkers(t *txnState) {
	pid, epoch := t.markerProducer()
	m.out.Markers = append(m.out.Markers, Markers{
		ID: t.ID, ProducerID: pid, ProducerEpoch: epoch,
		Commit: t.State == StatePrepareCommit, Partitions: slices.Clone(t.Partitions),
	})
}

// markerProducer is the producer id and epoch the markers of t's prepared
// transaction carry: its own, except right after a bump rotated the
// producer id (epoch overflow), where the partitions know the transaction
// by the old id: the markers then carry the old id with the epoch after
// the old one (Kafka writes them at Short.MaxValue), which fences the old
// id's late writes, while the client continues with the new id.
func (t *txnState) markerProducer() (int64, int16) {
	if t.ProducerEpoch == 0 && t.LastProducerID >= 0 && t.LastProducerID != t.ProducerID && t.LastProducerEpoch >= maxEpoch-1 {
		return t.LastProducerID, t.LastProducerEpoch + 1
	}
	return t.ProducerID, t.ProducerEpoch
}

// MarkersDone: every partition of the job took its marker; the transaction
// completes. Stale jobs (another epoch, or no longer Prepare*) are ignored.
func (m *Machine) MarkersDone(now int64, job Markers) {
	t := m.txns[job.ID]
	if t == nil || t.pending || !isPrepare(t.State) {
		return
	}
	if pid, epoch := t.markerProducer(); pid != job.ProducerID || epoch != job.ProducerEpoch {
		return
	}
	prev := t.snapshot()
	t.State = StateCompleteAbort
	if job.Commit {
		t.State = StateCompleteCommit
	}
	t.Partitions, t.LastUpdateMs = nil, now
	m.write(t, prev)
}

// ResumeMarkers emits the marker jobs of loaded transactions in Prepare*
// whose id satisfies in (a partition just loaded).
func (m *Machine) ResumeMarkers(in func(id string) bool) {
	for _, id := range m.sortedIDs() {
		t := m.txns[id]
		if in(id) && !t.pending && isPrepare(t.State) {
			m.emitMarkers(t)
		}
	}
}

// Tick aborts transactions past their timeout (fencing the producer with
// an epoch bump) and expires ids idle past transactional.id.expiration.ms.
// Only ids for which eligible is true are considered (loaded partitions).
//
// A Tick that stops for a producer id (NeedsProducerID) resumes, when run
// again, at the id it stopped at: the ids before it were dealt with.
func (m *Machine) Tick(now int64, eligible func(id string) bool) {
	from := m.tickResume
	m.tickResume = ""
	for _, id := range m.sortedIDs() {
		t := m.txns[id]
		if id < from || t.pending || !eligible(id) {
			continue
		}
		switch {
		case (t.State == StateOngoing || t.State == StatePrepareEpochFence) && t.StartMs+int64(t.TimeoutMs) <= now:
			prev := t.snapshot()
			if m.bump(t) != 0 {
				if m.needsID {
					m.tickResume = id
					return
				}
				continue // retried next tick
			}
			t.State, t.LastUpdateMs = StatePrepareAbort, now
			m.write(t, prev)
		case (t.State == StateEmpty || isComplete(t.State)) && t.LastUpdateMs+m.cfg.ExpirationMs <= now:
			prev := t.snapshot()
			t.State, t.LastUpdateMs = StateDead, now
			m.write(t, prev)
		}
	}
}

// DropIDs forgets every id for which drop is true (the partition is no
// longer led here); its state lives on in the log.
func (m *Machine) DropIDs(drop func(id string) bool) {
	for id := range m.txns {
		if drop(id) {
			delete(m.txns, id)
		}
	}
}

// Describe returns the state of id; ok is false for unknown ids.
func (m *Machine) Describe(id string) (Meta, bool) {
	t := m.txns[id]
	if t == nil || t.State == StateDead {
		return Meta{}, false
	}
	return *t.snapshot(), true
}

// List returns every known id's state, sorted by id, filtered by keep.
func (m *Machine) List(keep func(Meta) bool) []Meta {
	var out []Meta
	for _, id := range m.sortedIDs() {
		t := m.txns[id]
		if t.State != StateDead && keep(t.Meta) {
			out = append(out, *t.snapshot())
		}
	}
	return out
}

func (m *Machine) sortedIDs() []string {
	ids := make([]string, 0, len(m.txns))
	for id := range m.txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func sortPartitions(tps []TopicPartition) {
	slices.SortFunc(tps, func(a, b TopicPartition) int {
		switch {
		case a.Topic < b.Topic:
			return -1
		case a.Topic > b.Topic:
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
}
