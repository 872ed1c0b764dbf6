package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/strata-log/strata/tier"
	"github.com/strata-log/strata/tier/tiertest"
)

// Helpers of the tiered compaction tests (tiercompact_test.go): a raw-Fetch
// scanner that checks every record against the keyed model while objects
// are swapped, the manifest read straight from etcd, and the bucket listed
// with minio-go, so the two can be compared independently of the broker.

// ---- the manifest, from etcd ----

// manifestEntry is one tier entry as etcd stores it (metadata.tierRecord's
// JSON) plus the partition from its etcd key.
type manifestEntry struct {
	Partition  int32
	BaseOffset int64  `json:"baseOffset"`
	LastOffset int64  `json:"lastOffset"`
	Key        string `json:"key"` // object key without the bucket prefix
	Size       int64  `json:"size"`
}

var embeddedEtcdLine = regexp.MustCompile(`msg="embedded etcd started".* endpoints=\[(\S+?)\]`)

// etcdEndpointOf is where b's metadata lives: the shared etcd in external
// mode, else the embedded etcd its last start logged (a loopback URL).
func etcdEndpointOf(t testing.TB, b *Broker) string {
	t.Helper()
	if etcdMode == "external" {
		return etcdEndpoint
	}
	log := b.Log()
	if i := strings.LastIndex(log, "\n=== "); i >= 0 {
		log = log[i:]
	}
	m := embeddedEtcdLine.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no embedded etcd endpoint in the broker's last start")
	}
	return m[1]
}

// etcdManifest reads every tier entry of b's cluster from etcd, keyed by
// object key.
func etcdManifest(t testing.TB, b *Broker) map[string]manifestEntry {
	t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdEndpointOf(t, b)}, DialTimeout: 5 * time.Second,
		Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	resp, err := cl.Get(testCtx(t, 10*time.Second), "/strata/"+b.Cluster+"/tier/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("etcd manifest: %v", err)
	}
	out := map[string]manifestEntry{}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/log-start") {
			continue
		}
		elements := strings.Split(string(kv.Key), "/")
		var e manifestEntry
		if _, err := fmt.Sscanf(elements[len(elements)-2], "%d", &e.Partition); err != nil {
			t.Fatalf("manifest key %s: %v", kv.Key, err)
		}
		if err := json.Unmarshal(kv.Value, &e); err != nil {
			t.Fatalf("manifest entry %s: %v", kv.Key, err)
		}
		out[e.Key] = e
	}
	return out
}

// ---- the bucket, with minio-go ----

// bucketState is the bucket's segment objects of a cluster next to the
// manifest in etcd.
type bucketState struct {
	objects int
	bytes   int64
}

// checkBucketMatchesManifest lists the cluster's segment objects with
// minio-go and returns why the bucket is not exactly what the etcd
// manifest names ("" when it is): an object the manifest does not name
// (an old object not deleted yet, an orphan), an entry whose object is
// missing or has another size, a partition's entries that are not
// contiguous, or an object whose footer is not its entry's. An object that
// vanishes between the listing and the footer read only means "not yet".
func checkBucketMatchesManifest(t testing.TB, m *tiertest.S3Server, b *Broker) (bucketState, string) {
	t.Helper()
	manifest := etcdManifest(t, b)
	ctx := testCtx(t, 60*time.Second)
	prefix := tierBucketPrefix + "/" + b.Cluster + "/topics/"
	var st bucketState
	listed := map[string]int64{}
	for info := range m.Client().ListObjects(ctx, m.Bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if info.Err != nil {
			t.Fatalf("list bucket: %v", info.Err)
		}
		if !strings.HasSuffix(info.Key, ".seg") {
			continue
		}
		key := strings.TrimPrefix(info.Key, tierBucketPrefix+"/")
		listed[key] = info.Size
		st.objects++
		st.bytes += info.Size
	}
	for key := range listed {
		if _, ok := manifest[key]; !ok {
			return st, fmt.Sprintf("object %s is not in the manifest (%d objects, %d entries)", key, len(listed), len(manifest))
		}
	}
	for key, e := range manifest {
		if size, ok := listed[key]; !ok || size != e.Size {
			return st, fmt.Sprintf("manifest entry [%d, %d] %s: object present %v, %d bytes, entry says %d",
				e.BaseOffset, e.LastOffset, key, ok, size, e.Size)
		}
	}
	if why := manifestGaps(manifest); why != "" {
		return st, why
	}
	for key, e := range manifest {
		f, err := objectFooter(ctx, m, tierBucketPrefix+"/"+key, e.Size)
		if isNoSuchKey(err) {
			return st, fmt.Sprintf("object %s vanished after the listing", key)
		}
		if err != nil {
			t.Fatalf("object %s: %v", key, err)
		}
		if f.Partition != e.Partition || f.BaseOffset < e.BaseOffset || f.LastOffset > e.LastOffset {
			t.Fatalf("object %s: footer partition %d [%d, %d], manifest entry partition %d [%d, %d]",
				key, f.Partition, f.BaseOffset, f.LastOffset, e.Partition, e.BaseOffset, e.LastOffset)
		}
	}
	return st, ""
}

// manifestGaps: each partition's entries must cover a contiguous range
// (compaction keeps ranges: a cleaned object covers the offsets of the
// objects it replaced, records or not).
func manifestGaps(manifest map[string]manifestEntry) string {
	byPartition := map[int32][]manifestEntry{}
	for _, e := range manifest {
		byPartition[e.Partition] = append(byPartition[e.Partition], e)
	}
	for p, list := range byPartition {
		sort.Slice(list, func(i, j int) bool { return list[i].BaseOffset < list[j].BaseOffset })
		for i := 1; i < len(list); i++ {
			if list[i].BaseOffset != list[i-1].LastOffset+1 {
				return fmt.Sprintf("partition %d: entry [%d, %d] follows [%d, %d]", p,
					list[i].BaseOffset, list[i].LastOffset, list[i-1].BaseOffset, list[i-1].LastOffset)
			}
		}
	}
	return ""
}

// waitBucketMatchesManifest polls checkBucketMatchesManifest until it holds.
func waitBucketMatchesManifest(t testing.TB, m *tiertest.S3Server, b *Broker, timeout time.Duration) (bucketState, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		st, why := checkBucketMatchesManifest(t, m, b)
		if why == "" {
			return st, time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("bucket still differs from the manifest after %v: %s", timeout, why)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// objectFooter reads and decodes an object's footer with a ranged GET.
func objectFooter(ctx context.Context, m *tiertest.S3Server, key string, size int64) (*tier.Footer, error) {
	opts := minio.GetObjectOptions{}
	if err := opts.SetRange(size-tier.FooterSize, size-1); err != nil {
		return nil, err
	}
	obj, err := m.Client().GetObject(ctx, m.Bucket, key, opts)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	tail, err := io.ReadAll(obj)
	if err != nil {
		return nil, err
	}
	f, err := tier.DecodeFooter(tail)
	if err == nil && f.ObjectSize() != size {
		err = fmt.Errorf("footer says %d bytes, object has %d", f.ObjectSize(), size)
	}
	return f, err
}

func isNoSuchKey(err error) bool {
	return err != nil && minio.ToErrorResponse(err).Code == "NoSuchKey"
}

// ---- a scanner from offset 0 with raw Fetch requests ----

// scanner reads topic/0 from offset 0 with raw Fetch requests, so every
// partition error code is seen as the broker sent it (kgo's consumer would
// retry some silently), and checks each record against a model view whose
// producer is done. It never touches testing.T: it runs on its own
// goroutine and returns errors.
type scanner struct {
	cl       *kgo.Client
	topic    string
	topicID  [16]byte
	maxBytes int32
	v        *modelView
	// keepTombstones: the deleted keys' tombstones must still be there.
	keepTombstones bool

	// Across scans: gone[o] says a complete earlier scan passed offset o
	// without a record there (compacted away); a later scan serving o
	// read a stale copy. Only offsets below coldEnd (the hot log's start,
	// fixed while nothing is produced) are checked: they exist only in the
	// bucket. Above it the hot log and the bucket hold copies cleaned
	// independently, and a fetch starting below the hot log may return
	// the bucket's batches past its start: which copy serves an offset
	// there depends on where a fetch starts.
	coldEnd int64
	gone    []bool
	checkGo bool // gone is valid (a complete scan ran)
}

// scanResult is one scan's outcome.
type scanResult struct {
	records   int
	fetches   int
	took      time.Duration
	converged bool // every record was its key's latest (and tombstones as wanted)
}

// newScanner creates a scanner's client (on the test goroutine: the
// harness registers cleanups with t).
func newScanner(t testing.TB, b *Broker, topic string, v *modelView, maxBytes int32, keepTombstones bool, coldEnd int64) *scanner {
	t.Helper()
	cl := b.Client()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(testCtx(t, 30*time.Second), cl)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	s := &scanner{cl: cl, topic: topic, maxBytes: maxBytes, v: v, keepTombstones: keepTombstones, coldEnd: coldEnd}
	for _, mt := range md.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			s.topicID = mt.TopicID
		}
	}
	return s
}

// fetch sends one Fetch for offset and returns its partition answer.
func (s *scanner) fetch(ctx context.Context, offset int64) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 100, 1, s.maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = s.topic, s.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = 0, offset, s.maxBytes, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, s.cl)
	if err != nil {
		return nil, fmt.Errorf("fetch at %d: %w", offset, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch at %d: %w", offset, err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch at %d: %d topics in the answer", offset, len(resp.Topics))
	}
	return &resp.Topics[0].Partitions[0], nil
}

// scan reads the partition once from offset 0 to the model's end.
func (s *scanner) scan(ctx context.Context) (scanResult, error) {
	start := time.Now()
	var res scanResult
	end := s.v.end()
	newest := make(map[string]int64, len(s.v.latest))
	seen := make([]bool, end)
	superseded := 0
	next, last := int64(0), int64(-1)
	stalled := time.Time{}
	for next < end {
		rp, err := s.fetch(ctx, next)
		if err != nil {
			return res, err
		}
		res.fetches++
		fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: next, Topic: s.topic},
			rp, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return res, fmt.Errorf("fetch at %d: partition error %w", next, fp.Err)
		}
		for _, r := range fp.Records {
			if r.Offset <= last || r.Offset < next {
				return res, fmt.Errorf("fetch at %d: offset %d served after %d", next, r.Offset, last)
			}
			last = r.Offset
			if r.Offset >= end {
				break
			}
			if why := s.checkRecord(r); why != "" {
				return res, errors.New(why)
			}
			seen[r.Offset] = true
			newest[string(r.Key)] = r.Offset
			if s.v.latest[string(r.Key)].offset != r.Offset {
				superseded++
			}
			res.records++
		}
		switch {
		case after > next:
			next, stalled = after, time.Time{}
		case stalled.IsZero():
			stalled = time.Now()
		case time.Since(stalled) > 15*time.Second:
			return res, fmt.Errorf("no progress past offset %d for 15s (high watermark %d)", next, rp.HighWatermark)
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	res.took = time.Since(start)
	if why := s.checkComplete(newest, seen); why != "" {
		return res, errors.New(why)
	}
	tombstones := 0
	for k, st := range s.v.latest {
		if _, ok := newest[k]; ok && st.deleted {
			tombstones++
		}
	}
	res.converged = superseded == 0 && (s.keepTombstones || tombstones == 0)
	return res, nil
}

// checkRecord: the record is the one acknowledged at its offset, and no
// complete earlier scan found that offset compacted away.
func (s *scanner) checkRecord(r *kgo.Record) string {
	if r.Offset >= int64(len(s.v.seqAt)) || s.v.seqAt[r.Offset] < 0 {
		return fmt.Sprintf("offset %d: key %q served, nothing was acknowledged there", r.Offset, r.Key)
	}
	seq := int(s.v.seqAt[r.Offset])
	k, val := s.v.gen(seq)
	if string(r.Key) != k || (r.Value == nil) != (val == nil) || string(r.Value) != string(val) {
		return fmt.Sprintf("offset %d holds key %q value %q; record %d acknowledged there has key %q value %q",
			r.Offset, r.Key, r.Value, seq, k, val)
	}
	if s.checkGo && r.Offset < s.coldEnd && s.gone[r.Offset] {
		return fmt.Sprintf("offset %d (key %q) served again after an earlier scan found it compacted away", r.Offset, r.Key)
	}
	return ""
}

// checkComplete: a scan that reached the end saw every live key's latest
// record (the producer is done, so nothing may supersede it), and every
// tombstone while they must be kept. It then records which offsets are gone.
func (s *scanner) checkComplete(newest map[string]int64, seen []bool) string {
	for k, st := range s.v.latest {
		got, ok := newest[k]
		switch {
		case !st.deleted && got != st.offset, st.deleted && s.keepTombstones && got != st.offset:
			return fmt.Sprintf("key %q: latest record at %d, scan's newest %d (present %v)", k, st.offset, got, ok)
		case ok && got > st.offset:
			return fmt.Sprintf("key %q: record at %d after its latest at %d", k, got, st.offset)
		}
	}
	s.gone = make([]bool, len(seen))
	for o, ok := range seen {
		s.gone[o] = !ok
	}
	s.checkGo = true
	return ""
}

// scanLoop scans again and again until stop is closed, a scan converges
// (converged is then closed, once, by whichever scanner got there), or a
// scan fails. It returns every scan's result and the first error.
func (s *scanner) scanLoop(ctx context.Context, stop <-chan struct{}, converged func()) ([]scanResult, error) {
	var results []scanResult
	for {
		select {
		case <-stop:
			return results, nil
		default:
		}
		res, err := s.scan(ctx)
		if err != nil {
			return results, fmt.Errorf("scan %d (%d bytes a fetch): %w", len(results)+1, s.maxBytes, err)
		}
		results = append(results, res)
		if res.converged {
			converged()
			return results, nil
		}
	}
}

// runScanners scans with one scanner per maxBytes value, concurrently,
// until one scan converges or timeout passes, and fails t on any scan
// error. It returns each scanner's results. coldEnd: see scanner.
func runScanners(t testing.TB, b *Broker, topic string, v *modelView, keepTombstones bool, coldEnd int64,
	timeout time.Duration, maxBytes ...int32,
) [][]scanResult {
	t.Helper()
	ctx := testCtx(t, timeout+30*time.Second)
	stop := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(stop) }) }
	results := make([][]scanResult, len(maxBytes))
	errs := make([]error, len(maxBytes))
	var wg sync.WaitGroup
	for i, mb := range maxBytes {
		s := newScanner(t, b, topic, v, mb, keepTombstones, coldEnd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = s.scanLoop(ctx, stop, done)
			if errs[i] != nil {
				done()
			}
		}()
	}
	timer := time.AfterFunc(timeout, done)
	wg.Wait()
	timer.Stop()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent reader: %v", err)
	}
	for _, rs := range results {
		if len(rs) > 0 && rs[len(rs)-1].converged {
			return results
		}
	}
	var last []string
	for i, rs := range results {
		last = append(last, fmt.Sprintf("reader %d: %s", i+1, describeScans(rs)))
	}
	t.Fatalf("no scan found %s compacted within %v (the broker's log tells why cleaning stalls); %s",
		topic, timeout, strings.Join(last, "; "))
	return nil
}

// ---- a producer whose pause is acknowledged ----

// steadyProducer produces generated records at a steady rate on its own
// goroutine. quiesce takes mu, which the loop holds while it checks paused
// and sends a burst, so no burst starts after quiesce has set paused.
type steadyProducer struct {
	*asyncProducer
	topic string
	stop  chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	paused bool // guarded by mu
	next   int  // next seq; guarded by mu
}

func newSteadyProducer(p *asyncProducer, topic string, rate int) *steadyProducer {
	sp := &steadyProducer{asyncProducer: p, topic: topic, stop: make(chan struct{}), done: make(chan struct{})}
	go sp.run(rate)
	return sp
}

func (p *steadyProducer) run(rate int) {
	defer close(p.done)
	const burst = 20
	tick := time.NewTicker(time.Second * burst / time.Duration(rate))
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		for i := 0; i < burst && !p.paused; i++ {
			p.produce(p.topic, p.next)
			p.next++
		}
		p.mu.Unlock()
	}
}

func (p *steadyProducer) resume() {
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
}

// quiesce pauses the producer and waits for every acknowledgement.
func (p *steadyProducer) quiesce(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	p.flush(t, 90*time.Second)
}

func (p *steadyProducer) produced() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

func (p *steadyProducer) close() {
	close(p.stop)
	<-p.done
}

// ---- misc ----

// compactionStatus is the compaction part of broker.PartitionTierStatus.
type compactionStatus struct {
	LocalStart       int64 `json:"localStart"`
	TieredEnd        int64 `json:"tieredEnd"`
	Objects          int   `json:"objects"`
	Compacted        bool  `json:"compacted"`
	CleanedTieredEnd int64 `json:"cleanedTieredEnd"`
	CleanerPasses    int64 `json:"cleanerPasses"`
	CleanedBytesIn   int64 `json:"cleanedBytesIn"`
	CleanedBytesOut  int64 `json:"cleanedBytesOut"`
	UploadLagBytes   int64 `json:"uploadLagBytes"`
}

func fetchCompactionStatus(t testing.TB, b *Broker, topic string) compactionStatus {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTPAddr + "/v1/tier/status?topic=" + topic)
	if err != nil {
		t.Fatalf("tier status: %v", err)
	}
	defer resp.Body.Close()
	var list []compactionStatus
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list) != 1 {
		t.Fatalf("tier status of %s: %v (%d partitions)", topic, err, len(list))
	}
	return list[0]
}

// rollLocalStartPast produces filler (from *seq) until the hot log starts
// above offset: everything up to offset is then read from the bucket.
func rollLocalStartPast(t testing.TB, b *Broker, p *asyncProducer, topic string, offset int64, seq *int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for fetchCompactionStatus(t, b, topic).LocalStart <= offset {
		if time.Now().After(deadline) {
			t.Fatalf("hot log of %s still starts at or below %d after 60s of filler", topic, offset)
		}
		for range 2000 {
			p.produce(topic, *seq)
			*seq++
		}
		p.flush(t, 60*time.Second)
		time.Sleep(100 * time.Millisecond)
	}
}

// tempLeftovers lists the temporary files of tiered cleaning in the data
// directory (the spool of a run's input and the compactor's output) last
// modified before olderThan.
func tempLeftovers(t testing.TB, dataDir string, olderThan time.Time) []string {
	t.Helper()
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, ".clean-spool-") && !strings.HasPrefix(n, "strata-compact-") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(olderThan) {
			out = append(out, fmt.Sprintf("%s (%d bytes)", n, info.Size()))
		}
	}
	return out
}

// logCount counts lines of the broker's log (since its last start if
// lastStart) containing substr.
func logCount(b *Broker, substr string, lastStart bool) int {
	log := b.Log()
	if i := strings.LastIndex(log, "\n=== "); lastStart && i >= 0 {
		log = log[i:]
	}
	return strings.Count(log, substr)
}
