package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers of the transaction acceptance tests.

// isolatedRead is a complete read of a topic up to the high watermarks
// listed when it started: per partition, the data records in offset order
// and the number of control records (transaction markers) passed.
type isolatedRead struct {
	Records  map[int32][]*kgo.Record
	Controls map[int32]int
}

// Values lists partition p's values in offset order.
func (r isolatedRead) Values(p int32) []string {
	var out []string
	for _, rec := range r.Records[p] {
		out = append(out, string(rec.Value))
	}
	return out
}

// readIsolated reads every partition of topic from its log start to the
// HW with the given isolation level. Control records are kept so that the
// read knows it reached the HW even when the last offsets are markers or
// aborted batches; a read_committed read stuck below the HW (an open
// transaction) fails t after timeout.
func readIsolated(t testing.TB, b *Broker, topic string, committed bool, timeout time.Duration) isolatedRead {
	t.Helper()
	adm := b.Admin()
	starts, ends := startOffsets(t, adm, topic), endOffsets(t, adm, topic)
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	offsets := map[int32]kgo.Offset{}
	for p, s := range starts {
		offsets[p] = kgo.NewOffset().At(s)
	}
	cl := b.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	read := isolatedRead{Records: map[int32][]*kgo.Record{}, Controls: map[int32]int{}}
	next := map[int32]int64{}
	for p, s := range starts {
		next[p] = s
	}
	done := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read of %s (read_committed %v) stuck at %v, HW %v after %v; errors %v",
				topic, committed, next, ends, timeout, fetches.Errors())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1) // beyond the end too: a late marker ends a read
			if r.Offset >= ends[r.Partition] {
				return
			}
			if r.Attrs.IsControl() {
				read.Controls[r.Partition]++
				return
			}
			read.Records[r.Partition] = append(read.Records[r.Partition], r)
		})
	}
	return read
}

// stableOffsets lists the read_committed end offsets (the LSOs).
func stableOffsets(t testing.TB, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lo, err := adm.ListCommittedOffsets(ctx, topic)
	return offsetsOf(t, lo, err, topic)
}

// txnClient is a transactional producer (manual partitioning, no
// compression) with id txnID.
func txnClient(t testing.TB, b *Broker, txnID string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0)}, opts...)
	return b.Client(all...)
}

// produced is a record as produced: where it landed and its value.
type produced struct {
	Partition int32
	Offset    int64
	Value     string
}

// producedLog collects what the producers of a test wrote, per partition.
type producedLog struct {
	mu      sync.Mutex
	records []produced
}

func (l *producedLog) add(rs ...*kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		l.records = append(l.records, produced{r.Partition, r.Offset, string(r.Value)})
	}
}

// values lists partition p's values in offset order.
func (l *producedLog) values(p int32) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := slices.Clone(l.records)
	slices.SortFunc(recs, func(a, b produced) int { return int(a.Offset - b.Offset) })
	var out []string
	for _, r := range recs {
		if r.Partition == p {
			out = append(out, r.Value)
		}
	}
	return out
}

// txnRecords builds n records "<tag>-<i>" spread over partitions.
func txnRecords(topic, tag string, n int, partitions int32) []*kgo.Record {
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%s-%03d", tag, i)})
	}
	return rs
}

// runTxn produces rs in one transaction and commits or aborts it; any error
// fails t. It returns the records with their offsets.
func runTxn(t testing.TB, cl *kgo.Client, commit bool, rs ...*kgo.Record) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce in a transaction: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
	return rs
}

// diffValues describes how got differs from want ("" if equal).
func diffValues(got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	gotSet, wantSet := map[string]bool{}, map[string]bool{}
	for _, v := range got {
		gotSet[v] = true
	}
	for _, v := range want {
		wantSet[v] = true
	}
	var extra, missing []string
	for _, v := range got {
		if !wantSet[v] {
			extra = append(extra, v)
		}
	}
	for _, v := range want {
		if !gotSet[v] {
			missing = append(missing, v)
		}
	}
	return fmt.Sprintf("%d values, want %d; unexpected %s; missing %s; (order differs: %v)",
		len(got), len(want), firstFew(extra), firstFew(missing), len(extra) == 0 && len(missing) == 0)
}

func firstFew(vs []string) string {
	if len(vs) > 8 {
		return fmt.Sprintf("%s ... (%d in all)", strings.Join(vs[:8], ", "), len(vs))
	}
	return "[" + strings.Join(vs, ", ") + "]"
}

// liveReader consumes a topic from the start with read_committed while a
// test runs, keeping the values it saw by (partition, offset).
type liveReader struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     map[[2]int64]string
}

func startLiveReader(t testing.TB, b *Broker, topic string) *liveReader {
	cl := b.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	lr := &liveReader{cancel: cancel, done: make(chan struct{}), at: map[[2]int64]string{}}
	go func() {
		defer close(lr.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				lr.mu.Lock()
				lr.at[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
				lr.mu.Unlock()
			})
		}
	}()
	t.Cleanup(lr.stop)
	return lr
}

func (lr *liveReader) stop() {
	lr.cancel()
	<-lr.done
}

// values stops the reader and returns partition p's values in offset order.
func (lr *liveReader) values(p int32) []string {
	lr.stop()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var offsets []int64
	for pos := range lr.at {
		if int32(pos[0]) == p {
			offsets = append(offsets, pos[1])
		}
	}
	slices.Sort(offsets)
	var out []string
	for _, o := range offsets {
		out = append(out, lr.at[[2]int64{int64(p), o}])
	}
	return out
}
