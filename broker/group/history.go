package group

// Committed offsets as of a time, folded from the records of
// __consumer_offsets (`strata restore --as-of`, which reads them from the
// bucket).

// OffsetHistory folds __consumer_offsets records, given in log order, into
// every group's committed offsets as of a time. Records stamped after
// that time are ignored; an offset tombstone removes the offset, a group
// tombstone (the group deleted) removes all of its offsets. Owned by one
// goroutine.
type OffsetHistory struct {
	asOf    int64 // ms; < 0: no bound
	offsets map[string]map[TopicPartition]Offset
}

// NewOffsetHistory folds records stamped at or before asOfMs (< 0: all).
func NewOffsetHistory(asOfMs int64) *OffsetHistory {
	return &OffsetHistory{asOf: asOfMs, offsets: map[string]map[TopicPartition]Offset{}}
}

// Add applies one record (key, value nil for a tombstone) stamped at
// timestamp (ms). Keys of unknown versions are skipped; an undecodable
// record is an error (ErrCorruptRecord) and changes nothing.
func (h *OffsetHistory) Add(key, value []byte, timestamp int64) error {
	if h.asOf >= 0 && timestamp > h.asOf {
		return nil
	}
	r, ok, err := DecodeRecord(key, value)
	if err != nil || !ok {
		return err
	}
	switch {
	case r.Kind == KindGroup && value == nil:
		delete(h.offsets, r.Group)
	case r.Kind == KindOffset && value == nil:
		delete(h.offsets[r.Group], TopicPartition{Topic: r.Topic, Partition: r.Partition})
	case r.Kind == KindOffset:
		o, err := decodeOffsetValue(value)
		if err != nil {
			return err
		}
		if h.offsets[r.Group] == nil {
			h.offsets[r.Group] = map[TopicPartition]Offset{}
		}
		h.offsets[r.Group][TopicPartition{Topic: r.Topic, Partition: r.Partition}] = o
	}
	return nil
}

// Offsets returns the folded offsets by group (groups with none left out).
// The maps are the history's own: read them, do not keep adding.
func (h *OffsetHistory) Offsets() map[string]map[TopicPartition]Offset {
	for g, m := range h.offsets {
		if len(m) == 0 {
			delete(h.offsets, g)
		}
	}
	return h.offsets
}
