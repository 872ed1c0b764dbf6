package compaction

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-log/strata/recordbatch"
)

// benchLog is 1000 batches of 50 records of 100-byte values over 5000 keys.
func benchLog(b *testing.B, codec int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var log []byte
	value := make([]byte, 100)
	for i := range 1000 {
		recs := make([]testRecord, 50)
		for j := range recs {
			for k := range 20 { // random head; the other 80 bytes compress
				value[k] = byte(rng.Uint32())
			}
			recs[j] = testRecord{delta: int32(j), key: fmt.Appendf(nil, "key-%d", rng.IntN(5000)), value: append([]byte(nil), value...)}
		}
		log = append(log, buildBatch(b, testBatch{base: int64(i * 50), codec: codec, firstTs: newTs, records: recs})...)
	}
	return log
}

// BenchmarkRewrite reports cleaner throughput in MB/s of input: BuildMap
// over the whole log, then the Plan and Batch passes.
func BenchmarkRewrite(b *testing.B) {
	for _, codec := range []int{recordbatch.CodecNone, recordbatch.CodecLZ4, recordbatch.CodecZstd, recordbatch.CodecGzip, recordbatch.CodecSnappy} {
		b.Run(fmt.Sprintf("codec=%d", codec), func(b *testing.B) {
			log := benchLog(b, codec)
			m := NewOffsetMap(1 << 20) // 39k keys, enough for the 5000
			b.SetBytes(int64(len(log)))
			b.ResetTimer()
			for range b.N {
				m.Reset()
				end, err := BuildMap(m, NewSliceSource(log), 0, 1<<40, nil, 1<<24)
				if err != nil {
					b.Fatal(err)
				}
				rewriteDiscard(b, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention}, log)
			}
		})
	}
}

// rewriteDiscard runs both passes, dropping the output as a segment writer
// would consume it.
func rewriteDiscard(b *testing.B, p Policy, log []byte) {
	rw := NewRewriter(p)
	defer rw.Close()
	for src := NewSliceSource(log); ; {
		batch, err := src.Next()
		if err != nil {
			break
		}
		if err := rw.Plan(batch); err != nil {
			b.Fatal(err)
		}
	}
	for src := NewSliceSource(log); ; {
		batch, err := src.Next()
		if err != nil {
			return
		}
		if _, _, err := rw.Batch(batch); err != nil {
			b.Fatal(err)
		}
	}
}
