package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers shared by the transaction acceptance tests.

// txnStateTopic is Kafka's transaction log; txnStatePartitions is its
// default partition count (transaction.state.log.num.partitions).
const (
	txnStateTopic      = "__transaction_state"
	txnStatePartitions = 50
)

// txnStatePartition is the __transaction_state partition of a
// transactional id: Kafka's Utils.abs(id.hashCode()) % partitions, for
// ASCII ids (Java's String.hashCode over the bytes, in int32 arithmetic).
func txnStatePartition(txnID string) int32 {
	var h int32
	for i := 0; i < len(txnID); i++ {
		h = 31*h + int32(txnID[i])
	}
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % txnStatePartitions
}

// keyedRecord is one data record of a read, with where it was read.
type keyedRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
}

// logRead is a complete read of a topic up to the end offsets (HWs) listed
// when it started: data records per partition in offset order, and the
// number of control records (transaction markers) passed on the way.
type logRead struct {
	Records  map[int32][]keyedRecord
	Controls map[int32]int
	Starts   map[int32]int64
	Ends     map[int32]int64
}

// All returns every data record, partition by partition.
func (r logRead) All() []keyedRecord {
	var out []keyedRecord
	parts := make([]int32, 0, len(r.Records))
	for p := range r.Records {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		out = append(out, r.Records[p]...)
	}
	return out
}

// readTopic reads every partition of topic from its log start to the high
// watermark listed first, with the given isolation level. Control records
// are kept (and counted) so that the read knows it reached the end even
// when the last offsets are transaction markers or aborted batches; a
// read_committed read of a partition with a transaction still open never
// reaches the HW and fails t after timeout.
func readTopic(t *testing.T, c *Cluster, topic string, partitions int32, committed bool, timeout time.Duration) logRead {
	t.Helper()
	adm := kadm.NewClient(c.Client())
	starts, ends := map[int32]int64{}, map[int32]int64{}
	c.WaitFor("log bounds of "+topic, progressTimeout, func() (bool, string) {
		var err error
		starts, ends, err = listBounds(adm, topic, partitions)
		return err == nil, fmt.Sprint(err)
	})
	isolation := kgo.ReadUncommitted()
	if committed {
		isolation = kgo.ReadCommitted()
	}
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().At(starts[p])
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords(), kgo.FetchMaxWait(300*time.Millisecond))
	defer cl.Close()
	read := logRead{Records: map[int32][]keyedRecord{}, Controls: map[int32]int{}, Starts: starts, Ends: ends}
	next := map[int32]int64{}
	for p, s := range starts {
		next[p] = s
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !readDone(next, ends) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read of %s (committed=%v) incomplete after %v: at %v, want %v; errors: %v",
				topic, committed, timeout, next, ends, fetches.Errors())
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
			read.Records[r.Partition] = append(read.Records[r.Partition],
				keyedRecord{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
		})
	}
	return read
}

func readDone(next, ends map[int32]int64) bool {
	for p, end := range ends {
		if next[p] < end {
			return false
		}
	}
	return true
}

// problems collects a checker's findings, keeping a few examples per kind.
type problems struct {
	counts   map[string]int
	examples []string
}

func (p *problems) add(kind, format string, args ...any) {
	if p.counts == nil {
		p.counts = map[string]int{}
	}
	p.counts[kind]++
	if p.counts[kind] <= 5 {
		p.examples = append(p.examples, kind+": "+fmt.Sprintf(format, args...))
	}
}

func (p *problems) Err() error {
	if len(p.counts) == 0 {
		return nil
	}
	return fmt.Errorf("%v\n  %s", p.counts, strings.Join(p.examples, "\n  "))
}

// checkExactlyOnce compares the output of a consume-transform-produce
// pipeline (read_committed) with its input: every input value exactly once
// (at most once unless complete: a partial read), nothing else, and each
// key's values in the input's order.
func checkExactlyOnce(input, output []keyedRecord, complete bool) error {
	var pr problems
	inKey := map[string]string{}
	inSeq := map[string][]string{}
	for _, r := range input {
		inKey[r.Value] = r.Key
		inSeq[r.Key] = append(inSeq[r.Key], r.Value)
	}
	seen := map[string]int{}
	outSeq := map[string][]string{}
	for _, r := range output {
		key, ok := inKey[r.Value]
		switch {
		case !ok:
			pr.add("phantom", "p%d@%d %q is in no input record", r.Partition, r.Offset, r.Value)
			continue
		case key != r.Key:
			pr.add("wrong-key", "p%d@%d %q has key %q, input key %q", r.Partition, r.Offset, r.Value, r.Key, key)
		}
		seen[r.Value]++
		if seen[r.Value] > 1 {
			pr.add("duplicate", "p%d@%d %q (copy %d)", r.Partition, r.Offset, r.Value, seen[r.Value])
			continue
		}
		outSeq[key] = append(outSeq[key], r.Value)
	}
	for _, r := range input {
		if complete && seen[r.Value] == 0 {
			pr.add("missing", "input p%d@%d %q never in the output", r.Partition, r.Offset, r.Value)
		}
	}
	for key, want := range inSeq {
		if got := outSeq[key]; !orderedSubsequence(got, want) {
			pr.add("reorder", "key %q: output order differs from input order", key)
		}
	}
	return pr.Err()
}

// orderedSubsequence says got lists values of want in want's order.
func orderedSubsequence(got, want []string) bool {
	pos := map[string]int{}
	for i, v := range want {
		pos[v] = i
	}
	last := -1
	for _, v := range got {
		i, ok := pos[v]
		if !ok || i <= last {
			return false
		}
		last = i
	}
	return true
}

// TestExactlyOnceChecker: the checker finds each kind of violation it
// reports, and accepts a faithful copy.
func TestExactlyOnceChecker(t *testing.T) {
	in := []keyedRecord{{0, 0, "a", "a1"}, {0, 1, "b", "b1"}, {0, 2, "a", "a2"}, {1, 0, "c", "c1"}}
	ok := []keyedRecord{{2, 0, "b", "b1"}, {0, 5, "a", "a1"}, {0, 9, "a", "a2"}, {1, 3, "c", "c1"}}
	if err := checkExactlyOnce(in, ok, true); err != nil {
		t.Fatalf("faithful copy rejected: %v", err)
	}
	if err := checkExactlyOnce(in, ok[:3], false); err != nil {
		t.Fatalf("faithful partial copy rejected: %v", err)
	}
	for name, tc := range map[string][]keyedRecord{
		"duplicate": append(append([]keyedRecord{}, ok...), keyedRecord{0, 10, "a", "a2"}),
		"missing":   ok[:3],
		"phantom":   append(append([]keyedRecord{}, ok...), keyedRecord{0, 10, "a", "a3"}),
		"reorder":   {{2, 0, "b", "b1"}, {0, 5, "a", "a2"}, {0, 9, "a", "a1"}, {1, 3, "c", "c1"}},
		"wrong-key": {{2, 0, "b", "b1"}, {0, 5, "a", "a1"}, {0, 9, "z", "a2"}, {1, 3, "c", "c1"}},
	} {
		err := checkExactlyOnce(in, tc, true)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: checker said %v", name, err)
		}
	}
}

// liveReader consumes a topic from the start with read_committed while a
// test runs, keeping one value per (partition, offset): a re-read after an
// offset reset is not a duplicate, a second value at one offset is an
// inconsistency.
type liveReader struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	at     map[[2]int64]string
	bad    []string
}

func startLiveReader(t *testing.T, c *Cluster, topic string, partitions int32) *liveReader {
	offsets := map[int32]kgo.Offset{}
	for p := int32(0); p < partitions; p++ {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(300*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	lr := &liveReader{cancel: cancel, done: make(chan struct{}), at: map[[2]int64]string{}}
	go func() {
		defer close(lr.done)
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(lr.observe)
		}
	}()
	t.Cleanup(lr.stop)
	return lr
}

func (lr *liveReader) observe(r *kgo.Record) {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	pos := [2]int64{int64(r.Partition), r.Offset}
	if v, ok := lr.at[pos]; ok && v != string(r.Value) && len(lr.bad) < 5 {
		lr.bad = append(lr.bad, fmt.Sprintf("p%d@%d read as %q and %q", r.Partition, r.Offset, v, r.Value))
	}
	lr.at[pos] = string(r.Value)
}

func (lr *liveReader) stop() {
	lr.cancel()
	<-lr.done
}

// records stops the reader and returns what it saw in offset order, and
// any inconsistency.
func (lr *liveReader) records(keyOf func(value string) string) ([]keyedRecord, error) {
	lr.stop()
	lr.mu.Lock()
	defer lr.mu.Unlock()
	var out []keyedRecord
	for pos, v := range lr.at {
		out = append(out, keyedRecord{Partition: int32(pos[0]), Offset: pos[1], Key: keyOf(v), Value: v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	if len(lr.bad) > 0 {
		return out, fmt.Errorf("live read_committed reader: %s", strings.Join(lr.bad, "; "))
	}
	return out, nil
}
