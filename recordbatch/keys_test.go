package recordbatch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var allCodecs = []int{CodecNone, CodecGzip, CodecSnappy, codecXerialSnappy, CodecLZ4, CodecZstd}

func TestCheckKeys(t *testing.T) {
	keyed := []testRecord{{key: []byte("a"), value: []byte("1")}, {key: []byte{}, value: nil},
		{key: []byte("c"), value: bytes.Repeat([]byte("v"), 100_000)}}
	keyless := []testRecord{{key: []byte("a"), value: []byte("1")}, {key: nil, value: []byte("2")}}
	for _, codec := range allCodecs {
		if err := CheckKeys(makeBatch(t, codec, keyed), 1<<20); err != nil {
			t.Errorf("codec %d: keyed batch refused: %v", codec, err)
		}
		if err := CheckKeys(makeBatch(t, codec, keyless), 1<<20); !errors.Is(err, ErrKeylessCompacted) {
			t.Errorf("codec %d: keyless batch: %v, want ErrKeylessCompacted", codec, err)
		}
		if err := CheckKeys(makeBatch(t, codec, keyed), 50_000); !errors.Is(err, ErrDecompressedTooLarge) {
			t.Errorf("codec %d: batch past the limit: %v, want ErrDecompressedTooLarge", codec, err)
		}
		short := makeBatch(t, codec, keyed)
		binary.BigEndian.PutUint32(short[PosRecordCount:], 4) // one record more than there is
		if err := CheckKeys(short, 1<<20); !errors.Is(err, ErrCorrupt) {
			t.Errorf("codec %d: count past the records: %v, want ErrCorrupt", codec, err)
		}
		long := makeBatch(t, codec, keyed)
		binary.BigEndian.PutUint32(long[PosRecordCount:], 2) // a record left over
		if err := CheckKeys(long, 1<<20); !errors.Is(err, ErrCorrupt) {
			t.Errorf("codec %d: records past the count: %v, want ErrCorrupt", codec, err)
		}
	}
}

// TestCheckKeysOfBombStaysSmall: checking the keys of a batch that inflates
// far past the limit allocates a small buffer's worth, not the limit (a
// compression bomb sent to a compacted topic in a loop once drove a broker's
// memory toward a gigabyte). The check runs through SplitProduce, the
// produce path.
func TestCheckKeysOfBombStaysSmall(t *testing.T) {
	const inflated = 80 << 20 // past maxKeyCheckDecompressed (64 MiB)
	for _, codec := range []int{CodecGzip, CodecZstd, CodecLZ4} {
		bomb := bombBatch(t, codec, inflated)
		rules := ProduceRules{Compacted: true, MaxMessageBytes: 1 << 20, ProduceVersion: 11}
		check := func() error { _, err := SplitProduce(bomb, rules, 0); return err }
		if err := check(); !errors.Is(err, ErrDecompressedTooLarge) { // warms the decoders
			t.Fatalf("codec %d: bomb: %v, want ErrDecompressedTooLarge", codec, err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := check()
		runtime.ReadMemStats(&after)
		if !errors.Is(err, ErrDecompressedTooLarge) {
			t.Fatalf("codec %d: bomb: %v, want ErrDecompressedTooLarge", codec, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("codec %d: checking a bomb's keys allocated %d MiB, want under 8", codec, alloc>>20)
		}
	}
}

// bombBatch is a batch of one keyed record whose value is inflated zero
// bytes, compressed with codec.
func bombBatch(t *testing.T, codec int, inflated int) []byte {
	t.Helper()
	var raw bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case CodecGzip:
		w, _ = kgzip.NewWriterLevel(&raw, kgzip.BestSpeed)
	case CodecZstd:
		enc, err := zstd.NewWriter(&raw, zstd.WithEncoderLevel(zstd.SpeedFastest))
		if err != nil {
			t.Fatal(err)
		}
		w = enc
	default:
		w = lz4.NewWriter(&raw)
	}
	body := []byte{0}                   // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, 0) // offset delta
	body = binary.AppendVarint(body, 1) // key length
	body = append(body, 'k')
	body = binary.AppendVarint(body, int64(inflated))
	bw := bufio.NewWriter(w)
	_, _ = bw.Write(binary.AppendVarint(nil, int64(len(body)+inflated+1)))
	_, _ = bw.Write(body)
	zeros := make([]byte, 1<<20)
	for range inflated >> 20 {
		_, _ = bw.Write(zeros)
	}
	_, _ = bw.Write(binary.AppendVarint(nil, 0)) // no headers
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(codec),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: raw.Bytes()}
	b.Length = int32(MinLength + len(b.Records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[PosCRC:], Checksum(out[PosAttributes:]))
	return out
}

// FuzzCheckKeys holds the streamed check to the decoded one: where the
// records decode, it finds a keyless record exactly when there is one;
// where they do not, it refuses the batch too.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range fuzzSeedBatches(f) {
		f.Add(s, uint16(1000))
	}
	f.Fuzz(func(t *testing.T, b []byte, limit uint16) {
		if len(b) > 12 {
			binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) // one batch filling b
		}
		recs, decodeErr := DecodeRecords(b, int(limit))
		got := CheckKeys(b, int(limit))
		if decodeErr != nil {
			if got == nil {
				t.Fatalf("records do not decode (%v) but the key check passed", decodeErr)
			}
			return
		}
		keyless := false
		for i := range recs {
			keyless = keyless || recs[i].Key == nil
		}
		if keyless != errors.Is(got, ErrKeylessCompacted) || (!keyless && got != nil) {
			t.Fatalf("keyless record: %v; streamed check: %v", keyless, got)
		}
	})
}
