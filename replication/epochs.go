package replication

// LocalEpochs reads the local log's leader-epoch checkpoint. The machine
// only reads it, during follower truncation (KIP-101/KIP-279), as etcd raft's
// RawNode reads its Storage. *hotlog.Log satisfies it.
type LocalEpochs interface {
	// LatestEpoch is the epoch of the last batch in the log, or -1 if the
	// log has no epochs.
	LatestEpoch() int32
	// EndOffsetForEpoch answers OffsetForLeaderEpoch against the local log
	// with Kafka's semantics: the latest epoch ends at the LEO; an older
	// known epoch gives (largest known epoch <= epoch, start of the next
	// known epoch); an epoch older than all known gives (epoch, start of the
	// first); an epoch newer than all known, or none known, gives (-1, -1).
	EndOffsetForEpoch(epoch int32) (int32, int64)
}

// EpochStart is one leader-epoch checkpoint entry: Epoch's first offset.
type EpochStart struct {
	Epoch       int32
	StartOffset int64
}

// MemEpochs is an in-memory LocalEpochs for tests and simulations. The zero
// value is an empty log. Not safe for concurrent use.
type MemEpochs struct {
	// Entries increase strictly in Epoch and StartOffset; every StartOffset
	// is < LEO.
	Entries []EpochStart
	LEO     int64
}

var _ LocalEpochs = (*MemEpochs)(nil)

// LatestEpoch implements LocalEpochs.
func (m *MemEpochs) LatestEpoch() int32 {
	if len(m.Entries) == 0 {
		return -1
	}
	return m.Entries[len(m.Entries)-1].Epoch
}

// EndOffsetForEpoch implements LocalEpochs.
func (m *MemEpochs) EndOffsetForEpoch(epoch int32) (int32, int64) {
	if epoch < 0 || len(m.Entries) == 0 {
		return -1, -1
	}
	if epoch == m.LatestEpoch() {
		return epoch, m.LEO
	}
	for i, e := range m.Entries {
		if e.Epoch <= epoch {
			continue
		}
		if i == 0 {
			return epoch, e.StartOffset
		}
		return m.Entries[i-1].Epoch, e.StartOffset
	}
	return -1, -1
}

// Append records n records appended in epoch.
func (m *MemEpochs) Append(epoch int32, n int64) {
	if n <= 0 {
		return
	}
	if epoch > m.LatestEpoch() {
		m.Entries = append(m.Entries, EpochStart{Epoch: epoch, StartOffset: m.LEO})
	}
	m.LEO += n
}

// Truncate drops every offset at or above offset.
func (m *MemEpochs) Truncate(offset int64) {
	if offset >= m.LEO {
		return
	}
	offset = max(offset, 0)
	n := len(m.Entries)
	for n > 0 && m.Entries[n-1].StartOffset >= offset {
		n--
	}
	m.Entries = m.Entries[:n]
	m.LEO = offset
}
