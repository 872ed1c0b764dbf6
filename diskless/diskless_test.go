package diskless

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/tier/objstore"
)

// batch is one RecordBatch v2 of n records with values "<tag>-<i>".
func batch(tag string, n int, pid int64, seq int32) []byte {
	return batchAt(tag, n, pid, seq, 1000)
}

// batchAt is batch with its records' timestamp (ms).
func batchAt(tag string, n int, pid int64, seq int32, timestamp int64) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = fmt.Appendf(nil, "%s-%d", tag, i)
		recs = recordbatch.AppendRecord(recs, r)
	}
	h := recordbatch.Header{LastOffsetDelta: int32(n - 1), FirstTimestamp: timestamp, MaxTimestamp: timestamp,
		ProducerID: pid, ProducerEpoch: 0, BaseSequence: seq}
	if pid < 0 {
		h.ProducerEpoch, h.BaseSequence = -1, -1
	}
	return recordbatch.Encode(nil, h, int32(n), recs)
}

// values decodes every record value of batches, checking that offsets run
// on from first without a gap.
func values(t *testing.T, data []byte, first int64) []string {
	t.Helper()
	var out []string
	next := first
	for len(data) > 0 {
		h, err := recordbatch.CheckStored(data)
		if err != nil {
			t.Fatalf("served batch: %v", err)
		}
		if h.BaseOffset != next {
			t.Fatalf("batch at offset %d, want %d", h.BaseOffset, next)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(data[:h.Size()]); err != nil {
			t.Fatal(err)
		}
		recs := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			var r kmsg.Record
			n, err := readRecord(recs, &r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(r.Value))
			recs = recs[n:]
		}
		next = h.LastOffset() + 1
		data = data[h.Size():]
	}
	return out
}

func readRecord(b []byte, r *kmsg.Record) (int, error) {
	length, n := varint(b)
	if n <= 0 || int(length)+n > len(b) {
		return 0, errors.New("bad record length")
	}
	err := r.ReadFrom(b[:n+int(length)])
	return n + int(length), err
}

func varint(b []byte) (int64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		if c < 0x80 {
			u := x | uint64(c)<<s
			return int64(u>>1) ^ -int64(u&1), i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

type rig struct {
	store  *metadata.Store
	bucket *objstore.MemStore
	app    *Appender
	ix     *Index
	reader *Reader
	stats  *Stats
}

func newRig(t *testing.T, endpoints []string, cluster string, linger time.Duration) *rig {
	t.Helper()
	return newRigOn(t, endpoints, cluster, linger, objstore.NewMemStore())
}

// newRigOn is a broker's diskless side on a bucket shared with others.
func newRigOn(t *testing.T, endpoints []string, cluster string, linger time.Duration, bucket *objstore.MemStore) *rig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{store: store, bucket: bucket, stats: &Stats{}}
	r.app = NewAppender(Config{Cluster: cluster, Linger: linger}, store, r.bucket, r.stats)
	r.ix = NewIndex(store, nil)
	r.reader = NewReader(r.ix, r.bucket, cluster, 0, r.stats)
	done := make(chan struct{})
	go func() { defer close(done); r.ix.Run(ctx) }()
	t.Cleanup(func() { r.app.Close(); cancel(); <-done; store.Close() })
	<-r.ix.Ready()
	return r
}

// TestAppendCommitRead: producers of several partitions write through one
// appender; one shared object holds a linger's worth of batches, offsets
// are contiguous per partition, and the reader serves every record once,
// in order, from one GET per object.
func TestAppendCommitRead(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-read", 100*time.Millisecond)
	ctx := context.Background()
	parts := []metadata.TierPartition{{TopicID: metadata.TopicID{1}, Partition: 0}, {TopicID: metadata.TopicID{1}, Partition: 1}, {TopicID: metadata.TopicID{2}, Partition: 0}}
	var wg sync.WaitGroup
	for pi, tp := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				res, err := r.app.Append(ctx, tp, batch(fmt.Sprintf("p%d-b%d", pi, i), 4, -1, -1))
				if err != nil || res.LastOffset-res.BaseOffset != 3 {
					t.Errorf("append %v #%d: %+v, %v", tp, i, res, err)
				}
			}
		}()
	}
	wg.Wait()
	s := r.stats.Snapshot()
	if s.Objects == 0 || s.Objects > 6 {
		t.Fatalf("%d objects for 9 appends of 3 concurrent producers: want them shared", s.Objects)
	}
	for pi, tp := range parts {
		waitPositions(t, r.ix, tp, 12)
		data, err := r.reader.Read(ctx, tp, 0, 1<<20, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		got := values(t, data, 0)
		if len(got) != 12 || got[0] != fmt.Sprintf("p%d-b0-0", pi) || got[11] != fmt.Sprintf("p%d-b2-3", pi) {
			t.Fatalf("partition %v read %v", tp, got)
		}
		// From the middle of a batch: the batch holding the offset comes whole.
		mid, err := r.reader.Read(ctx, tp, 6, 1, 1<<62)
		if err != nil || len(values(t, mid, 4)) != 4 {
			t.Fatalf("read from offset 6 (maxBytes 1): %v", err)
		}
	}
	if got := r.stats.Snapshot().Gets; got != s.Objects {
		t.Fatalf("%d GETs for %d objects: the cache should serve every partition of an object from one", got, s.Objects)
	}
	if _, err := r.reader.Read(ctx, parts[0], 13, 100, 1<<62); !errors.Is(err, hotlog.ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v", err)
	}
}

// TestIdempotentRetryAcrossBrokers: two appenders (two brokers) commit to
// the same partition; a producer's retry through the other broker is
// answered with the original offsets and nothing is written twice.
func TestIdempotentRetryAcrossBrokers(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	a := newRig(t, endpoints, "dl-idem", 20*time.Millisecond)
	b := newRigOn(t, endpoints, "dl-idem", 20*time.Millisecond, a.bucket)
	ctx := context.Background()
	tp := metadata.TierPartition{TopicID: metadata.TopicID{9}, Partition: 3}
	first, err := a.app.Append(ctx, tp, batch("x", 2, 42, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.app.Append(ctx, tp, batch("other", 1, -1, -1)); err != nil {
		t.Fatal(err)
	}
	retry, err := b.app.Append(ctx, tp, batch("x", 2, 42, 0))
	if err != nil || retry != first {
		t.Fatalf("retry through the other broker: %+v, %v; want the original %+v", retry, err, first)
	}
	if _, err := b.app.Append(ctx, tp, batch("gap", 1, 42, 7)); !errors.Is(err, hotlog.ErrOutOfOrderSequence) {
		t.Fatalf("sequence gap: %v", err)
	}
	next, err := a.app.Append(ctx, tp, batch("y", 1, 42, 2))
	if err != nil || next.BaseOffset != 3 {
		t.Fatalf("next in sequence: %+v, %v; want offset 3", next, err)
	}
	waitPositions(t, a.ix, tp, 4)
	data, err := a.reader.Read(ctx, tp, 0, 1<<20, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, data, 0); fmt.Sprint(got) != "[x-0 x-1 other-0 y-0]" {
		t.Fatalf("log %v", got)
	}
}

// TestPutFailureFailsTheBatches: a failed PUT fails every batch of the
// object with ErrObjectPut and commits nothing.
func TestPutFailureFailsTheBatches(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-put", 10*time.Millisecond)
	broken := &failingBucket{ObjectStore: r.bucket}
	r.app.Close()
	r.app = NewAppender(Config{Cluster: "dl-put", Linger: 10 * time.Millisecond}, r.store, broken, r.stats)
	tp := metadata.TierPartition{TopicID: metadata.TopicID{5}, Partition: 0}
	if _, err := r.app.Append(context.Background(), tp, batch("lost", 1, -1, -1)); !errors.Is(err, ErrObjectPut) {
		t.Fatalf("append with a failing bucket: %v", err)
	}
	heads, err := r.store.DisklessHeads(context.Background(), []metadata.TierPartition{tp})
	if err != nil || heads[0].Value != nil {
		t.Fatalf("head after a failed PUT: %q, %v; want none", heads[0].Value, err)
	}
}

type failingBucket struct{ objstore.ObjectStore }

// TestCommitFailureFailsTheBatches: when etcd cannot be read, the batches
// fail with ErrCommit, nothing is committed, and the failure counts as a
// commit error.
func TestCommitFailureFailsTheBatches(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-etcd-down", 10*time.Millisecond)
	faulty := &faultyStore{Store: r.store, failHeads: 1}
	r.app.Close()
	r.app = NewAppender(Config{Cluster: "dl-etcd-down", Linger: 10 * time.Millisecond}, faulty, r.bucket, r.stats)
	tp := metadata.TierPartition{TopicID: metadata.TopicID{6}, Partition: 0}
	if _, err := r.app.Append(context.Background(), tp, batch("lost", 1, 42, 0)); !errors.Is(err, ErrCommit) {
		t.Fatalf("append with etcd down: %v", err)
	}
	if got := r.stats.Snapshot().CommitErrors; got != 1 {
		t.Fatalf("%d commit errors, want 1", got)
	}
	heads, err := r.store.DisklessHeads(context.Background(), []metadata.TierPartition{tp})
	if err != nil || heads[0].Value != nil {
		t.Fatalf("head after a failed commit: %q, %v; want none", heads[0].Value, err)
	}
	if res, err := r.app.Append(context.Background(), tp, batch("lost", 1, 42, 0)); err != nil || res.BaseOffset != 0 {
		t.Fatalf("retry once etcd answers: %+v, %v", res, err)
	}
}

// TestLostCommitAnswer: etcd applies a commit but the broker gets an error
// (the answer was lost). The producer was told to retry; its retry is
// answered with the original offsets and written nothing again.
func TestLostCommitAnswer(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-lost-answer", 10*time.Millisecond)
	faulty := &faultyStore{Store: r.store, loseAnswers: 1}
	r.app.Close()
	r.app = NewAppender(Config{Cluster: "dl-lost-answer", Linger: 10 * time.Millisecond}, faulty, r.bucket, r.stats)
	ctx := context.Background()
	tp := metadata.TierPartition{TopicID: metadata.TopicID{8}, Partition: 1}
	if _, err := r.app.Append(ctx, tp, batch("x", 2, 42, 0)); !errors.Is(err, ErrCommit) {
		t.Fatalf("append whose commit answer is lost: %v", err)
	}
	waitPositions(t, r.ix, tp, 2) // it was committed all the same
	retry, err := r.app.Append(ctx, tp, batch("x", 2, 42, 0))
	if err != nil || retry != (Result{BaseOffset: 0, LastOffset: 1}) {
		t.Fatalf("retry: %+v, %v; want the original offsets 0-1", retry, err)
	}
	next, err := r.app.Append(ctx, tp, batch("y", 1, 42, 2))
	if err != nil || next.BaseOffset != 2 {
		t.Fatalf("next in sequence: %+v, %v; want offset 2", next, err)
	}
	waitPositions(t, r.ix, tp, 3)
	data, err := r.reader.Read(ctx, tp, 0, 1<<20, 1<<62)
	if err != nil {
		t.Fatal(err)
	}
	if got := values(t, data, 0); fmt.Sprint(got) != "[x-0 x-1 y-0]" {
		t.Fatalf("log %v", got)
	}
}

// TestCommittedEnds: the log ends read from etcd's heads, in the order
// asked, over more partitions than one read takes, 0 where nothing was
// committed.
func TestCommittedEnds(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-ends", 5*time.Millisecond)
	ctx := context.Background()
	var parts []metadata.TierPartition
	for p := int32(0); p < MaxPartitionsPerTxn+5; p++ {
		parts = append(parts, metadata.TierPartition{TopicID: metadata.TopicID{4}, Partition: p})
	}
	if _, err := r.app.Append(ctx, parts[1], batch("a", 3, -1, -1)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.app.Append(ctx, parts[MaxPartitionsPerTxn+2], batch("b", 2, -1, -1)); err != nil {
		t.Fatal(err)
	}
	ends, err := CommittedEnds(ctx, r.store, parts)
	if err != nil {
		t.Fatal(err)
	}
	for i, end := range ends {
		want := map[int]int64{1: 3, MaxPartitionsPerTxn + 2: 2}[i]
		if end != want {
			t.Fatalf("end of %v: %d, want %d (all: %v)", parts[i], end, want, ends)
		}
	}
	if len(ends) != len(parts) {
		t.Fatalf("%d ends for %d partitions", len(ends), len(parts))
	}
}

// faultyStore fails the commit's etcd calls on demand: the next failHeads
// reads of heads fail; the next loseAnswers commits are applied, then
// answered with an error.
type faultyStore struct {
	Store
	mu                     sync.Mutex
	failHeads, loseAnswers int
}

func (s *faultyStore) DisklessHeads(ctx context.Context, parts []metadata.TierPartition) ([]metadata.DisklessHead, error) {
	if s.take(&s.failHeads) {
		return nil, errors.New("etcd unreachable")
	}
	return s.Store.DisklessHeads(ctx, parts)
}

func (s *faultyStore) CommitDiskless(ctx context.Context, w []metadata.DisklessWrite) (bool, error) {
	ok, err := s.Store.CommitDiskless(ctx, w)
	if err == nil && s.take(&s.loseAnswers) {
		return false, errors.New("connection reset before the answer")
	}
	return ok, err
}

func (s *faultyStore) take(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n == 0 {
		return false
	}
	*n--
	return true
}

func (failingBucket) Put(context.Context, string, io.Reader, int64) error {
	return errors.New("bucket down")
}

func waitPositions(t *testing.T, ix *Index, tp metadata.TierPartition, next int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		_, n, ch := ix.Positions(tp)
		if n >= next {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("index of %v stuck at %d, want %d", tp, n, next)
		}
	}
}

// TestConcurrentBrokersOnePartition: two brokers commit to the same two
// partitions at once; lost races are retried, offsets stay contiguous and
// every batch is in the log exactly once.
func TestConcurrentBrokersOnePartition(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	a := newRig(t, endpoints, "dl-race", 5*time.Millisecond)
	b := newRigOn(t, endpoints, "dl-race", 5*time.Millisecond, a.bucket)
	parts := []metadata.TierPartition{{TopicID: metadata.TopicID{3}, Partition: 0}, {TopicID: metadata.TopicID{3}, Partition: 1}}
	const writers, each = 4, 15
	var wg sync.WaitGroup
	for wi := 0; wi < writers; wi++ {
		for ri, r := range []*rig{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < each; i++ {
					tp := parts[i%2]
					if _, err := r.app.Append(context.Background(), tp, batch(fmt.Sprintf("r%dw%d-%d", ri, wi, i), 2, -1, -1)); err != nil {
						t.Errorf("append: %v", err)
					}
				}
			}()
		}
	}
	wg.Wait()
	conflicts := a.stats.Snapshot().CommitConflicts + b.stats.Snapshot().CommitConflicts
	seen := map[string]int{}
	for pi, tp := range parts {
		batches := (each + 1 - pi) / 2 // each writer alternates between the two
		waitPositions(t, a.ix, tp, int64(2*writers*batches*2))
		data, err := a.reader.Read(context.Background(), tp, 0, 1<<30, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values(t, data, 0) {
			seen[v]++
		}
	}
	if len(seen) != 2*writers*each*2 {
		t.Fatalf("%d distinct records, want %d", len(seen), 2*writers*each*2)
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %s appears %d times", v, n)
		}
	}
	t.Logf("%d lost commit races retried", conflicts)
}

// blockingBucket holds every Put until release is closed.
type blockingBucket struct {
	objstore.ObjectStore
	release chan struct{}
}

func (b blockingBucket) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.ObjectStore.Put(ctx, key, body, size)
}

// TestBackpressureWhileTheBucketStalls: with the bucket stalled, the
// appender buffers at most MaxPending bytes and refuses more with
// ErrBackpressure at once; once the bucket answers, what it took commits.
func TestBackpressureWhileTheBucketStalls(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	r := newRig(t, endpoints, "dl-bp", time.Millisecond)
	stalled := blockingBucket{ObjectStore: r.bucket, release: make(chan struct{})}
	r.app.Close()
	one := batch("x", 1, -1, -1)
	r.app = NewAppender(Config{Cluster: "dl-bp", Linger: time.Millisecond, MaxBytes: len(one), MaxPending: 3 * len(one)},
		r.store, stalled, r.stats)
	tp := metadata.TierPartition{TopicID: metadata.TopicID{4}, Partition: 0}
	var accepted []*Pending
	var refused error
	for i := 0; i < 10 && refused == nil; i++ {
		p, err := r.app.Submit(tp, one)
		if err != nil {
			refused = err
			break
		}
		accepted = append(accepted, p)
		time.Sleep(5 * time.Millisecond) // the flush takes the first into its stalled PUT
	}
	if !errors.Is(refused, ErrBackpressure) || len(accepted) < 3 || len(accepted) > 5 {
		t.Fatalf("with the bucket stalled: %d accepted, then %v; want 3-5 (one in the PUT, MaxPending buffered) then ErrBackpressure",
			len(accepted), refused)
	}
	close(stalled.release)
	for i, p := range accepted {
		res, err := p.Wait(context.Background())
		if err != nil || res.BaseOffset != int64(i) {
			t.Fatalf("accepted append %d: %+v, %v", i, res, err)
		}
	}
}
