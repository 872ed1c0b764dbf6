package recordbatch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestValidateBatch(t *testing.T) {
	good := simpleBatch(t, 3, 1000, 10)
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"good", good, nil},
		{"empty", nil, ErrCorrupt},
		{"short header", good[:40], ErrCorrupt},
		{"truncated", good[:len(good)-1], ErrCorrupt},
		{"crc", mutate(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), ErrCorrupt},
		{"magic 1", mutate(func(b []byte) []byte { b[PosMagic] = 1; return b }), ErrUnsupportedMagic},
		{"magic 0", mutate(func(b []byte) []byte { b[PosMagic] = 0; return b }), ErrUnsupportedMagic},
		{"magic 3", mutate(func(b []byte) []byte { b[PosMagic] = 3; return b }), ErrCorrupt},
		{"negative length", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[PosLength:], 0xffffffff)
			return b
		}), ErrCorrupt},
		{"count mismatch", mutate(func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[PosRecordCount:], 2)
			SetLogAppendTime(b, 5) // recompute the CRC so only the count is wrong
			return b
		}), ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, n, err := Validate(tc.b)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if err == nil && (n != len(good) || h.RecordCount != 3 || h.MaxTimestamp != 1002) {
				t.Fatalf("header %+v size %d", h, n)
			}
		})
	}
}

func TestSetLogAppendTime(t *testing.T) {
	b := simpleBatch(t, 2, 1000, 5)
	SetLogAppendTime(b, 777)
	h, _, err := Validate(b)
	if err != nil {
		t.Fatal(err)
	}
	if !h.LogAppendTime() || h.MaxTimestamp != 777 {
		t.Fatalf("header %+v", h)
	}
	SetLogAppendTime(b[:10], 1) // too short: must not panic
}

func TestDecodeRecordsEveryCodec(t *testing.T) {
	recs := []testRecord{
		{key: []byte("k0"), value: bytes.Repeat([]byte("abc"), 100), ts: 10},
		{key: nil, value: nil, ts: 12},
		{key: []byte("k2"), value: []byte("v2"), ts: 11},
	}
	for _, codec := range []int{CodecNone, CodecGzip, CodecSnappy, codecXerialSnappy, CodecLZ4, CodecZstd} {
		b := makeBatch(t, codec, recs)
		if _, _, err := Validate(b); err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		got, err := DecodeRecords(b, 1<<20)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if len(got) != len(recs) {
			t.Fatalf("codec %d: %d records", codec, len(got))
		}
		for i, r := range got {
			if !bytes.Equal(r.Key, recs[i].key) || !bytes.Equal(r.Value, recs[i].value) ||
				10+r.TimestampDelta64 != recs[i].ts || r.OffsetDelta != int32(i) || len(r.Headers) != 1 {
				t.Fatalf("codec %d record %d: %+v", codec, i, r)
			}
			if (recs[i].value == nil) != (r.Value == nil) {
				t.Fatalf("codec %d record %d: null value not kept", codec, i)
			}
		}
		// The bound holds for every codec (300 bytes of value alone).
		if _, err := DecodeRecords(b, 200); !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("codec %d: limit not enforced: %v", codec, err)
		}
	}
}

func TestDecodeRecordsZipBomb(t *testing.T) {
	big := []testRecord{{value: make([]byte, 8<<20), ts: 1}}
	for _, codec := range []int{CodecGzip, CodecSnappy, CodecLZ4, CodecZstd} {
		b := makeBatch(t, codec, big)
		if len(b) > 1<<20 {
			t.Fatalf("codec %d does not compress zeros well: %d", codec, len(b))
		}
		if _, err := DecodeRecords(b, 1<<20); !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("codec %d: %v", codec, err)
		}
	}
}

func TestDecodeRecordsRejectsBadCounts(t *testing.T) {
	b := simpleBatch(t, 2, 1, 3)
	binary.BigEndian.PutUint32(b[PosRecordCount:], 1<<30)
	if _, err := DecodeRecords(b, 1<<20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("huge count: %v", err)
	}
	binary.BigEndian.PutUint32(b[PosRecordCount:], 1)
	if _, err := DecodeRecords(b, 1<<20); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing record bytes: %v", err)
	}
}
