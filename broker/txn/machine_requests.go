package txn

import "slices"

// InitInput is an InitProducerId with a transactional id. ProducerID and
// ProducerEpoch are -1 unless the client sends its current ones (v3+,
// KIP-360).
type InitInput struct {
	ID            string
	TimeoutMs     int32
	ProducerID    int64
	ProducerEpoch int16
}

// InitResult answers InitProducerId.
type InitResult struct {
	Code          int16
	ProducerID    int64
	ProducerEpoch int16
}

// InitProducerID gives the id's producer a new epoch (a new producer id for
// a new transactional id), fencing older ones. An ongoing transaction is
// aborted first (fenced epoch, PrepareAbort) and the client gets
// CONCURRENT_TRANSACTIONS until the abort completes, as in Kafka.
func (m *Machine) InitProducerID(now int64, in InitInput) InitResult {
	fail := func(code int16) InitResult { return InitResult{Code: code, ProducerID: -1, ProducerEpoch: -1} }
	if in.TimeoutMs <= 0 || in.TimeoutMs > m.cfg.MaxTimeoutMs {
		return fail(codeBadTimeout)
	}
	t := m.txns[in.ID]
	if t == nil {
		return m.initNew(now, in)
	}
	if t.pending || isPrepare(t.State) {
		return fail(codeConcurrent)
	}
	if in.ProducerID >= 0 {
		current := in.ProducerID == t.ProducerID && in.ProducerEpoch == t.ProducerEpoch
		retried := in.ProducerID == t.LastProducerID && in.ProducerEpoch == t.LastProducerEpoch
		if !current && !retried {
			return fail(codeFenced)
		}
		if retried && t.State == StateEmpty {
			return InitResult{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
		}
	}
	prev := t.snapshot()
	if code := m.bump(t); code != 0 {
		return fail(code)
	}
	t.LastUpdateMs = now
	if t.State == StateOngoing || t.State == StatePrepareEpochFence {
		t.State = StatePrepareAbort
		m.write(t, prev)
		return fail(codeConcurrent)
	}
	t.State, t.TimeoutMs, t.Partitions, t.StartMs = StateEmpty, in.TimeoutMs, nil, -1
	m.write(t, prev)
	return InitResult{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
}

func (m *Machine) initNew(now int64, in InitInput) InitResult {
	pid, code := m.newProducerID()
	if code != 0 {
		return InitResult{Code: code, ProducerID: -1, ProducerEpoch: -1}
	}
	t := &txnState{Meta: Meta{
		ID: in.ID, ProducerID: pid, LastProducerID: -1, LastProducerEpoch: -1,
		TimeoutMs: in.TimeoutMs, State: StateEmpty, StartMs: -1, LastUpdateMs: now,
	}}
	m.txns[in.ID] = t
	m.write(t, nil)
	return InitResult{ProducerID: pid}
}

// AddInput is an AddPartitionsToTxn (or AddOffsetsToTxn) for one id.
type AddInput struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition
	// VerifyOnly (v4+, KIP-890 part 1): only check that the partitions
	// are already in the ongoing transaction.
	VerifyOnly bool
}

// AddPartitions adds partitions to the transaction, starting it if it was
// not ongoing. code applies to every partition; perPartition is set only
// for a verification (0: in the transaction, else INVALID_TXN_STATE).
func (m *Machine) AddPartitions(now int64, in AddInput) (code int16, perPartition []int16) {
	t := m.txns[in.ID]
	switch {
	case t == nil || t.State == StateDead || t.ProducerID != in.ProducerID:
		return codeMapping, nil
	case t.ProducerEpoch != in.ProducerEpoch:
		return codeFenced, nil
	case t.pending || isPrepare(t.State):
		return codeConcurrent, nil
	case in.VerifyOnly:
		return 0, t.verify(in.Partitions)
	case t.State == StatePrepareEpochFence:
		return codeInvalidState, nil
	}
	missing := t.missing(in.Partitions)
	if t.State == StateOngoing && len(missing) == 0 {
		return 0, nil
	}
	prev := t.snapshot()
	if t.State != StateOngoing {
		t.State, t.StartMs, t.Partitions = StateOngoing, now, nil
		missing = in.Partitions
	}
	t.Partitions = append(t.Partitions, missing...)
	sortPartitions(t.Partitions)
	t.Partitions = slices.Compact(t.Partitions)
	t.LastUpdateMs = now
	m.write(t, prev)
	return 0, nil
}

func (t *txnState) missing(tps []TopicPartition) []TopicPartition {
	var out []TopicPartition
	for _, tp := range tps {
		if !slices.Contains(t.Partitions, tp) {
			out = append(out, tp)
		}
	}
	return out
}

func (t *txnState) verify(tps []TopicPartition) []int16 {
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		if t.State != StateOngoing || !slices.Contains(t.Partitions, tp) {
			codes[i] = codeInvalidState
		}
	}
	return codes
}

// EndInput is an EndTxn. Bump is set for v5+ (KIP-890 part 2): the epoch
// is bumped and the new one returned.
type EndInput struct {
	ID            string
	ProducerID    int64
	ProducerEpoch int16
	Commit, Bump  bool
}

// EndResult answers EndTxn (ProducerID/ProducerEpoch: v5+).
type EndResult struct {
	Code          int16
	ProducerID    int64
	ProducerEpoch int16
}

// EndTxn commits or aborts: PrepareCommit/PrepareAbort is written and
// answered; markers follow once it is durable.
func (m *Machine) EndTxn(now int64, in EndInput) EndResult {
	t := m.txns[in.ID]
	fail := func(code int16) EndResult { return EndResult{Code: code, ProducerID: -1, ProducerEpoch: -1} }
	if t == nil || t.State == StateDead {
		return fail(codeMapping)
	}
	if t.retriedEnd(in) {
		return EndResult{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
	}
	switch {
	case t.ProducerID != in.ProducerID:
		return fail(codeMapping)
	case t.ProducerEpoch != in.ProducerEpoch:
		return fail(codeFenced)
	case t.pending:
		return fail(codeConcurrent)
	}
	if code := m.endFrom(now, t, in); code != 0 {
		return fail(code)
	}
	return EndResult{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch}
}

// retriedEnd: a v5 client retrying an EndTxn whose epoch bump it missed
// gets the outcome again (KIP-890).
func (t *txnState) retriedEnd(in EndInput) bool {
	if !in.Bump || in.ProducerID != t.LastProducerID || in.ProducerEpoch != t.LastProducerEpoch {
		return false
	}
	if in.Commit {
		return t.State == StatePrepareCommit || t.State == StateCompleteCommit
	}
	return t.State == StatePrepareAbort || t.State == StateCompleteAbort
}

// endFrom applies EndTxn to t's current state.
func (m *Machine) endFrom(now int64, t *txnState, in EndInput) int16 {
	target := StatePrepareAbort
	if in.Commit {
		target = StatePrepareCommit
	}
	switch {
	case t.State == StateOngoing, t.State != StateOngoing && !in.Commit && in.Bump && (t.State == StateEmpty || isComplete(t.State)):
		// Ongoing, or (v5) an abort with nothing open: bumps the epoch too.
	case t.State == target:
		return codeConcurrent
	case in.Bump && isPrepare(t.State):
		// v5: EndTxn answered the previous transaction's end with the
		// bumped epoch as soon as its Prepare record was durable, and the
		// client may end its next transaction (an abort of one that wrote
		// nothing, say) at that epoch while the markers are still being
		// written. The producer is current and its request valid: it must
		// wait for the previous transaction to complete, not fail.
		return codeConcurrent
	case isComplete(t.State) && !in.Bump && (t.State == StateCompleteCommit) == in.Commit:
		return 0 // a retried EndTxn (v0-4): already done
	default:
		return codeInvalidState
	}
	prev := t.snapshot()
	if in.Bump {
		if code := m.bump(t); code != 0 {
			return code
		}
	}
	if t.State != StateOngoing {
		t.Partitions = nil
	}
	t.State, t.LastUpdateMs = target, now
	m.write(t, prev)
	return 0
}
