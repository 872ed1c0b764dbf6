package tier

import (
	"bytes"
	"context"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/tier/tiertest"
)

// TestHotlogSegmentsToMinIO is the path the uploader will take: sealed
// segments of a real hotlog encoded and put into a real MinIO through
// OpenURL, then checked with minio-go (footer decodes, batches are the
// .log bytes) and read back through ObjectReader.
func TestHotlogSegmentsToMinIO(t *testing.T) {
	m := tiertest.StartMinIO(t)
	segments := writeHotlog(t)
	ctx := context.Background()
	// Small parts, so that the segments go up as parallel multipart uploads.
	bucket, err := OpenURL(ctx, m.URL("tiered")+"&multipart-threshold=5242880&part-size=5242880", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range segments {
		log, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := EncodeSegmentObject(bytes.NewReader(log), int64(len(log)), testMeta())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		key, _ := SegmentKey(SegmentKeyParts{Cluster: "c1", Topic: "orders.v1", TopicID: testTopicID,
			Partition: 3, BaseOffset: obj.Footer().BaseOffset, Epoch: 9})
		if err := bucket.Put(ctx, key, obj.NewReader(), obj.Size()); err != nil {
			t.Fatalf("put %s: %v", key, err)
		}
		if err := Verify(ctx, bucket, key, obj.Footer(), true); err != nil {
			t.Fatalf("verify %s: %v", key, err)
		}
		checkWithMinioGo(t, m, "tiered/"+key, log, obj.Footer())
		r, err := OpenObject(ctx, bucket, key, obj.Size())
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadBatches(ctx, r.Index.Footer.BaseOffset, math.MaxInt32)
		if err != nil || !bytes.Equal(got, log) {
			t.Fatalf("read back %d bytes, %v; want the %d-byte segment", len(got), err, len(log))
		}
	}
	listed, err := bucket.List(ctx, PartitionPrefix("c1", "orders.v1", testTopicID, 3))
	if err != nil || len(listed) != len(segments) {
		t.Fatalf("listed %d objects, %v; want %d", len(listed), err, len(segments))
	}
	for i := 1; i < len(listed); i++ {
		a, _ := ParseSegmentKey(listed[i-1].Key)
		b, _ := ParseSegmentKey(listed[i].Key)
		if a.BaseOffset >= b.BaseOffset {
			t.Fatalf("listing order %d then %d is not offset order", a.BaseOffset, b.BaseOffset)
		}
	}
}

// writeHotlog appends batches to a hotlog with small segments and returns
// the sealed segments' .log paths.
func writeHotlog(t *testing.T) []string {
	dir := filepath.Join(t.TempDir(), "orders.v1-3")
	l, err := hotlog.Open(hotlog.Config{Dir: dir, SegmentBytes: 6 << 20, Durability: hotlog.DurabilityReplication})
	if err != nil {
		t.Fatal(err)
	}
	seg := makeSegment(t, 42, 0, 6000, 4000)
	for i, b := range seg.batches {
		batch := seg.log[b.pos : b.pos+b.size]
		if _, err := l.Append(bytes.Clone(batch), int32(i/1000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	sort.Strings(paths)
	if len(paths) < 3 {
		t.Fatalf("%d segments; the test needs several", len(paths))
	}
	return paths[:len(paths)-1] // the last one is active
}

func checkWithMinioGo(t *testing.T, m *tiertest.S3Server, key string, log []byte, want *Footer) {
	t.Helper()
	ctx := context.Background()
	info, err := m.Client().StatObject(ctx, m.Bucket, key, minio.StatObjectOptions{})
	if err != nil || info.Size != want.ObjectSize() {
		t.Fatalf("minio-go stat %s: size %d, %v; want %d", key, info.Size, err, want.ObjectSize())
	}
	opts := minio.GetObjectOptions{}
	opts.SetRange(info.Size-FooterSize, info.Size-1)
	obj, err := m.Client().GetObject(ctx, m.Bucket, key, opts)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	footer, err := DecodeFooter(tail)
	if err != nil || *footer != *want {
		t.Fatalf("footer fetched with minio-go: %+v, %v", footer, err)
	}
	obj, err = m.Client().GetObject(ctx, m.Bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := io.ReadAll(obj)
	obj.Close()
	if err != nil || !bytes.Equal(whole[:len(log)], log) {
		t.Fatalf("object's batches differ from the segment file (%v)", err)
	}
}
