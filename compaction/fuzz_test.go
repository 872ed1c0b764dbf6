package compaction

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// fuzzSeedLogs are small valid logs: every codec, transactions, tombstones.
func fuzzSeedLogs(t testing.TB) [][]byte {
	var seeds [][]byte
	for codec := range 5 {
		seeds = append(seeds, concat(
			buildBatch(t, testBatch{base: 0, codec: codec, firstTs: oldTs, records: keyed("a", "1", "b", "<nil>")}),
			buildBatch(t, testBatch{base: 2, codec: codec, txn: true, producerID: 3, firstTs: oldTs, records: keyed("a", "2")}),
			buildBatch(t, testBatch{base: 3, control: true, producerID: 3, firstTs: oldTs}),
			buildBatch(t, testBatch{base: 4, codec: codec, idempotent: true, producerID: 4, firstTs: newTs, records: keyed("b", "3", "a", "3")}),
		))
	}
	return seeds
}

func FuzzBatchReader(f *testing.F) {
	for _, s := range fuzzSeedLogs(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewBatchReader(bytes.NewReader(data), 1<<12)
		total := 0
		for {
			b, err := r.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBatchTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if int64(len(b)) != recordbatch.LengthPrefix+int64(int32(binary.BigEndian.Uint32(b[8:]))) || len(b) > 1<<12 {
				t.Fatalf("framed %d bytes, length field says otherwise", len(b))
			}
			if total += len(b); total > len(data) {
				t.Fatalf("framed %d bytes out of %d", total, len(data))
			}
		}
	})
}

// FuzzRewrite runs a whole pass over arbitrary bytes: it must never panic,
// and whatever it outputs must be valid batches matching their inputs.
func FuzzRewrite(f *testing.F) {
	for _, s := range fuzzSeedLogs(f) {
		f.Add(s, int64(2), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, abortFrom int64, fromLogStart bool) {
		fixCRCs(data) // so mutations reach record decoding and rewriting
		aborted := []hotlog.AbortedTxn{{ProducerID: 3, FirstOffset: abortFrom, LastOffset: abortFrom + 1}}
		m := NewOffsetMap(64 * SlotBytes)
		mapEnd, err := BuildMap(m, NewSliceSource(data), 0, 1<<40, aborted, 1<<14)
		if err != nil {
			return
		}
		p := Policy{Map: m, MapEnd: mapEnd, NowMs: testNow, DeleteRetentionMs: testRetention, Aborted: aborted,
			MaxDecompressed: 1 << 14, FromLogStart: fromLogStart}
		rw := NewRewriter(p)
		defer rw.Close()
		for src := NewSliceSource(data); ; {
			b, err := src.Next()
			if err != nil {
				break
			}
			if rw.Plan(b) != nil {
				return
			}
		}
		for src := NewSliceSource(data); ; {
			b, err := src.Next()
			if err != nil {
				return
			}
			out, kept, err := rw.Batch(b)
			if err != nil {
				return
			}
			if kept {
				checkRewritten(t, b, out)
			}
		}
	})
}

// checkRewritten checks an output batch against its input. Batches passed
// through unchanged (control batches, batches past the map end) are not
// decoded by the rewriter, so only rewritten ones must decode.
func checkRewritten(t *testing.T, in, out []byte) {
	if bytes.Equal(in, out) {
		return
	}
	hin, _ := recordbatch.ParseHeader(in)
	hout, err := recordbatch.ValidateStored(out)
	if err != nil {
		t.Fatalf("invalid output: %v", err)
	}
	if hout.BaseOffset != hin.BaseOffset || hout.LastOffsetDelta != hin.LastOffsetDelta ||
		hout.Attributes != hin.Attributes || hout.RecordCount > hin.RecordCount || hout.ProducerID != hin.ProducerID {
		t.Fatalf("header changed: in %+v out %+v", hin, hout)
	}
	recs, err := recordbatch.DecodeRecords(out, 1<<20)
	if err != nil || len(recs) != int(hout.RecordCount) {
		t.Fatalf("output records: %d, err %v", len(recs), err)
	}
}

// fixCRCs recomputes the CRC of every batch framed in data, in place.
func fixCRCs(data []byte) {
	for rest := data; len(rest) >= recordbatch.HeaderSize; {
		h, err := recordbatch.ParseHeader(rest)
		if err != nil {
			return
		}
		binary.BigEndian.PutUint32(rest[17:], recordbatch.Checksum(rest[21:h.Size()]))
		rest = rest[h.Size():]
	}
}
