package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/tiertest"
)

// Tiering acceptance tests against a real MinIO:
// the bucket is inspected with minio-go and tier's footer decoder,
// independently of Strata's S3 client.

const (
	tierBucketPrefix = "e2e"
	tierValueSize    = 4096
)

// startTieredBroker runs a broker whose --object-store is m's bucket, with
// fast upload and retention loops.
func startTieredBroker(t *testing.T, m *tiertest.S3Server, extra ...string) *Broker {
	args := append([]string{"--object-store", m.URL(tierBucketPrefix),
		"--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms"}, extra...)
	return StartBroker(t, withArgs(args...))
}

// tierValue is record seq's value in partition p: (p, seq), then bytes that
// do not compress, so segment sizes follow the bytes produced.
func tierValue(p int32, seq int64) []byte {
	v := make([]byte, tierValueSize)
	binary.BigEndian.PutUint32(v, uint32(p))
	binary.BigEndian.PutUint64(v[4:], uint64(seq))
	x := uint64(seq)*0x9E3779B97F4A7C15 + uint64(p) + 1
	for i := 12; i+8 <= len(v); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		binary.LittleEndian.PutUint64(v[i:], x)
	}
	return v
}

// checkTierValue: the record at offset of partition p carries (p, offset)
// (each partition's records are numbered from 0 in produce order, so the
// number equals the offset when nothing was lost or duplicated).
func checkTierValue(t testing.TB, p int32, offset int64, v []byte) {
	t.Helper()
	if len(v) != tierValueSize || int32(binary.BigEndian.Uint32(v)) != p || int64(binary.BigEndian.Uint64(v[4:])) != offset ||
		!bytes.Equal(v, tierValue(p, offset)) {
		t.Fatalf("partition %d offset %d: record does not match what was produced (len %d)", p, offset, len(v))
	}
}

// tierProducer produces numbered records to every partition of a topic.
type tierProducer struct {
	cl         *kgo.Client
	topic      string
	partitions int32
	next       []int64 // next seq per partition; owned by the producing goroutine
	failures   atomic.Int64
}

func newTierProducer(b *Broker, topic string, partitions int32) *tierProducer {
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedBytes(64<<20))
	return &tierProducer{cl: cl, topic: topic, partitions: partitions, next: make([]int64, partitions)}
}

// produce writes about bytesPerPartition to each partition and waits for
// every acknowledgement; a failed record fails t (the idempotent producer
// retries transient errors itself).
func (tp *tierProducer) produce(t testing.TB, ctx context.Context, bytesPerPartition int64) {
	t.Helper()
	n := bytesPerPartition / tierValueSize
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for i := int64(0); i < n; i++ {
		for p := int32(0); p < tp.partitions; p++ {
			r := &kgo.Record{Topic: tp.topic, Partition: p, Value: tierValue(p, tp.next[p])}
			tp.next[p]++
			wg.Add(1)
			tp.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					tp.failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Errorf("partition %d: %w", r.Partition, err))
				}
			})
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// tierStatus mirrors broker.PartitionTierStatus (the JSON of /v1/tier/status).
type tierStatus struct {
	Topic          string `json:"topic"`
	Partition      int32  `json:"partition"`
	LogStartOffset int64  `json:"logStartOffset"`
	LocalStart     int64  `json:"localStart"`
	LocalEnd       int64  `json:"localEnd"`
	Tiered         bool   `json:"tiered"`
	TieredStart    int64  `json:"tieredStart"`
	TieredEnd      int64  `json:"tieredEnd"`
	Objects        int    `json:"objects"`
	UploadLagBytes int64  `json:"uploadLagBytes"`
	LastError      string `json:"lastError"`
}

func fetchTierStatus(t testing.TB, b *Broker, topic string) map[int32]tierStatus {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr + "/v1/tier/status?topic=" + topic)
	if err != nil {
		t.Fatalf("tier status: %v", err)
	}
	defer resp.Body.Close()
	var list []tierStatus
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatalf("tier status: %v", err)
	}
	out := map[int32]tierStatus{}
	for _, s := range list {
		out[s.Partition] = s
	}
	return out
}

// activeBase is the base offset of the partition's active (last) segment.
func activeBase(t testing.TB, b *Broker, topic string, p int32) int64 {
	t.Helper()
	logs := segmentFiles(t, b.PartitionDir(topic, p))
	if len(logs) == 0 {
		t.Fatalf("%s-%d: no segment", topic, p)
	}
	base, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(logs[len(logs)-1]), ".log"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return base
}

// allSealedUploaded: for every partition, the manifest (as the broker
// reports it) reaches the active segment's base and no upload is pending.
func allSealedUploaded(t testing.TB, b *Broker, topic string, partitions int32) bool {
	status := fetchTierStatus(t, b, topic)
	for p := int32(0); p < partitions; p++ {
		s, ok := status[p]
		if !ok || !s.Tiered || s.UploadLagBytes != 0 || s.TieredEnd != activeBase(t, b, topic, p) {
			return false
		}
	}
	return true
}

// bucketObject is one segment object as minio-go and the footer decoder see it.
type bucketObject struct {
	key    string
	size   int64
	footer *tier.Footer
}

// bucketSegments lists topic's segment objects per partition, sorted by
// base offset, decoding each footer from a ranged GET of the object's end.
func bucketSegments(t testing.TB, m *tiertest.S3Server, b *Broker, topic string) map[int32][]bucketObject {
	t.Helper()
	ctx := testCtx(t, 60*time.Second)
	cl := m.Client()
	prefix := tierBucketPrefix + "/" + b.Cluster + "/topics/" + topic + "-"
	out := map[int32][]bucketObject{}
	for info := range cl.ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			t.Fatalf("list bucket: %v", info.Err)
		}
		if !strings.HasSuffix(info.Key, ".seg") {
			continue
		}
		parts, err := tier.ParseSegmentKey(strings.TrimPrefix(info.Key, tierBucketPrefix+"/"))
		if err != nil || parts.Topic != topic {
			t.Fatalf("object %s: %v", info.Key, err)
		}
		f := readFooter(t, ctx, m, info.Key, info.Size)
		if f.Topic != topic || f.Partition != parts.Partition || f.BaseOffset != parts.BaseOffset || f.TopicID != parts.TopicID {
			t.Fatalf("object %s: footer %+v does not match its key", info.Key, f)
		}
		out[parts.Partition] = append(out[parts.Partition], bucketObject{key: info.Key, size: info.Size, footer: f})
	}
	for _, objs := range out {
		sort.Slice(objs, func(i, j int) bool { return objs[i].footer.BaseOffset < objs[j].footer.BaseOffset })
	}
	return out
}

func readFooter(t testing.TB, ctx context.Context, m *tiertest.S3Server, key string, size int64) *tier.Footer {
	t.Helper()
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(size-tier.FooterSize, size-1); err != nil {
		t.Fatal(err)
	}
	obj, err := m.Client().GetObject(ctx, m.Bucket, key, opts)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	tail, err := io.ReadAll(obj)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	f, err := tier.DecodeFooter(tail)
	if err != nil {
		t.Fatalf("object %s: footer does not decode: %v", key, err)
	}
	if f.ObjectSize() != size {
		t.Fatalf("object %s: footer says %d bytes, object has %d", key, f.ObjectSize(), size)
	}
	return f
}

// checkContiguous: one object per segment, offsets from 0 without gaps or
// overlaps, matching the manifest's range and object count.
func checkContiguous(t testing.TB, objs []bucketObject, p int32, status tierStatus) {
	t.Helper()
	if len(objs) == 0 {
		t.Fatalf("partition %d: no object in the bucket", p)
	}
	next := int64(0)
	for _, o := range objs {
		if o.footer.BaseOffset != next {
			t.Fatalf("partition %d: object %s starts at %d, want %d (gap or duplicate)", p, o.key, o.footer.BaseOffset, next)
		}
		next = o.footer.LastOffset + 1
	}
	if status.Objects != len(objs) || status.TieredStart != 0 || status.TieredEnd != next {
		t.Fatalf("partition %d: manifest %d objects [%d, %d), bucket %d objects [0, %d)",
			p, status.Objects, status.TieredStart, status.TieredEnd, len(objs), next)
	}
}

// checkObjectRecords downloads an object and checks every record of its
// batches section against what was produced.
func checkObjectRecords(t testing.TB, m *tiertest.S3Server, p int32, o bucketObject) int64 {
	t.Helper()
	obj, err := m.Client().GetObject(testCtx(t, 60*time.Second), m.Bucket, o.key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(obj)
	obj.Close()
	if err != nil {
		t.Fatal(err)
	}
	batches := data[:o.footer.Sections[tier.SectionBatches].Length]
	var records int64
	for len(batches) > 0 {
		var batch kmsg.RecordBatch
		if err := batch.ReadFrom(batches); err != nil {
			t.Fatalf("%s: batch: %v", o.key, err)
		}
		size := 12 + int(batch.Length)
		recs := batch.Records
		for i := int32(0); i < batch.NumRecords; i++ {
			length, n := binary.Varint(recs)
			if n <= 0 || int(length)+n > len(recs) {
				t.Fatalf("%s: record framing", o.key)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:n+int(length)]); err != nil {
				t.Fatalf("%s: record: %v", o.key, err)
			}
			checkTierValue(t, p, batch.FirstOffset+int64(r.OffsetDelta), r.Value)
			recs = recs[n+int(length):]
			records++
		}
		batches = batches[size:]
	}
	return records
}

// checkTieredNothingLost: every offset of every partition holds its record —
// from the bucket below the tiered end, from the broker's hot log above.
func checkTieredNothingLost(t testing.TB, m *tiertest.S3Server, b *Broker, topic string, tp *tierProducer, objs map[int32][]bucketObject) {
	t.Helper()
	for p := int32(0); p < tp.partitions; p++ {
		var fromBucket int64
		for _, o := range objs[p] {
			fromBucket += checkObjectRecords(t, m, p, o)
		}
		tieredEnd := objs[p][len(objs[p])-1].footer.LastOffset + 1
		if fromBucket != tieredEnd {
			t.Fatalf("partition %d: %d records in the bucket, tiered end %d", p, fromBucket, tieredEnd)
		}
		for _, r := range consumeRange(t, b, topic, p, tieredEnd, tp.next[p]) {
			checkTierValue(t, p, r.Offset, r.Value)
		}
		if end := endOffsets(t, b.Admin(), topic)[p]; end != tp.next[p] {
			t.Fatalf("partition %d: end offset %d, produced %d", p, end, tp.next[p])
		}
	}
}

// checkLocalBound: each partition keeps at most local.retention.bytes plus
// one segment (Kafka's size rule keeps a segment while dropping it would go
// below the bound; the active segment is never deleted).
func checkLocalBound(t testing.TB, b *Broker, topic string, partitions int32, localRetention, segmentBytes int64) {
	t.Helper()
	for p := int32(0); p < partitions; p++ {
		dir := b.PartitionDir(topic, p)
		testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("%s local size within bounds", dir), func() bool {
			return logBytesOnDisk(t, dir) <= localRetention+segmentBytes
		})
	}
}

// TestTierUploadToMinIO (acceptance 1): 1 GiB into 4 partitions with
// 16 MiB segments and a 32 MiB local retention: one object per sealed
// segment, footers decode, the manifest has no gaps or duplicates, local
// disk stays within local retention plus a segment, and every record is in
// the bucket or the hot tail exactly as produced.
func TestTierUploadToMinIO(t *testing.T) {
	total := int64(1 << 30)
	if v := os.Getenv("STRATA_TIER_E2E_BYTES"); v != "" {
		total, _ = strconv.ParseInt(v, 10, 64)
	}
	checkTierUpload(t, tiertest.StartMinIO(t), total)
}

// TestTierUploadToSeaweedFS is the same check against a second S3 server,
// with a quarter of the bytes.
func TestTierUploadToSeaweedFS(t *testing.T) {
	checkTierUpload(t, tiertest.StartSeaweedFS(t), 256<<20)
}

// checkTierUpload produces total bytes to a tiered topic on m and checks
// that every sealed segment reaches the bucket, contiguous and indexed in
// etcd, the local disk stays bounded, and nothing is lost.
func checkTierUpload(t *testing.T, m *tiertest.S3Server, total int64) {
	b := startTieredBroker(t, m)
	const (
		topic          = "tiered"
		partitions     = 4
		segmentBytes   = 16 << 20
		localRetention = 32 << 20
	)
	createTopic(t, b.Admin(), topic, partitions, map[string]string{
		"internal.segment.bytes": fmt.Sprint(segmentBytes), "local.retention.bytes": fmt.Sprint(localRetention)})
	tp := newTierProducer(b, topic, partitions)
	start := time.Now()
	tp.produce(t, testCtx(t, 5*time.Minute), total/partitions)
	t.Logf("produced %d MiB in %v", total>>20, time.Since(start).Round(time.Millisecond))
	testkit.WaitFor(t, 120*time.Second, "every sealed segment in the manifest", func() bool {
		time.Sleep(200 * time.Millisecond)
		return allSealedUploaded(t, b, topic, partitions)
	})
	t.Logf("uploaded %v after the start of production", time.Since(start).Round(time.Millisecond))
	status := fetchTierStatus(t, b, topic)
	objs := bucketSegments(t, m, b, topic)
	for p := int32(0); p < partitions; p++ {
		checkContiguous(t, objs[p], p, status[p])
	}
	checkEtcdManifest(t, b, objs)
	checkLocalBound(t, b, topic, partitions, localRetention, segmentBytes)
	checkTieredNothingLost(t, m, b, topic, tp, objs)
	if out := runStrata(t, "tier", "status", "--http", b.HTTPAddr, "--topic", topic); !strings.Contains(out, "TIERED-RANGE") ||
		strings.Count(out, "\n"+topic+" ") != partitions {
		t.Fatalf("strata tier status:\n%s", out)
	}
}

// TestTierMinIOOutage (acceptance 2): MinIO is killed while segments are
// being uploaded; production goes on; after MinIO returns every sealed
// segment is uploaded within 90 s, without gaps or duplicates, and nothing
// was lost.
func TestTierMinIOOutage(t *testing.T) {
	m := tiertest.StartMinIO(t)
	// An upload cut by the outage may leave an object that never reached
	// the manifest; the sweeper must remove it.
	b := startTieredBroker(t, m, "--tier-orphan-grace", "2s", "--tier-sweep-interval", "1s")
	const (
		topic          = "outage"
		partitions     = 4
		segmentBytes   = 4 << 20
		localRetention = 8 << 20
	)
	createTopic(t, b.Admin(), topic, partitions, map[string]string{
		"internal.segment.bytes": fmt.Sprint(segmentBytes), "local.retention.bytes": fmt.Sprint(localRetention)})
	tp := newTierProducer(b, topic, partitions)
	ctx := testCtx(t, 5*time.Minute)
	tp.produce(t, ctx, 12<<20)
	testkit.WaitFor(t, 60*time.Second, "first segments uploaded", func() bool {
		s := fetchTierStatus(t, b, topic)
		return s[0].Tiered && s[3].Tiered
	})
	m.Stop()
	outageStart := time.Now()
	// Production continues while the bucket is gone (the upload lag stays
	// far below tier.upload.max.lag.bytes), for long enough that uploads
	// fail and back off.
	produced := 0
	for time.Since(outageStart) < 12*time.Second {
		tp.produce(t, ctx, 1<<20)
		produced++
		time.Sleep(200 * time.Millisecond)
	}
	if s := fetchTierStatus(t, b, topic); s[0].UploadLagBytes == 0 {
		t.Fatalf("no upload lag during the outage: %+v", s[0])
	}
	if n := metricSum(t, b, "strata_object_store_errors_total"); n == 0 {
		t.Fatal("no object-store error counted during the outage")
	}
	t.Logf("produced %d MiB per partition during a %v outage", produced, time.Since(outageStart).Round(time.Millisecond))
	m.Start()
	back := time.Now()
	testkit.WaitFor(t, 90*time.Second, "every sealed segment uploaded after MinIO's return", func() bool {
		time.Sleep(200 * time.Millisecond)
		return allSealedUploaded(t, b, topic, partitions)
	})
	t.Logf("caught up %v after MinIO returned", time.Since(back).Round(time.Millisecond))
	status := fetchTierStatus(t, b, topic)
	testkit.WaitFor(t, 30*time.Second, "orphans swept: one object per manifest entry", func() bool {
		time.Sleep(200 * time.Millisecond)
		objs := bucketSegments(t, m, b, topic)
		for p := int32(0); p < partitions; p++ {
			if len(objs[p]) != status[p].Objects {
				return false
			}
		}
		return true
	})
	objs := bucketSegments(t, m, b, topic)
	for p := int32(0); p < partitions; p++ {
		checkContiguous(t, objs[p], p, status[p])
	}
	checkEtcdManifest(t, b, objs)
	checkLocalBound(t, b, topic, partitions, localRetention, segmentBytes)
	checkTieredNothingLost(t, m, b, topic, tp, objs)
	if tp.failures.Load() != 0 {
		t.Fatalf("%d records failed", tp.failures.Load())
	}
}

// metricSum adds up every sample of a metric on the broker's /metrics.
func metricSum(t testing.TB, b *Broker, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// checkEtcdManifest reads the manifest straight from etcd (external mode,
// where the test can reach it): per partition, exactly the bucket's objects,
// in offset order, no gaps or duplicates.
func checkEtcdManifest(t testing.TB, b *Broker, objs map[int32][]bucketObject) {
	t.Helper()
	if etcdMode != "external" {
		return // the embedded etcd is private to the broker; /v1/tier/status mirrors it
	}
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.Get(testCtx(t, 10*time.Second), "/strata/"+b.Cluster+"/tier/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[int32][]string{}
	for _, kv := range resp.Kvs {
		elements := strings.Split(string(kv.Key), "/")
		if strings.HasSuffix(string(kv.Key), "/log-start") {
			continue
		}
		p, _ := strconv.Atoi(elements[len(elements)-2])
		var e struct {
			BaseOffset int64  `json:"baseOffset"`
			Key        string `json:"key"`
		}
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			t.Fatalf("manifest entry %s: %v", kv.Key, err)
		}
		got[int32(p)] = append(got[int32(p)], e.Key)
	}
	for p, list := range objs {
		want := make([]string, len(list))
		for i, o := range list {
			want[i] = strings.TrimPrefix(o.key, tierBucketPrefix+"/")
		}
		if strings.Join(got[p], ",") != strings.Join(want, ",") {
			t.Fatalf("partition %d: etcd manifest %v, bucket %v", p, got[p], want)
		}
	}
}
