package compaction

import (
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// testRecord is one record of a test batch.
type testRecord struct {
	delta      int32 // offset delta
	tsDelta    int64
	key, value []byte
}

// testBatch describes a batch to build. Zero producer fields mean a plain
// (non-idempotent) producer.
type testBatch struct {
	base       int64
	codec      int
	producerID int64 // 0 means -1 (no producer) unless idempotent is set
	idempotent bool
	epoch      int16
	sequence   int32
	txn        bool
	control    bool
	commit     bool  // for control batches
	firstTs    int64 // MaxTimestamp = firstTs + largest tsDelta
	lastDelta  int32 // 0 means the largest record delta
	records    []testRecord
}

// testCompressor is shared by buildBatch (tests do not run in parallel):
// a zstd encoder per batch would dominate test time.
var testCompressor recordbatch.Compressor

// buildBatch encodes b with kmsg, compressing with its codec.
func buildBatch(t testing.TB, b testBatch) []byte {
	t.Helper()
	if b.control {
		b.records = []testRecord{controlRecord(b.commit)}
	}
	var raw []byte
	maxTs, lastDelta := b.firstTs, b.lastDelta
	for _, r := range b.records {
		rec := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: r.delta, Key: r.key, Value: r.value,
			Headers: []kmsg.Header{{Key: "h", Value: []byte("v")}}}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
		maxTs = max(maxTs, b.firstTs+r.tsDelta)
		lastDelta = max(lastDelta, r.delta)
	}
	payload, err := testCompressor.Compress(nil, b.codec, raw)
	if err != nil {
		t.Fatal(err)
	}
	attrs := int16(b.codec)
	if b.txn {
		attrs |= 0x10
	}
	if b.control {
		attrs |= 0x20
	}
	pid, epoch, seq := int64(-1), int16(-1), int32(-1)
	if b.idempotent || b.txn || b.control {
		pid, epoch, seq = b.producerID, b.epoch, b.sequence
	}
	h := recordbatch.Header{BaseOffset: b.base, PartitionLeaderEpoch: 3, Attributes: attrs, LastOffsetDelta: lastDelta,
		FirstTimestamp: b.firstTs, MaxTimestamp: maxTs, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq}
	return recordbatch.Encode(nil, h, int32(len(b.records)), payload)
}

// controlRecord is a transaction marker record.
func controlRecord(commit bool) testRecord {
	key := kmsg.ControlRecordKey{Type: kmsg.ControlRecordKeyTypeAbort}
	if commit {
		key.Type = kmsg.ControlRecordKeyTypeCommit
	}
	value := kmsg.EndTxnMarker{CoordinatorEpoch: 1}
	return testRecord{key: key.AppendTo(nil), value: value.AppendTo(nil)}
}

// keyed returns n records with offset deltas 0..n-1, keys and values as given.
func keyed(kv ...string) []testRecord {
	var out []testRecord
	for i := 0; i+1 < len(kv); i += 2 {
		r := testRecord{delta: int32(i / 2), key: []byte(kv[i])}
		if kv[i+1] != "<nil>" {
			r.value = []byte(kv[i+1])
		}
		out = append(out, r)
	}
	return out
}

// concat joins batches end to end.
func concat(batches ...[]byte) []byte {
	var out []byte
	for _, b := range batches {
		out = append(out, b...)
	}
	return out
}

// liveRecord is a record as seen in an output log.
type liveRecord struct {
	offset     int64
	key, value string
	tombstone  bool
}

// decodeLog validates every batch of log and returns its headers and data
// records (control records excluded).
func decodeLog(t testing.TB, log []byte) ([]recordbatch.Header, []liveRecord) {
	t.Helper()
	var headers []recordbatch.Header
	var live []liveRecord
	src := NewSliceSource(log)
	for {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			return headers, live
		}
		if err != nil {
			t.Fatal(err)
		}
		h, err := recordbatch.ValidateStored(b)
		if err != nil {
			t.Fatalf("output batch invalid: %v", err)
		}
		headers = append(headers, h)
		recs, err := recordbatch.DecodeRecords(b, 1<<24)
		if err != nil {
			t.Fatal(err)
		}
		if h.Control() {
			continue
		}
		for _, r := range recs {
			live = append(live, liveRecord{offset: h.BaseOffset + int64(r.OffsetDelta), key: string(r.Key),
				value: string(r.Value), tombstone: r.Value == nil})
		}
	}
}

// rewriteAll runs a Plan pass and a Batch pass over log with p, returning
// the output log.
func rewriteAll(t testing.TB, p Policy, log []byte) ([]byte, Stats) {
	t.Helper()
	out, stats, err := tryRewriteAll(p, log)
	if err != nil {
		t.Fatal(err)
	}
	return out, stats
}

func tryRewriteAll(p Policy, log []byte) ([]byte, Stats, error) {
	rw := NewRewriter(p)
	defer rw.Close()
	for src := NewSliceSource(log); ; {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, Stats{}, err
		}
		if err := rw.Plan(b); err != nil {
			return nil, Stats{}, err
		}
	}
	var out []byte
	for src := NewSliceSource(log); ; {
		b, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out, rw.Stats(), nil
		}
		if err != nil {
			return nil, Stats{}, err
		}
		nb, kept, err := rw.Batch(b)
		if err != nil {
			return nil, Stats{}, err
		}
		if kept {
			out = append(out, nb...)
		}
	}
}

// mapOf builds a full-range offset map over log.
func mapOf(t testing.TB, log []byte, aborted []hotlog.AbortedTxn) (*OffsetMap, int64) {
	t.Helper()
	m := NewOffsetMap(1 << 20)
	end, err := BuildMap(m, NewSliceSource(log), 0, 1<<40, aborted, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	return m, end
}
