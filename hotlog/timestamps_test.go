package hotlog

import (
	"testing"

	"github.com/strata-log/strata/recordbatch"
)

func TestOffsetForTimestampAcrossSegmentsAndCodecs(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SegmentBytes = 2048
	l := mustOpen(t, cfg)
	defer l.Close()
	codecs := []int{recordbatch.CodecNone, recordbatch.CodecGzip, recordbatch.CodecSnappy, codecXerialSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd}
	// Batch i has 4 records with timestamps 100*i + {0, 30, 10, 20}: not in
	// offset order inside a batch, increasing across batches.
	const batches = 60
	for i := 0; i < batches; i++ {
		var recs []testRecord
		for _, d := range []int64{0, 30, 10, 20} {
			recs = append(recs, testRecord{value: make([]byte, 100), ts: int64(100*i) + d})
		}
		mustAppend(t, l, makeBatch(t, codecs[i%len(codecs)], recs), 0)
	}
	if l.Stats().Segments < 3 {
		t.Fatalf("only %d segments", l.Stats().Segments)
	}
	leo := l.LogEndOffset()
	for _, tc := range []struct {
		ts, wantOffset, wantTs int64
	}{
		{-5, 0, 0}, {0, 0, 0}, {1, 1, 30}, {25, 1, 30}, {31, 4, 100},
		{4205, 4*42 + 1, 4230}, {5900, 4 * 59, 5900}, {5921, 4*59 + 1, 5930},
	} {
		res, ok, err := l.OffsetForTimestamp(tc.ts, leo)
		if err != nil || !ok || res.Offset != tc.wantOffset || res.Timestamp != tc.wantTs {
			t.Fatalf("OffsetForTimestamp(%d) = %+v %v %v, want %d@%d", tc.ts, res, ok, err, tc.wantOffset, tc.wantTs)
		}
	}
	if _, ok, err := l.OffsetForTimestamp(5931, leo); ok || err != nil {
		t.Fatalf("past the max: %v %v", ok, err)
	}
	// upTo hides batches that reach it.
	if _, ok, _ := l.OffsetForTimestamp(5900, 4*59+3); ok {
		t.Fatal("found a record in a batch reaching upTo")
	}
	res, ok, err := l.MaxTimestamp(leo)
	if err != nil || !ok || res.Offset != 4*59+1 || res.Timestamp != 5930 {
		t.Fatalf("MaxTimestamp = %+v %v %v", res, ok, err)
	}
	res, ok, err = l.MaxTimestamp(4 * 30) // in the middle of a segment
	if err != nil || !ok || res.Offset != 4*29+1 || res.Timestamp != 2930 {
		t.Fatalf("MaxTimestamp(120) = %+v %v %v", res, ok, err)
	}
	if err := l.DeleteRecordsBefore(4*10 + 2); err != nil {
		t.Fatal(err)
	}
	if res, ok, _ := l.OffsetForTimestamp(0, leo); !ok || res.Offset != 42 || res.Timestamp != 1010 {
		t.Fatalf("below log start: %+v", res)
	}
}

func TestOffsetForTimestampLogAppendTime(t *testing.T) {
	l := mustOpen(t, testConfig(t, t.TempDir()))
	defer l.Close()
	mustAppend(t, l, simpleBatch(t, 2, 10, 5), 0)
	b := simpleBatch(t, 3, 10, 5) // CreateTime 10..12, but the broker stamps 500
	recordbatch.SetLogAppendTime(b, 500)
	mustAppend(t, l, b, 0)
	res, ok, err := l.OffsetForTimestamp(100, l.LogEndOffset())
	if err != nil || !ok || res.Offset != 2 || res.Timestamp != 500 {
		t.Fatalf("%+v %v %v", res, ok, err)
	}
	res, ok, err = l.MaxTimestamp(l.LogEndOffset())
	if err != nil || !ok || res.Offset != 2 || res.Timestamp != 500 {
		t.Fatalf("max %+v %v %v", res, ok, err)
	}
	if _, ok, _ := l.MaxTimestamp(0); ok {
		t.Fatal("max timestamp below 0")
	}
}
