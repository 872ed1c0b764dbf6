package tier

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/strata-log/strata/tier/objstore"
	"github.com/strata-log/strata/tier/tiertest"
)

// benchObject is one encoded segment of a benchmark partition.
type benchObject struct {
	key        string
	enc        *EncodedObject
	base, last int64
}

// buildBenchObjects encodes n consecutive segments of about 16 MiB each.
func buildBenchObjects(b *testing.B, n int) ([]benchObject, int64) {
	var objs []benchObject
	var total int64
	base := int64(0)
	for i := 0; i < n; i++ {
		seg := makeSegment(b, uint64(i+1), base, 4000, 2800)
		enc, err := EncodeSegmentObject(bytes.NewReader(seg.log), int64(len(seg.log)), testMeta())
		if err != nil {
			b.Fatal(err)
		}
		key, err := SegmentKey(SegmentKeyParts{Cluster: "bench", Topic: "orders.v1", TopicID: testTopicID,
			Partition: 3, BaseOffset: base, Epoch: 9})
		if err != nil {
			b.Fatal(err)
		}
		last := seg.batches[len(seg.batches)-1].last
		objs = append(objs, benchObject{key: key, enc: enc, base: base, last: last})
		total += int64(len(seg.log))
		base = last + 1
	}
	return objs, total
}

func putBenchObjects(b *testing.B, store ObjectStore, objs []benchObject) {
	for _, o := range objs {
		if err := store.Put(context.Background(), o.key, o.enc.NewReader(), o.enc.Size()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkColdCatchUp compares, in the same run and through the same
// client, a consumer catching up through the cold reader (1 MiB fetches
// from offset 0 across all objects, fresh cache) with raw sequential 8 MiB
// GETs of the same batches. Reported: raw-MB/s, cold-MB/s, cold/raw, and
// GETs per GiB read. Sub-benchmarks: an in-memory store with 5 ms per call
// (a stand-in for network latency) and a real MinIO on loopback (skipped
// without the binary; scripts/install-minio.sh builds it).
//
//	go test -run '^$' -bench ColdCatchUp -benchtime 3x ./tier/
func BenchmarkColdCatchUp(b *testing.B) {
	objs, total := buildBenchObjects(b, 4)
	b.Run("mem-5ms", func(b *testing.B) {
		mem := objstore.NewMemStore()
		putBenchObjects(b, mem, objs)
		benchCatchUp(b, objstore.NewLatency(mem, 5*time.Millisecond), objs, total)
	})
	b.Run("minio", func(b *testing.B) {
		if tiertest.Binary() == "" {
			b.Skip("no minio binary (scripts/install-minio.sh)")
		}
		m := tiertest.StartMinIO(b)
		bucket, err := OpenURL(context.Background(), m.URL("bench"), nil)
		if err != nil {
			b.Fatal(err)
		}
		putBenchObjects(b, bucket, objs)
		benchCatchUp(b, bucket, objs, total)
	})
}

func benchCatchUp(b *testing.B, store ObjectStore, objs []benchObject, total int64) {
	counting := objstore.NewCounting(store)
	var rawTime, coldTime time.Duration
	var coldGets int64
	b.SetBytes(total)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		rawGets(b, store, objs)
		rawTime += time.Since(start)
		before := counting.Total(objstore.OpGet).Requests
		start = time.Now()
		coldCatchUp(b, counting, objs, total)
		coldTime += time.Since(start)
		coldGets += counting.Total(objstore.OpGet).Requests - before
	}
	mb := float64(total) * float64(b.N) / (1 << 20)
	raw, cold := mb/rawTime.Seconds(), mb/coldTime.Seconds()
	b.ReportMetric(raw, "raw-MB/s")
	b.ReportMetric(cold, "cold-MB/s")
	b.ReportMetric(cold/raw, "cold/raw")
	b.ReportMetric(float64(coldGets)/(mb/1024), "GETs/GiB")
}

// rawGets reads every object's batches with sequential 8 MiB GETs.
func rawGets(b *testing.B, store ObjectStore, objs []benchObject) {
	for _, o := range objs {
		length := o.enc.Footer().Sections[SectionBatches].Length
		for off := int64(0); off < length; off += DefaultColdFetchSize {
			if _, err := objstore.ReadAll(context.Background(), store, o.key, off, min(DefaultColdFetchSize, length-off)); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// coldCatchUp reads every batch through a fresh cold reader, as a consumer
// from offset 0 with 1 MiB fetches would.
func coldCatchUp(b *testing.B, store ObjectStore, objs []benchObject, total int64) {
	c, err := NewColdReader(store, ColdConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var got int64
	for j, o := range objs {
		req := ColdRead{Object: ColdObject{Key: o.key, Size: o.enc.Size()}, MaxBytes: 1 << 20, UpTo: 1 << 62}
		if j+1 < len(objs) {
			next := objs[j+1]
			req.Next = &ColdObject{Key: next.key, Size: next.enc.Size()}
		}
		for req.Offset = o.base; req.Offset <= o.last; {
			data, err := c.Read(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			got += int64(len(data))
			req.Offset = lastOffsetIn(b, data) + 1
		}
	}
	if got != total {
		b.Fatalf("read %d bytes, want %d", got, total)
	}
}

func lastOffsetIn(b *testing.B, data []byte) int64 {
	var last int64 = -1
	for len(data) > 0 {
		h, err := CheckStoredBatch(data)
		if err != nil {
			b.Fatal(err)
		}
		last = h.LastOffset()
		data = data[h.Size():]
	}
	return last
}
