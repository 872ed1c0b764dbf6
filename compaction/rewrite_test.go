package compaction

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

const (
	testNow       = 1_000_000
	testRetention = 1000
	oldTs         = testNow - 5000 // past the delete horizon
	newTs         = testNow - 10   // inside delete.retention.ms
)

// offsets lists the data records' offsets and values of an output log.
func offsets(t *testing.T, log []byte) string {
	_, live := decodeLog(t, log)
	var b bytes.Buffer
	for _, r := range live {
		v := r.value
		if r.tombstone {
			v = "<nil>"
		}
		fmt.Fprintf(&b, "%d:%s=%s ", r.offset, r.key, v)
	}
	return b.String()
}

func TestRewriteRecordRules(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batches []testBatch
		mapEnd  int64 // -1: the whole log
		aborted []hotlog.AbortedTxn
		want    string
	}{
		{
			name: "latest per key survives",
			batches: []testBatch{
				{base: 0, firstTs: newTs, records: keyed("a", "1", "b", "1")},
				{base: 2, firstTs: newTs, records: keyed("a", "2", "c", "1")},
			},
			mapEnd: -1, want: "1:b=1 2:a=2 3:c=1 ",
		},
		{
			name: "records at or past the map end are kept",
			batches: []testBatch{
				{base: 0, firstTs: newTs, records: keyed("a", "1")},
				{base: 1, firstTs: newTs, records: keyed("a", "2")},
				{base: 2, firstTs: newTs, records: keyed("a", "3")},
			},
			mapEnd: 2, want: "1:a=2 2:a=3 ",
		},
		{
			name: "tombstone inside delete.retention.ms is kept",
			batches: []testBatch{
				{base: 0, firstTs: oldTs, records: keyed("a", "1")},
				{base: 1, firstTs: newTs, records: keyed("a", "<nil>")},
			},
			mapEnd: -1, want: "1:a=<nil> ",
		},
		{
			name: "tombstone past the horizon is dropped with its key",
			batches: []testBatch{
				{base: 0, firstTs: oldTs, records: keyed("a", "1", "b", "1")},
				{base: 2, firstTs: oldTs, records: keyed("a", "<nil>")},
			},
			mapEnd: -1, want: "1:b=1 ",
		},
		{
			name: "empty value is not a tombstone",
			batches: []testBatch{
				{base: 0, firstTs: oldTs, records: keyed("a", "")},
			},
			mapEnd: -1, want: "0:a= ",
		},
		{
			name: "keyless records are dropped",
			batches: []testBatch{
				{base: 0, firstTs: newTs, records: []testRecord{{delta: 0, value: []byte("x")}, {delta: 1, key: []byte("a"), value: []byte("1")}}},
			},
			mapEnd: -1, want: "1:a=1 ",
		},
		{
			name: "aborted transactional data is dropped, committed kept",
			batches: []testBatch{
				{base: 0, firstTs: newTs, records: keyed("a", "1")},
				{base: 1, firstTs: newTs, txn: true, producerID: 5, records: keyed("a", "aborted")},
				{base: 2, firstTs: newTs, control: true, producerID: 5},
				{base: 3, firstTs: newTs, txn: true, producerID: 5, records: keyed("b", "committed")},
				{base: 4, firstTs: newTs, control: true, commit: true, producerID: 5},
			},
			aborted: []hotlog.AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 2}},
			mapEnd:  -1, want: "0:a=1 3:b=committed ",
		},
		{
			name: "abort of another producer does not apply",
			batches: []testBatch{
				{base: 0, firstTs: newTs, txn: true, producerID: 6, records: keyed("a", "1")},
				{base: 1, firstTs: newTs, control: true, commit: true, producerID: 6},
			},
			aborted: []hotlog.AbortedTxn{{ProducerID: 5, FirstOffset: 0, LastOffset: 2}},
			mapEnd:  -1, want: "0:a=1 ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log []byte
			for _, b := range tc.batches {
				log = append(log, buildBatch(t, b)...)
			}
			m, end := mapOf(t, log, tc.aborted)
			if tc.mapEnd >= 0 {
				m = NewOffsetMap(1 << 16)
				var err error
				if end, err = BuildMap(m, NewSliceSource(log), 0, tc.mapEnd, tc.aborted, 1<<20); err != nil {
					t.Fatal(err)
				}
			}
			out, _ := rewriteAll(t, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention,
				Aborted: tc.aborted, FromLogStart: true}, log)
			if got := offsets(t, out); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRewritePreservesHeader checks every preserved field, the record count,
// the CRC and byte-identity of untouched batches.
func TestRewritePreservesHeader(t *testing.T) {
	in := buildBatch(t, testBatch{base: 10, codec: recordbatch.CodecLZ4, idempotent: true, producerID: 4, epoch: 2, sequence: 30,
		firstTs: newTs, records: []testRecord{
			{delta: 0, key: []byte("a"), value: []byte("old")},
			{delta: 2, tsDelta: 7, key: []byte("b"), value: []byte("keep")},
			{delta: 5, tsDelta: 3, key: []byte("a"), value: []byte("new")},
		}})
	untouched := buildBatch(t, testBatch{base: 16, firstTs: newTs, records: keyed("c", "1")})
	log := concat(in, untouched)
	m, end := mapOf(t, log, nil)
	out, stats := rewriteAll(t, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention}, log)
	hs, _ := decodeLog(t, out)
	if len(hs) != 2 {
		t.Fatalf("%d batches out", len(hs))
	}
	hin, _ := recordbatch.ValidateStored(in)
	want := hin
	want.RecordCount = 2
	got := hs[0]
	got.CRC, got.BatchLength, want.CRC, want.BatchLength = 0, 0, 0, 0
	if got != want {
		t.Fatalf("header\n got %+v\nwant %+v", got, want)
	}
	recs, err := recordbatch.DecodeRecords(out[:hs[0].Size()], 1<<20)
	if err != nil || len(recs) != 2 || recs[0].OffsetDelta != 2 || recs[0].TimestampDelta64 != 7 ||
		recs[1].OffsetDelta != 5 || recs[1].TimestampDelta64 != 3 || string(recs[1].Value) != "new" {
		t.Fatalf("records %+v, err %v", recs, err)
	}
	if !bytes.Equal(out[hs[0].Size():], untouched) {
		t.Fatal("untouched batch not passed through byte for byte")
	}
	if stats.RecordsIn != 4 || stats.RecordsOut != 3 || stats.SupersededDropped != 1 || stats.BatchesOut != 2 ||
		stats.BytesIn != int64(len(log)) || stats.BytesOut != int64(len(out)) {
		t.Fatalf("stats %+v", stats)
	}
}

// TestRewriteEveryCodec drops records from a batch of each codec and checks
// the output decodes, keeps its codec and has a valid CRC; an emptied
// producer's last batch decodes to zero records.
func TestRewriteEveryCodec(t *testing.T) {
	for _, codec := range []int{recordbatch.CodecNone, recordbatch.CodecGzip, recordbatch.CodecSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			log := concat(
				buildBatch(t, testBatch{base: 0, codec: codec, firstTs: newTs,
					records: keyed("a", "1", "b", "1", "c", "1", "d", "1", "e", "1")}),
				buildBatch(t, testBatch{base: 5, codec: codec, idempotent: true, producerID: 1, firstTs: newTs,
					records: keyed("x", "1")}),
				buildBatch(t, testBatch{base: 6, codec: codec, firstTs: newTs,
					records: keyed("b", "2", "d", "2", "x", "2")}),
			)
			m, end := mapOf(t, log, nil)
			out, stats := rewriteAll(t, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention}, log)
			hs, _ := decodeLog(t, out)
			if got, want := offsets(t, out), "0:a=1 2:c=1 4:e=1 6:b=2 7:d=2 8:x=2 "; got != want {
				t.Fatalf("got %s want %s", got, want)
			}
			if len(hs) != 3 || hs[1].RecordCount != 0 || hs[1].BaseOffset != 5 || stats.EmptyBatchesKept != 1 {
				t.Fatalf("headers %+v", hs)
			}
			for _, h := range hs {
				if h.Codec() != codec {
					t.Fatalf("codec %d, want %d", h.Codec(), codec)
				}
			}
		})
	}
}

func TestRewriteEmptyBatches(t *testing.T) {
	log := concat(
		buildBatch(t, testBatch{base: 0, firstTs: newTs, records: keyed("a", "1")}),                                               // no producer: dropped
		buildBatch(t, testBatch{base: 1, firstTs: newTs, idempotent: true, producerID: 2, records: keyed("a", "2")}),              // not last of 2: dropped
		buildBatch(t, testBatch{base: 2, firstTs: newTs, idempotent: true, producerID: 2, sequence: 1, records: keyed("a", "3")}), // last of 2: kept empty
		buildBatch(t, testBatch{base: 3, firstTs: newTs, idempotent: true, producerID: 3, records: keyed("a", "4")}),
	)
	m, end := mapOf(t, log, nil)
	out, _ := rewriteAll(t, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention}, log)
	hs, _ := decodeLog(t, out)
	if len(hs) != 2 || hs[0].BaseOffset != 2 || hs[0].RecordCount != 0 || hs[0].BaseSequence != 1 || hs[1].BaseOffset != 3 {
		t.Fatalf("headers %+v", hs)
	}

	// Without a plan, LastDataOffsets names the producers' last batches.
	p := Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention, LastDataOffsets: map[int64]int64{2: 1}}
	rw := NewRewriter(p)
	defer rw.Close()
	var kept []bool
	for src := NewSliceSource(log); ; {
		b, err := src.Next()
		if err != nil {
			break
		}
		_, k, err := rw.Batch(b)
		if err != nil {
			t.Fatal(err)
		}
		kept = append(kept, k)
	}
	if fmt.Sprint(kept) != "[false true false true]" {
		t.Fatalf("kept %v", kept)
	}
	// A batch emptied by an earlier pass goes once a later batch of its
	// producer exists, and stays byte for byte while it is the last.
	emptied := buildBatch(t, testBatch{base: 0, lastDelta: 2, idempotent: true, producerID: 2, firstTs: newTs})
	later := buildBatch(t, testBatch{base: 3, idempotent: true, producerID: 2, firstTs: newTs, records: keyed("a", "1")})
	if out, _ := rewriteAll(t, Policy{MapEnd: 10}, concat(emptied, later)); !bytes.Equal(out, later) {
		t.Fatal("earlier empty batch of a producer kept")
	}
	if out, _ := rewriteAll(t, Policy{MapEnd: 10}, emptied); !bytes.Equal(out, emptied) {
		t.Fatal("producer's last (empty) batch not kept unchanged")
	}

	if _, _, err := tryBatchUnplanned(t, log); !errors.Is(err, ErrNotPlanned) {
		t.Fatalf("unplanned: %v", err)
	}
}

// tryBatchUnplanned feeds log to a rewriter with neither Plan nor
// LastDataOffsets.
func tryBatchUnplanned(t *testing.T, log []byte) ([]byte, bool, error) {
	m, end := mapOf(t, log, nil)
	rw := NewRewriter(Policy{Map: m, MapEnd: end})
	for src := NewSliceSource(log); ; {
		b, err := src.Next()
		if err != nil {
			return nil, false, nil
		}
		if out, kept, err := rw.Batch(b); err != nil {
			return out, kept, err
		}
	}
}

func TestRewriteMarkers(t *testing.T) {
	aborted := []hotlog.AbortedTxn{{ProducerID: 5, FirstOffset: 1, LastOffset: 2}}
	txn1 := func(ts int64) []byte { // aborted txn of producer 5: data 1, marker 2
		return concat(buildBatch(t, testBatch{base: 1, firstTs: ts, txn: true, producerID: 5, records: keyed("a", "x")}),
			buildBatch(t, testBatch{base: 2, firstTs: ts, control: true, producerID: 5}))
	}
	first := buildBatch(t, testBatch{base: 0, firstTs: oldTs, control: true, commit: true, producerID: 5})
	committed := func(ts int64, key string) []byte { // committed txn: data 3, marker 4
		return concat(buildBatch(t, testBatch{base: 3, firstTs: ts, txn: true, producerID: 5, records: keyed(key, "c")}),
			buildBatch(t, testBatch{base: 4, firstTs: ts, control: true, commit: true, producerID: 5}))
	}
	later := buildBatch(t, testBatch{base: 5, firstTs: newTs, idempotent: true, producerID: 5, records: keyed("z", "1")})
	for _, tc := range []struct {
		name         string
		log          []byte
		fromLogStart bool
		want         []int64 // base offsets of output batches
	}{
		{"old markers with nothing left are dropped", concat(first, txn1(oldTs), committed(oldTs, "a"), later), true, []int64{3, 4, 5}},
		{"markers inside delete.retention.ms stay", concat(first, txn1(newTs), committed(oldTs, "a"), later), true, []int64{2, 3, 4, 5}},
		{"first marker kept unless range starts at log start", concat(first, txn1(oldTs), committed(oldTs, "a"), later), false, []int64{0, 3, 4, 5}},
		{"marker of emptied committed txn dropped", concat(first, txn1(oldTs), committed(oldTs, "z"), later), true, []int64{5}},
		{"marker kept while its txn's emptied batch is kept", concat(first, txn1(oldTs), committed(oldTs, "z")), true, []int64{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, end := mapOf(t, tc.log, aborted)
			out, _ := rewriteAll(t, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention,
				Aborted: aborted, FromLogStart: tc.fromLogStart}, tc.log)
			hs, _ := decodeLog(t, out)
			var got []int64
			for _, h := range hs {
				got = append(got, h.BaseOffset)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("batches at %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRewriteRejectsCorruptAndBadPolicy(t *testing.T) {
	b := buildBatch(t, testBatch{base: 0, records: keyed("a", "1")})
	b[len(b)-2] ^= 0x40
	if _, _, err := tryRewriteAll(Policy{}, b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("flipped byte: %v", err)
	}
	for _, p := range []Policy{{MapEnd: -1}, {DeleteRetentionMs: -1}, {MaxDecompressed: -1},
		{Aborted: []hotlog.AbortedTxn{{FirstOffset: 5, LastOffset: 4}}}} {
		if err := p.Validate(); !errors.Is(err, ErrBadPolicy) {
			t.Fatalf("%+v: %v", p, err)
		}
	}
	if err := (Policy{MapEnd: 5, DeleteRetentionMs: 1}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRewriteNonMinimalVarints: a record whose encoding kmsg would shorten
// (a two-byte zero timestamp delta) gets a recomputed Length.
func TestRewriteNonMinimalVarints(t *testing.T) {
	body := []byte{0, 0x80, 0x00, 2, 2, 'a', 2, 'x', 0} // attrs, tsDelta 0 in 2 bytes, delta 1, key "a", value "x", no headers
	rec := append([]byte{byte(len(body) << 1)}, body...)
	old := (&kmsg.Record{Length: 8, OffsetDelta: 0, Key: []byte("a"), Value: []byte("o")}).AppendTo(nil)
	h := recordbatch.Header{BaseOffset: 0, LastOffsetDelta: 1, FirstTimestamp: newTs, MaxTimestamp: newTs, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
	log := recordbatch.Encode(nil, h, 2, append(old, rec...))
	m, end := mapOf(t, log, nil)
	out, _ := rewriteAll(t, Policy{Map: m, MapEnd: end, NowMs: testNow, DeleteRetentionMs: testRetention}, log)
	if got := offsets(t, out); got != "1:a=x " {
		t.Fatalf("got %q", got)
	}
}
