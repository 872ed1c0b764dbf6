package group

import "testing"

// FuzzDecodeBatches: bytes read back from __consumer_offsets (a disk, a
// replica, a bucket) never panic the loader.
func FuzzDecodeBatches(f *testing.F) {
	o := Offset{Offset: 5, LeaderEpoch: 1, Metadata: "m", CommitTimestamp: 7}
	f.Add(EncodeBatch([]Record{offsetRecord("g", TopicPartition{"t", 1}, &o)}, 1))
	g := newGroupState("g", 0)
	g.addMember(&member{id: "m1", protocols: []Protocol{{Name: "range", Metadata: []byte("x")}}})
	g.protocol, g.protocolType = "range", "consumer"
	f.Add(EncodeBatch([]Record{groupRecord(g), offsetRecord("g", TopicPartition{"t", 2}, nil)}, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := NewMachine(MachineConfig{NewMemberID: func(p string) string { return p }})
		_, _ = DecodeBatches(data, func(offset int64, key, value []byte) error {
			r, ok, err := DecodeRecord(key, value)
			if err != nil || !ok {
				return err
			}
			return m.ApplyRecord(0, offset, r)
		})
	})
}

func TestRecordRoundTrip(t *testing.T) {
	o := Offset{Offset: 5, LeaderEpoch: 1, Metadata: "m", CommitTimestamp: 7}
	in := []Record{offsetRecord("g", TopicPartition{"t", 1}, &o), offsetRecord("g", TopicPartition{"t", 2}, nil)}
	var got []Record
	var offsets []int64
	next, err := DecodeBatches(EncodeBatch(in, 1), func(offset int64, key, value []byte) error {
		r, ok, err := DecodeRecord(key, value)
		if !ok || err != nil {
			t.Fatalf("decode: %v %v", ok, err)
		}
		got, offsets = append(got, r), append(offsets, offset)
		return nil
	})
	if err != nil || next != 2 || len(got) != 2 || offsets[1] != 1 {
		t.Fatalf("decoded %d records, next %d, offsets %v: %v", len(got), next, offsets, err)
	}
	if got[0].Topic != "t" || got[0].Partition != 1 || got[1].Value != nil {
		t.Fatalf("records %+v", got)
	}
	back, err := decodeOffsetValue(got[0].Value)
	if err != nil || back.Offset != 5 || back.LeaderEpoch != 1 || back.Metadata != "m" || back.CommitTimestamp != 7 {
		t.Fatalf("offset value %+v %v", back, err)
	}
}
