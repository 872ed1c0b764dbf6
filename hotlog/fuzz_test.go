package hotlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/strata-log/strata/recordbatch"
)

// fuzzSeedBatches are valid batches (every codec, a LogAppendTime batch and
// two batches end to end), the material of the segment seeds.
func fuzzSeedBatches(t testing.TB) [][]byte {
	recs := []testRecord{{key: []byte("k"), value: []byte("value"), ts: 5}, {value: nil, ts: 9}}
	var seeds [][]byte
	for _, c := range []int{recordbatch.CodecNone, recordbatch.CodecGzip, recordbatch.CodecSnappy, codecXerialSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd} {
		seeds = append(seeds, makeBatch(t, c, recs))
	}
	lat := makeBatch(t, recordbatch.CodecNone, recs)
	recordbatch.SetLogAppendTime(lat, 77)
	two := append(append([]byte(nil), seeds[0]...), seeds[2]...)
	return append(seeds, lat, two)
}

// seedSegment lays the seed batches end to end with offsets assigned as
// Append would: a valid segment file.
func seedSegment(t testing.TB) []byte {
	var seg []byte
	next := int64(0)
	for _, b := range fuzzSeedBatches(t)[:7] {
		h, _ := recordbatch.ParseHeader(b)
		recordbatch.SetBaseOffsetAndEpoch(b, next, 3)
		next += int64(h.LastOffsetDelta) + 1
		seg = append(seg, b...)
	}
	return seg
}

func FuzzRecoverSegment(f *testing.F) {
	seeds := fuzzSeedBatches(f)
	f.Add(seedSegment(f))
	f.Add(seeds[0][:30])
	f.Fuzz(func(t *testing.T, segment []byte) {
		dir := fastTempDir(t)
		if err := os.WriteFile(segmentFileName(dir, 0, logSuffix), segment, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, dir)
		cfg.Durability = DurabilityReplication // fuzzing should not wait on fsyncs
		l, err := Open(cfg)
		if err != nil {
			t.Fatalf("Open must repair any segment: %v", err)
		}
		defer l.Close()
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			b, err := l.Read(off, 1<<20, l.LogEndOffset())
			if err != nil || len(b) == 0 {
				t.Fatalf("Read(%d) below LEO %d: %v", off, l.LogEndOffset(), err)
			}
			for len(b) > 0 {
				h, err := recordbatch.CheckStored(b)
				if err != nil {
					t.Fatalf("served a bad batch: %v", err)
				}
				off, b = h.LastOffset()+1, b[h.Size():]
			}
		}
		if _, err := l.Append(append([]byte(nil), seeds[0]...), 0); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// fastTempDir prefers tmpfs, where Open's fsyncs cost nothing, so the
// fuzzer runs thousands of recoveries per second instead of a few.
func fastTempDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "hotlog-fuzz-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// TestWriteFuzzSeeds regenerates testdata/fuzz seed files from valid
// segments (recordbatch has the seeds of the batch parsers). Run with HOTLOG_WRITE_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("HOTLOG_WRITE_SEEDS") == "" {
		t.Skip("set HOTLOG_WRITE_SEEDS=1 to regenerate seeds")
	}
	seeds := fuzzSeedBatches(t)
	write := func(name string, i int, b []byte) {
		dir := filepath.Join("testdata", "fuzz", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(b)))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("FuzzRecoverSegment", 0, seedSegment(t))
	torn := seedSegment(t)
	write("FuzzRecoverSegment", 1, torn[:len(torn)-7])
	flipped := seedSegment(t)
	flipped[len(seeds[0])+70] ^= 1
	write("FuzzRecoverSegment", 2, flipped)
}
