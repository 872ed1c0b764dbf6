package txn

import (
	"reflect"
	"testing"
)

// FuzzDecodeRecord: __transaction_state records read back from a disk, a
// replica or the bucket never panic the loader, and what decodes encodes
// back to the same transaction.
func FuzzDecodeRecord(f *testing.F) {
	ongoing := &Meta{ID: "tx-1", ProducerID: 7, ProducerEpoch: 3, LastProducerID: 6, LastProducerEpoch: 9,
		TimeoutMs: 60000, State: StateOngoing, StartMs: 5, LastUpdateMs: 9,
		Partitions: []TopicPartition{{Topic: "a", Partition: 0}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: 1}}}
	empty := &Meta{ID: "tx-2", ProducerID: 1, LastProducerID: -1, LastProducerEpoch: -1, State: StateEmpty}
	for _, m := range []*Meta{ongoing, empty} {
		r := encodeRecord(m)
		f.Add(r.Key, r.Value, false)
	}
	dead := encodeRecord(&Meta{ID: "tx-3", State: StateDead})
	f.Add(dead.Key, []byte{}, true)
	f.Add([]byte{0, 1, 0, 0}, []byte{0, 0}, false) // key version 1: skipped
	f.Fuzz(func(t *testing.T, key, value []byte, tombstone bool) {
		if tombstone {
			value = nil
		}
		m, ok, err := DecodeRecord(key, value)
		if err != nil || !ok || m.State == StateDead {
			return
		}
		again := encodeRecord(&m)
		back, ok, err := DecodeRecord(again.Key, again.Value)
		if err != nil || !ok {
			t.Fatalf("re-encoded %+v does not decode: %v", m, err)
		}
		if back.ID != m.ID || back.ProducerID != m.ProducerID || back.ProducerEpoch != m.ProducerEpoch ||
			back.State != m.State || back.TimeoutMs != m.TimeoutMs || !reflect.DeepEqual(back.Partitions, m.Partitions) {
			t.Fatalf("round trip changed the transaction:\n%+v\n%+v", m, back)
		}
	})
}
