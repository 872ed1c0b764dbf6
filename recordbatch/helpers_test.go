package recordbatch

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testRecord is one record to put in a test batch.
type testRecord struct {
	key, value []byte
	ts         int64
}

// codecXerialSnappy is a test-only pseudo codec: snappy with the Java
// client's xerial framing (attributes say snappy).
const codecXerialSnappy = 100

// makeBatch builds a valid RecordBatch v2 with the given codec.
func makeBatch(t testing.TB, codec int, recs []testRecord) []byte {
	t.Helper()
	firstTs, maxTs := recs[0].ts, recs[0].ts
	var raw []byte
	for i, r := range recs {
		maxTs = max(maxTs, r.ts)
		rec := kmsg.Record{TimestampDelta64: r.ts - firstTs, OffsetDelta: int32(i), Key: r.key, Value: r.value,
			Headers: []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}}}
		body := rec.AppendTo(nil)
		rec.Length = int32(len(body) - 1) // the zero Length varint took one byte
		raw = rec.AppendTo(raw)
	}
	attrCodec := codec
	if codec == codecXerialSnappy {
		attrCodec = CodecSnappy
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(attrCodec),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: firstTs, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)),
		Records: compressForTest(t, codec, raw)}
	b.Length = int32(MinLength + len(b.Records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[PosCRC:], Checksum(out[PosAttributes:]))
	return out
}

func compressForTest(t testing.TB, codec int, raw []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case CodecNone:
		return raw
	case CodecSnappy:
		return snappy.Encode(nil, raw)
	case codecXerialSnappy:
		out := append([]byte(nil), xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1)
		out = binary.BigEndian.AppendUint32(out, 1)
		for len(raw) > 0 { // two chunks when possible, to exercise the loop
			n := min(len(raw), max(len(raw)/2, 1))
			block := snappy.Encode(nil, raw[:n])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			raw = raw[n:]
		}
		return out
	case CodecGzip:
		w = kgzip.NewWriter(&buf)
	case CodecLZ4:
		w = lz4.NewWriter(&buf)
	case CodecZstd:
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		t.Fatalf("codec %d", codec)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// simpleBatch is a batch of n uncompressed records with timestamps ts, ts+1, ...
func simpleBatch(t testing.TB, n int, ts int64, size int) []byte {
	recs := make([]testRecord, n)
	for i := range recs {
		recs[i] = testRecord{key: []byte{byte(i)}, value: bytes.Repeat([]byte{'v'}, size), ts: ts + int64(i)}
	}
	return makeBatch(t, CodecNone, recs)
}
