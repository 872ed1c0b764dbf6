package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
)

// testBatch encodes a v2 batch of n records from first, with a valid
// length and CRC-32C (the records themselves are opaque filler: the raw
// client does not decode them).
func testBatch(first int64, n int32) []byte {
	rb := kmsg.RecordBatch{FirstOffset: first, Magic: 2, LastOffsetDelta: n - 1, NumRecords: n,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, Records: make([]byte, 10*n)}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:21], recordbatch.Checksum(b[batchCRCFrom:]))
	return b
}

func concat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestWalkBatches: whole batches are counted from the fetch offset up to
// end; a partial trailing batch is left for the next fetch.
func TestWalkBatches(t *testing.T) {
	b0, b1, b2 := testBatch(0, 5), testBatch(5, 5), testBatch(10, 5)
	all := concat(b0, b1, b2)
	for _, tc := range []struct {
		name           string
		b              []byte
		next, end      int64
		n, recs, after int64
	}{
		{"all", all, 0, 100, int64(len(all)), 15, 15},
		{"skips batches before next", all, 6, 100, int64(len(b1) + len(b2)), 10, 15},
		{"stops at end", all, 0, 10, int64(len(b0) + len(b1)), 10, 10},
		{"partial trailing batch", concat(b0, b1[:len(b1)-1]), 0, 100, int64(len(b0)), 5, 5},
		{"only a partial header", b0[:11], 3, 100, 0, 0, 3},
		{"empty", nil, 7, 100, 0, 0, 7},
	} {
		n, recs, after, err := walkBatches(tc.b, tc.next, tc.end)
		if err != nil || n != tc.n || recs != tc.recs || after != tc.after {
			t.Errorf("%s: %d bytes, %d records, next %d, %v; want %d, %d, %d", tc.name, n, recs, after, err, tc.n, tc.recs, tc.after)
		}
	}
}

// TestWalkBatchesRejects: a corrupt batch or a length too short, negative
// or huge is an error or a partial batch, never a panic.
func TestWalkBatchesRejects(t *testing.T) {
	corrupt := testBatch(0, 3)
	corrupt[len(corrupt)-1] ^= 1
	for name, b := range map[string][]byte{
		"CRC mismatch":    corrupt,
		"negative length": concat(make([]byte, 8), []byte{0xFF, 0xFF, 0xFF, 0x00}, make([]byte, 40)),
		"short length":    concat(make([]byte, 8), []byte{0, 0, 0, 8}, make([]byte, 40)),
		"undecodable":     concat(make([]byte, 8), []byte{0, 0, 0, 9}, make([]byte, 9)),
	} {
		if _, _, _, err := walkBatches(b, 0, 100); !errors.Is(err, errRawBatch) {
			t.Errorf("%s: %v, want errRawBatch", name, err)
		}
	}
	huge := concat(make([]byte, 8), []byte{0x7F, 0xFF, 0xFF, 0xFF}, make([]byte, 40))
	if n, _, next, err := walkBatches(huge, 4, 100); err != nil || n != 0 || next != 4 {
		t.Errorf("2 GiB length: %d bytes, next %d, %v; want a partial batch", n, next, err)
	}
}

func partitionResponse(p int32, code int16, batches []byte) *kmsg.FetchResponse {
	resp := fetchResponse(batches)
	rp := &resp.Topics[0].Partitions[0]
	rp.Partition, rp.ErrorCode = p, code
	return resp
}

// TestTake: a response advances its partitions, drops those at their
// end, leaves retriable errors for the next fetch and fails on others.
func TestTake(t *testing.T) {
	parts := map[int32]int64{0: 0, 1: 0}
	ends := map[int32]int64{0: 5, 1: 10}
	var res leaderResult
	if err := res.take(partitionResponse(0, 0, testBatch(0, 5)), parts, ends); err != nil {
		t.Fatal(err)
	}
	if _, ok := parts[0]; ok || res.records != 5 || res.bytes != int64(len(testBatch(0, 5))) {
		t.Fatalf("after partition 0's end: parts %v, %d records, %d bytes", parts, res.records, res.bytes)
	}
	if err := res.take(partitionResponse(1, 0, testBatch(0, 4)), parts, ends); err != nil || parts[1] != 4 {
		t.Fatalf("partition 1: next %d, %v; want 4", parts[1], err)
	}
	if err := res.take(partitionResponse(1, kerr.NotLeaderForPartition.Code, nil), parts, ends); err != nil || parts[1] != 4 {
		t.Fatalf("retriable error: next %d, %v; want 4 and no error", parts[1], err)
	}
	if err := res.take(partitionResponse(1, kerr.OffsetOutOfRange.Code, nil), parts, ends); !errors.Is(err, kerr.OffsetOutOfRange) {
		t.Fatalf("offset out of range: %v", err)
	}
	if err := res.take(partitionResponse(1, 0, corruptBatch()), parts, ends); !errors.Is(err, errRawBatch) {
		t.Fatalf("corrupt batch: %v", err)
	}
}

func corruptBatch() []byte {
	b := testBatch(4, 2)
	b[len(b)-1] ^= 1
	return b
}

// TestByLeader: partitions are grouped by leader from their start offset;
// empty ranges are skipped; a partition read needs a known leader.
func TestByLeader(t *testing.T) {
	top := rawTopic{name: "t", leaders: map[int32]int32{0: 1, 1: 2, 2: 1, 3: -1}}
	got, err := top.byLeader(map[int32]int64{0: 5, 2: 9}, map[int32]int64{0: 10, 1: 3, 2: 9, 3: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[1]) != 1 || got[1][0] != 5 || len(got[2]) != 1 || got[2][1] != 0 {
		t.Fatalf("byLeader: %v", got)
	}
	if _, err := top.byLeader(nil, map[int32]int64{3: 1}); err == nil {
		t.Error("leaderless partition read: no error")
	}
	if _, err := top.byLeader(nil, map[int32]int64{9: 1}); err == nil {
		t.Error("partition not in metadata: no error")
	}
}

// TestReadRawCtxEnded: a ctx that ends before the first request is an
// incomplete read, not an error (the backfill loop relies on it); bad
// options are an error.
func TestReadRawCtxEnded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // accepts nothing: a request could only time out
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := ReadRaw(ctx, []string{ln.Addr().String()}, "t", nil, map[int32]int64{0: 10}, RawOptions{})
	if err != nil || res.Complete || res.Records != 0 {
		t.Fatalf("canceled ctx: %+v, %v; want incomplete and no error", res, err)
	}
	if _, err := ReadRaw(context.Background(), nil, "t", nil, nil, RawOptions{PartitionMaxBytes: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative partition size: %v, want ErrInvalidConfig", err)
	}
}
