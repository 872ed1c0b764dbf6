package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/tier/objstore"
)

var testTopicID = metadata.TopicID{1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16}

// testRecord is one record of a test segment, with its final offset.
type testRecord struct {
	offset, ts int64
}

// testBatch describes one batch of a test segment.
type testBatch struct {
	base, last int64
	epoch      int32
	maxTS      int64
	logAppend  bool
	pos, size  int
	records    []testRecord
}

// makeBatch builds a valid RecordBatch v2 at base with the given record
// timestamps (offset deltas 0..n-1), gzip-compressed when gzip is set.
func makeBatch(t testing.TB, base int64, epoch int32, stamps []int64, gzip, logAppend bool, valueSize int) []byte {
	t.Helper()
	first, maxTS := stamps[0], stamps[0]
	var raw []byte
	for i, ts := range stamps {
		maxTS = max(maxTS, ts)
		rec := kmsg.Record{TimestampDelta64: ts - first, OffsetDelta: int32(i), Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{byte(ts)}, valueSize)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		raw = rec.AppendTo(raw)
	}
	attrs := int16(0)
	if gzip {
		var buf bytes.Buffer
		w := kgzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
		raw, attrs = buf.Bytes(), 1
	}
	if logAppend {
		attrs |= 0x08
	}
	b := kmsg.RecordBatch{FirstOffset: base, PartitionLeaderEpoch: epoch, Magic: 2, Attributes: attrs,
		LastOffsetDelta: int32(len(stamps) - 1), FirstTimestamp: first, MaxTimestamp: maxTS,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(len(stamps)), Records: raw}
	b.Length = int32(49 + len(raw))
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[17:], crc32c(out[21:]))
	return out
}

// testSegment is a generated segment: its .log bytes and what is in it.
type testSegment struct {
	log     []byte
	batches []testBatch
}

// makeSegment builds n batches from base with random sizes, timestamps
// (not monotonic), epochs that grow now and then, gaps between some
// batches (as compaction leaves), a few gzip and LogAppendTime batches.
func makeSegment(t testing.TB, seed uint64, base int64, n, maxValue int) *testSegment {
	r := rand.New(rand.NewPCG(seed, 7))
	seg := &testSegment{}
	offset, epoch, ts := base, int32(2), int64(1_700_000_000_000)
	for i := 0; i < n; i++ {
		if r.IntN(10) == 0 {
			epoch += int32(1 + r.IntN(3))
		}
		if i > 0 && r.IntN(8) == 0 {
			offset += int64(1 + r.IntN(5)) // a gap
		}
		count := 1 + r.IntN(5)
		stamps := make([]int64, count)
		for j := range stamps {
			ts += int64(r.IntN(100)) - 30
			stamps[j] = ts
		}
		logAppend := r.IntN(15) == 0
		b := makeBatch(t, offset, epoch, stamps, r.IntN(4) == 0, logAppend, r.IntN(maxValue+1))
		tb := testBatch{base: offset, last: offset + int64(count) - 1, epoch: epoch, logAppend: logAppend, pos: len(seg.log), size: len(b)}
		tb.maxTS = stamps[0]
		for j, s := range stamps {
			tb.maxTS = max(tb.maxTS, s)
			tb.records = append(tb.records, testRecord{offset: offset + int64(j), ts: s})
		}
		if logAppend {
			for j := range tb.records {
				tb.records[j].ts = tb.maxTS
			}
		}
		seg.batches = append(seg.batches, tb)
		seg.log = append(seg.log, b...)
		offset += int64(count)
	}
	return seg
}

func testMeta() SegmentMeta {
	return SegmentMeta{Topic: "orders.v1", TopicID: testTopicID, Partition: 3, UploadEpoch: 9}
}

// putObject encodes seg, stores it in a MemStore and returns the store and key.
func putObject(t testing.TB, seg *testSegment, meta SegmentMeta) (*objstore.MemStore, string, *EncodedObject) {
	t.Helper()
	obj, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), meta)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	key, err := SegmentKey(SegmentKeyParts{Cluster: "c1", Topic: meta.Topic, TopicID: meta.TopicID,
		Partition: meta.Partition, BaseOffset: obj.Footer().BaseOffset, Epoch: meta.UploadEpoch})
	if err != nil {
		t.Fatal(err)
	}
	store := objstore.NewMemStore()
	if err := store.Put(context.Background(), key, obj.NewReader(), obj.Size()); err != nil {
		t.Fatal(err)
	}
	return store, key, obj
}
