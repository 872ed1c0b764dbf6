package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/recordbatch"
)

// batchSpec describes a hand-built RecordBatch v2.
type batchSpec struct {
	records    int
	valueSize  int
	attributes int16
	producerID int64
	timestamp  int64
	keyed      bool // records carry keys (else null keys)
}

// buildBatch encodes spec with kmsg and a correct length and CRC, as a
// producer would send it (records uncompressed whatever the codec bits say:
// the produce path never decompresses).
func buildBatch(spec batchSpec) []byte {
	if spec.producerID == 0 {
		spec.producerID = -1
	}
	var records []byte
	for i := range spec.records {
		r := kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: int64(i), Value: make([]byte, spec.valueSize)}
		if spec.keyed {
			r.Key = []byte{byte('a' + i%26)}
		}
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // placeholder length byte was 0: one varint byte
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           spec.attributes,
		LastOffsetDelta:      int32(spec.records - 1),
		FirstTimestamp:       spec.timestamp,
		MaxTimestamp:         spec.timestamp + int64(max(spec.records-1, 0)),
		ProducerID:           spec.producerID,
		ProducerEpoch:        -1,
		FirstSequence:        -1,
		NumRecords:           int32(spec.records),
		Records:              records,
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], recordbatch.Checksum(b[21:]))
	return b
}

func concatBatches(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// withByte returns a copy of b with b[i] = v (no CRC fix-up).
func withByteAt(b []byte, i int, v byte) []byte {
	c := append([]byte(nil), b...)
	c[i] = v
	return c
}

func TestBuildBatchIsValid(t *testing.T) {
	b := buildBatch(batchSpec{records: 3, valueSize: 10})
	h, size, err := recordbatch.Validate(b)
	if err != nil || size != len(b) || h.RecordCount != 3 {
		t.Fatalf("hand-built batch invalid: %v (size %d of %d, count %d)", err, size, len(b), h.RecordCount)
	}
}

func TestSplitProduceRecords(t *testing.T) {
	good := buildBatch(batchSpec{records: 3, valueSize: 10, producerID: 7, timestamp: 1000})
	second := buildBatch(batchSpec{records: 2, valueSize: 5, timestamp: 2000})
	large := buildBatch(batchSpec{records: 1, valueSize: 2000})
	rules := recordbatch.ProduceRules{MaxMessageBytes: 1 << 20, ProduceVersion: 11}
	tooSmall := rules
	tooSmall.MaxMessageBytes = len(large) - 1
	exact := rules
	exact.MaxMessageBytes = len(large)
	compacted := rules
	compacted.Compacted = true
	v6 := rules
	v6.ProduceVersion = 6
	recordCountMismatch := buildBatch(batchSpec{records: 3})
	binary.BigEndian.PutUint32(recordCountMismatch[57:], 2)
	binary.BigEndian.PutUint32(recordCountMismatch[17:], recordbatch.Checksum(recordCountMismatch[21:]))

	tests := []struct {
		name      string
		records   []byte
		rules     recordbatch.ProduceRules
		wantCode  int16
		wantCount int
	}{
		{"one batch", good, rules, 0, 1},
		{"two batches", concatBatches(good, second), rules, 0, 2},
		{"empty", nil, rules, kerr.InvalidRecord.Code, 0},
		{"bad crc", withByteAt(good, len(good)-1, good[len(good)-1]^0xff), rules, kerr.CorruptMessage.Code, 0},
		{"bad crc in second batch", concatBatches(good, withByteAt(second, 30, second[30]^1)), rules, kerr.CorruptMessage.Code, 0},
		{"magic 1", withByteAt(good, 16, 1), rules, kerr.UnsupportedForMessageFormat.Code, 0},
		{"magic 0", withByteAt(good, 16, 0), rules, kerr.UnsupportedForMessageFormat.Code, 0},
		{"magic 3", withByteAt(good, 16, 3), rules, kerr.CorruptMessage.Code, 0},
		{"truncated", good[:len(good)-5], rules, kerr.CorruptMessage.Code, 0},
		{"shorter than a header", good[:20], rules, kerr.CorruptMessage.Code, 0},
		{"trailing bytes", concatBatches(good, []byte{0, 0, 0}), rules, kerr.CorruptMessage.Code, 0},
		{"negative length", withByteAt(good, 8, 0x80), rules, kerr.CorruptMessage.Code, 0},
		{"huge length", withByteAt(good, 8, 0x7f), rules, kerr.CorruptMessage.Code, 0},
		{"record count mismatch", recordCountMismatch, rules, kerr.CorruptMessage.Code, 0},
		{"too large", large, tooSmall, kerr.MessageTooLarge.Code, 0},
		{"exactly max.message.bytes", large, exact, 0, 1},
		{"control batch", buildBatch(batchSpec{records: 1, attributes: 0x20}), rules, kerr.InvalidRecord.Code, 0},
		{"transactional", buildBatch(batchSpec{records: 1, attributes: 0x10, producerID: 5}), rules, 0, 1},
		{"transactional without producer id", buildBatch(batchSpec{records: 1, attributes: 0x10}), rules, kerr.InvalidRecord.Code, 0},
		{"zstd on v7+", buildBatch(batchSpec{records: 1, attributes: recordbatch.CodecZstd}), rules, 0, 1},
		{"zstd below v7", buildBatch(batchSpec{records: 1, attributes: recordbatch.CodecZstd}), v6, kerr.UnsupportedCompressionType.Code, 0},
		{"unknown codec", buildBatch(batchSpec{records: 1, attributes: 5}), rules, kerr.CorruptMessage.Code, 0},
		{"compacted, keyed records", buildBatch(batchSpec{records: 3, keyed: true}), compacted, 0, 1},
		{"compacted, records without keys", buildBatch(batchSpec{records: 3}), compacted, kerr.InvalidRecord.Code, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := recordbatch.SplitProduce(tt.records, tt.rules, 5000)
			if code := produceErrorCode(err); code != tt.wantCode {
				t.Fatalf("code %d (%v), want %d", code, err, tt.wantCode)
			}
			if err == nil && (got.Count != tt.wantCount || len(got.Records) != len(tt.records) || got.LogAppendTime != -1) {
				t.Fatalf("got %d batches, %d bytes, logAppendTime %d", got.Count, len(got.Records), got.LogAppendTime)
			}
		})
	}
}

func TestSplitProduceRecordsProducerID(t *testing.T) {
	got, err := recordbatch.SplitProduce(buildBatch(batchSpec{records: 1, producerID: 42}), recordbatch.ProduceRules{MaxMessageBytes: 1 << 20, ProduceVersion: 11}, 0)
	if err != nil || got.ProducerID != 42 {
		t.Fatalf("producer id %d, err %v; want 42", got.ProducerID, err)
	}
}

func TestSplitProduceRecordsLogAppendTime(t *testing.T) {
	records := concatBatches(buildBatch(batchSpec{records: 3, timestamp: 1000}), buildBatch(batchSpec{records: 1, timestamp: 2000}))
	const now = 1_700_000_000_000
	got, err := recordbatch.SplitProduce(records, recordbatch.ProduceRules{MaxMessageBytes: 1 << 20, LogAppendTime: true, ProduceVersion: 11}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.LogAppendTime != now || got.Count != 2 {
		t.Fatalf("logAppendTime %d count %d", got.LogAppendTime, got.Count)
	}
	for rest := records; len(rest) > 0; {
		h, size, err := recordbatch.Validate(rest) // the recomputed CRC must hold
		if err != nil {
			t.Fatalf("stamped batch no longer valid: %v", err)
		}
		if !h.LogAppendTime() || h.MaxTimestamp != now {
			t.Fatalf("batch not stamped: attrs %x maxTimestamp %d", h.Attributes, h.MaxTimestamp)
		}
		rest = rest[size:]
	}
}

func TestDataPathErrorCode(t *testing.T) {
	tests := []struct {
		err  error
		want int16
	}{
		{nil, 0},
		{fmt.Errorf("x: %w", hotlog.ErrOffsetOutOfRange), kerr.OffsetOutOfRange.Code},
		{hotlog.ErrStorage, kerr.KafkaStorageError.Code},
		{hotlog.ErrClosed, kerr.NotLeaderForPartition.Code},
		{fmt.Errorf("wait: %w", context.DeadlineExceeded), kerr.RequestTimedOut.Code},
		{errors.New("something else"), kerr.UnknownServerError.Code},
		{errNotEnoughISR, kerr.NotEnoughReplicas.Code},
		{errInvalidAcks, kerr.InvalidRequiredAcks.Code},
	}
	for _, tt := range tests {
		if got := produceErrorCode(tt.err); got != tt.want {
			t.Errorf("%v: code %d, want %d", tt.err, got, tt.want)
		}
	}
}
