package compaction

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestBatchReaderFrames(t *testing.T) {
	b1 := buildBatch(t, testBatch{base: 0, records: keyed("a", "1", "b", "2")})
	b2 := buildBatch(t, testBatch{base: 2, codec: 1, records: keyed("c", "3")})
	r := NewBatchReader(bytes.NewReader(concat(b1, b2)), 1<<20)
	for i, want := range [][]byte{b1, b2} {
		got, err := r.Next()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("batch %d: err %v, equal %v", i, err, bytes.Equal(got, want))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("end: %v, want io.EOF", err)
	}
}

func TestBatchReaderErrors(t *testing.T) {
	b := buildBatch(t, testBatch{base: 0, records: keyed("a", "1")})
	badLength := append([]byte(nil), b...)
	badLength[8], badLength[9], badLength[10], badLength[11] = 0xff, 0xff, 0xff, 0xf0 // negative
	for _, tc := range []struct {
		name     string
		data     []byte
		maxBatch int
		want     error
	}{
		{"torn header", b[:7], 1 << 20, ErrCorrupt},
		{"torn body", b[:len(b)-1], 1 << 20, ErrCorrupt},
		{"too large", b, len(b) - 1, ErrBatchTooLarge},
		{"negative length", badLength, 1 << 20, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewBatchReader(bytes.NewReader(tc.data), tc.maxBatch).Next()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}
