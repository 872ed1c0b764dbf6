package group

import "slices"

// Transactional offset commits (TxnOffsetCommit, KIP-98). Their records
// are written as a transactional batch of the producer; they stay pending,
// invisible to OffsetFetch, until the producer's transaction marker
// reaches the offsets partition: a commit applies them, an abort drops
// them. The same happens on load, from the batches and markers in the log.

// TxnCommitInput is a TxnOffsetCommit's group part. Generation -1 with an
// empty member id skips the member checks (v0-2 clients, or a producer
// outside the group).
type TxnCommitInput struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	Generation    int32
	Member        MemberRef
	Offsets       map[TopicPartition]Offset
}

// pendingTxns: producer id -> group -> partition -> offset (with the log
// offset of its record). Owned by the Machine.
type pendingTxns map[int64]map[string]map[TopicPartition]Offset

// TxnCommit validates a TxnOffsetCommit (Kafka's doTxnCommitOffsets) and
// returns the offset records to write in the producer's transactional
// batch; nothing is emitted through Ready.
func (m *Machine) TxnCommit(now int64, in TxnCommitInput) (int16, []Record) {
	if in.Group == "" {
		return errInvalidGroupID, nil
	}
	g := m.groups[in.Group]
	if g == nil {
		if in.Generation >= 0 || in.Member.MemberID != "" {
			return errUnknownMember, nil
		}
		g = newGroupState(in.Group, now)
		m.groups[in.Group] = g
	}
	if in.Member.MemberID != "" || in.Generation >= 0 {
		mb, code := g.memberCheck(in.Member)
		switch {
		case code != 0:
			return code, nil
		case in.Generation != g.generation:
			return errIllegalGeneration, nil
		}
		mb.sessionDeadline = max(mb.sessionDeadline, now+int64(mb.sessionTimeoutMs))
	}
	tps := make([]TopicPartition, 0, len(in.Offsets))
	for tp := range in.Offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	records := make([]Record, 0, len(tps))
	for _, tp := range tps {
		o := in.Offsets[tp]
		records = append(records, offsetRecord(in.Group, tp, &o))
	}
	return 0, records
}

// AddPendingTxn records an offset record of producerID's transaction,
// written at logOffset (after the append, or found on load).
func (m *Machine) AddPendingTxn(now int64, producerID, logOffset int64, r Record) error {
	if r.Kind != KindOffset || r.Value == nil {
		return nil
	}
	o, err := decodeOffsetValue(r.Value)
	if err != nil {
		return err
	}
	o.logOffset = logOffset
	if m.pending == nil {
		m.pending = pendingTxns{}
	}
	byGroup := m.pending[producerID]
	if byGroup == nil {
		byGroup = map[string]map[TopicPartition]Offset{}
		m.pending[producerID] = byGroup
	}
	if byGroup[r.Group] == nil {
		byGroup[r.Group] = map[TopicPartition]Offset{}
	}
	byGroup[r.Group][TopicPartition{Topic: r.Topic, Partition: r.Partition}] = o
	if m.groups[r.Group] == nil {
		m.groups[r.Group] = newGroupState(r.Group, now)
	}
	return nil
}

// CompleteTxn applies (commit) or drops (abort) producerID's pending
// offsets of the groups for which inPartition is true: its marker reached
// their offsets partition. A newer committed offset is never overwritten.
func (m *Machine) CompleteTxn(now int64, producerID int64, commit bool, inPartition func(group string) bool) {
	byGroup := m.pending[producerID]
	for id, offsets := range byGroup {
		if !inPartition(id) {
			continue
		}
		delete(byGroup, id)
		g := m.groups[id]
		if !commit {
			continue
		}
		if g == nil {
			g = newGroupState(id, now)
			m.groups[id] = g
		}
		for tp, o := range offsets {
			if old, ok := g.offsets[tp]; !ok || old.logOffset <= o.logOffset {
				g.offsets[tp] = o
			}
		}
	}
	if len(byGroup) == 0 {
		delete(m.pending, producerID)
	}
}

// Unstable lists the partitions of group with a pending transactional
// commit (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT).
func (m *Machine) Unstable(group string) map[TopicPartition]bool {
	out := map[TopicPartition]bool{}
	for _, byGroup := range m.pending {
		for tp := range byGroup[group] {
			out[tp] = true
		}
	}
	return out
}

// dropPending forgets the pending commits of a group no longer served.
func (m *Machine) dropPending(group string) {
	for pid, byGroup := range m.pending {
		delete(byGroup, group)
		if len(byGroup) == 0 {
			delete(m.pending, pid)
		}
	}
}
