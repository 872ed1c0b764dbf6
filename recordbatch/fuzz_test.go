package recordbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// fuzzSeedBatches are valid batches (every codec, a LogAppendTime batch and
// two batches end to end) used as seeds, in f.Add and in testdata/fuzz.
func fuzzSeedBatches(t testing.TB) [][]byte {
	recs := []testRecord{{key: []byte("k"), value: []byte("value"), ts: 5}, {value: nil, ts: 9}}
	var seeds [][]byte
	for _, c := range []int{CodecNone, CodecGzip, CodecSnappy, codecXerialSnappy, CodecLZ4, CodecZstd} {
		seeds = append(seeds, makeBatch(t, c, recs))
	}
	lat := makeBatch(t, CodecNone, recs)
	SetLogAppendTime(lat, 77)
	two := append(append([]byte(nil), seeds[0]...), seeds[2]...)
	return append(seeds, lat, two)
}

func FuzzValidateBatch(f *testing.F) {
	for _, s := range fuzzSeedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, n, err := Validate(b)
		if err != nil {
			return
		}
		if n != h.Size() || n > len(b) || h.RecordCount != h.LastOffsetDelta+1 {
			t.Fatalf("accepted inconsistent batch %+v size %d of %d", h, n, len(b))
		}
		c := append([]byte(nil), b[:n]...)
		SetLogAppendTime(c, 1)
		if _, _, err := Validate(c); err != nil {
			t.Fatalf("SetLogAppendTime broke a valid batch: %v", err)
		}
	})
}

func FuzzDecodeRecords(f *testing.F) {
	for _, s := range fuzzSeedBatches(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := DecodeRecords(b, 1<<16)
		if err != nil {
			return
		}
		h, _ := ParseHeader(b)
		if len(recs) != int(h.RecordCount) {
			t.Fatalf("%d records, header says %d", len(recs), h.RecordCount)
		}
	})
}

// FuzzDecompressor checks a Decompressor reused across inputs agrees with
// DecodeRecords (fresh decoders) on arbitrary batches: no state leaks from
// one batch into the next.
func FuzzDecompressor(f *testing.F) {
	for _, s := range fuzzSeedBatches(f) {
		f.Add(s, uint16(1000))
	}
	var dec Decompressor
	f.Fuzz(func(t *testing.T, b []byte, limit uint16) {
		if len(b) > 12 {
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // one batch filling b
		}
		want, wantErr := DecodeRecords(b, int(limit))
		got, gotErr := dec.DecodeRecords(b, int(limit))
		if fmt.Sprint(wantErr) != fmt.Sprint(gotErr) && (wantErr == nil || gotErr == nil ||
			errors.Is(wantErr, ErrDecompressedTooLarge) != errors.Is(gotErr, ErrDecompressedTooLarge)) {
			t.Fatalf("errors differ: %v vs %v", wantErr, gotErr)
		}
		if wantErr == nil && !reflect.DeepEqual(want, got) {
			t.Fatalf("records differ")
		}
	})
}

// TestWriteFuzzSeeds regenerates testdata/fuzz seed files from valid
// batches. Run with RECORDBATCH_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("RECORDBATCH_WRITE_SEEDS") == "" {
		t.Skip("set RECORDBATCH_WRITE_SEEDS=1 to regenerate seeds")
	}
	for i, s := range fuzzSeedBatches(t) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(s)))
		for _, name := range []string{"FuzzValidateBatch", "FuzzDecodeRecords"} {
			dir := filepath.Join("testdata", "fuzz", name)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
