package recordbatch

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAppendRecordEachRecord: records written by AppendRecord read back by
// EachRecord, by DecodeRecords inside an Encode'd batch, and by kmsg.
func TestAppendRecordEachRecord(t *testing.T) {
	in := []kmsg.Record{
		{OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0")},
		{OffsetDelta: 1, Key: nil, Value: nil, Length: 999}, // Length is recomputed
		{OffsetDelta: 2, Key: []byte("k2"), Value: bytes.Repeat([]byte("x"), 300),
			Headers: []kmsg.Header{{Key: "h", Value: []byte("hv")}}},
	}
	var section []byte
	for _, r := range in {
		section = AppendRecord(section, r)
	}
	var got []kmsg.Record
	if err := EachRecord(section, func(r *kmsg.Record) error { got = append(got, *r); return nil }); err != nil {
		t.Fatal(err)
	}
	batch := Encode(nil, Header{BaseOffset: 7, LastOffsetDelta: 2, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}, 3, section)
	if _, _, err := Validate(batch); err != nil {
		t.Fatalf("Encode'd batch: %v", err)
	}
	decoded, err := DecodeRecords(batch, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var kb kmsg.RecordBatch
	if err := kb.ReadFrom(batch); err != nil || kb.NumRecords != 3 {
		t.Fatalf("kmsg: %v %+v", err, kb)
	}
	for i, r := range in {
		for _, g := range []kmsg.Record{got[i], decoded[i]} {
			if g.OffsetDelta != r.OffsetDelta || !bytes.Equal(g.Key, r.Key) || !bytes.Equal(g.Value, r.Value) ||
				(g.Value == nil) != (r.Value == nil) || len(g.Headers) != len(r.Headers) {
				t.Fatalf("record %d: got %+v, want %+v", i, g, r)
			}
		}
	}
}

func TestEachRecordRejects(t *testing.T) {
	good := AppendRecord(nil, kmsg.Record{Key: []byte("k"), Value: []byte("v")})
	stop := errors.New("stop")
	tests := []struct {
		name    string
		section []byte
		want    error
	}{
		{"torn", good[:len(good)-1], ErrCorrupt},
		{"bad varint", []byte{0xff}, ErrCorrupt},
		{"negative length", []byte{0x01}, ErrCorrupt},
		{"fn error", good, stop},
	}
	for _, tc := range tests {
		err := EachRecord(tc.section, func(*kmsg.Record) error { return stop })
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestChecksumPieces(t *testing.T) {
	a, b := []byte("attributes.."), []byte("..end")
	whole := Checksum(append(append([]byte(nil), a...), b...))
	if UpdateChecksum(Checksum(a), b) != whole {
		t.Fatal("UpdateChecksum does not extend Checksum")
	}
	h := NewChecksum()
	h.Write(a)
	h.Write(b)
	if h.Sum32() != whole {
		t.Fatal("NewChecksum disagrees with Checksum")
	}
}
