package hotlog

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// testRecord is one record to put in a test batch.
type testRecord struct {
	key, value []byte
	ts         int64
}

// codecXerialSnappy is a test-only pseudo codec: snappy with the Java
// client's xerial framing (attributes say snappy).
const codecXerialSnappy = 100

// xerialMagic starts the Java client's xerial snappy framing (see
// recordbatch, which decodes it).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

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
		attrCodec = recordbatch.CodecSnappy
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: int16(attrCodec),
		LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: firstTs, MaxTimestamp: maxTs,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(recs)),
		Records: compressForTest(t, codec, raw)}
	b.Length = int32(recordbatch.MinLength + len(b.Records))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[recordbatch.PosCRC:], recordbatch.Checksum(out[recordbatch.PosAttributes:]))
	return out
}

func compressForTest(t testing.TB, codec int, raw []byte) []byte {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch codec {
	case recordbatch.CodecNone:
		return raw
	case recordbatch.CodecSnappy:
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
	case recordbatch.CodecGzip:
		w = kgzip.NewWriter(&buf)
	case recordbatch.CodecLZ4:
		w = lz4.NewWriter(&buf)
	case recordbatch.CodecZstd:
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
	return makeBatch(t, recordbatch.CodecNone, recs)
}

// fakeClock is a settable clock for segment.ms and retention.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func testConfig(t testing.TB, dir string) Config {
	return Config{Dir: dir, SegmentBytes: 4096, IndexIntervalBytes: 256,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func mustOpen(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, batch []byte, epoch int32) AppendResult {
	t.Helper()
	res, err := l.Append(append([]byte(nil), batch...), epoch)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

// crash stops the log as a kill -9 would: no final flush, no checkpoints,
// no clean-shutdown marker (the page cache keeps what was written).
func crash(t testing.TB, l *Log) {
	t.Helper()
	l.appendMu.Lock()
	defer l.appendMu.Unlock()
	l.mu.Lock()
	l.mu.closed = true
	l.mu.Unlock()
	l.flusher.stop()
	for _, s := range l.mu.segments {
		s.closeFiles()
	}
}

// readAll reads every batch from offset to the end and returns their headers.
func readAll(t testing.TB, l *Log, from int64) []recordbatch.Header {
	t.Helper()
	var out []recordbatch.Header
	for off := from; off < l.LogEndOffset(); {
		b, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(b) == 0 {
			t.Fatalf("Read(%d): empty below LEO %d", off, l.LogEndOffset())
		}
		for len(b) > 0 {
			h, err := recordbatch.CheckStored(b)
			if err != nil {
				t.Fatalf("Read(%d) returned a bad batch: %v", off, err)
			}
			out = append(out, h)
			off = h.LastOffset() + 1
			b = b[h.Size():]
		}
	}
	return out
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
