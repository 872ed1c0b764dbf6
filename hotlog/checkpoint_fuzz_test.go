package hotlog

import (
	"reflect"
	"testing"
)

// FuzzDecodeEpochCheckpoint: a leader-epoch-checkpoint file read at open
// (a disk may hold anything) never panics, and what decodes encodes back
// to the same entries.
func FuzzDecodeEpochCheckpoint(f *testing.F) {
	f.Add(encodeEpochCheckpoint([]epochEntry{{Epoch: 0, StartOffset: 0}, {Epoch: 3, StartOffset: 120}, {Epoch: 7, StartOffset: 9000}}))
	f.Add(encodeEpochCheckpoint(nil))
	f.Add([]byte("0\n99999999999\n"))
	f.Add([]byte("0\n2\n1 5\n1 4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeEpochCheckpoint(data)
		if err != nil {
			return
		}
		back, err := decodeEpochCheckpoint(encodeEpochCheckpoint(entries))
		if err != nil || len(back) != len(entries) || (len(entries) > 0 && !reflect.DeepEqual(back, entries)) {
			t.Fatalf("round trip: %v -> %v (%v)", entries, back, err)
		}
	})
}
