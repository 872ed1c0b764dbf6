package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/test/history"
)

// balanceHistoryEnv sizes TestBalanceAndDrainUnderLoad: the history
// preloaded into each partition, in MiB. The default keeps CI fast; the
// acceptance run sets 200.
const balanceHistoryEnv = "STRATA_BALANCE_HISTORY_MIB"

// TestBalanceAndDrainUnderLoad: 3 brokers hold a 12-partition RF=3 tiered
// topic whose preloaded history is mostly in the bucket, while an
// idempotent acks=all producer and a consumer group run. A fourth broker
// joins and `strata cluster balance` spreads the replicas (9±1 each, 3±1
// leaderships), copying between brokers at most 1.5 × what the added
// replicas had to copy: the moved partitions' local tails and what was
// appended to them meanwhile, not their history. `strata broker drain 2`
// then empties broker 2, which is killed. Reading every partition back
// from offset 0 finds the preloaded history intact, the history checker
// finds no acknowledged record lost, duplicated or reordered, and the
// group kept committing.
func TestBalanceAndDrainUnderLoad(t *testing.T) {
	defer timed(t, "TestBalanceAndDrainUnderLoad")()
	size := balanceSizeFromEnv(t)
	c := Start(t, Config{MinIO: true, Spare: 1, ExtraArgs: []string{
		"--log-retention-check-interval", "250ms", "--tier-upload-interval", "250ms"}})
	const (
		topic      = "balanced"
		partitions = 12
	)
	replicatedTopic(t, c, topic, partitions, map[string]string{"retention.ms": "-1",
		"internal.segment.bytes": strconv.FormatInt(size.segmentBytes, 10),
		"local.retention.bytes":  strconv.FormatInt(size.localRetention, 10)})
	preloaded := preloadHistory(t, c, topic, partitions, size)
	waitHistoryTiered(t, c, topic, preloaded, size.wait(partitions))

	h := history.New()
	p := startTimedProducer(c, h, topic, partitions, 20, 256)
	g := startCommittingGroup(c, "balanced-group", topic)
	time.Sleep(5 * time.Second) // acknowledged writes and commits before anything moves
	committedAtBalance := g.committedBy(time.Now())
	c.AddBroker()
	brokers := "--brokers=" + strings.Join(c.Addrs(), ",")
	balanceCopyingTails(t, c, topic, partitions, size, brokers)

	start := time.Now()
	out, err := c.runStrata(size.wait(partitions)+time.Minute, "broker", "drain", "2",
		"--timeout", size.wait(partitions).String(), brokers)
	if err != nil || !strings.Contains(out, "broker 2 holds no replicas: safe to stop") {
		t.Fatalf("broker drain 2 (%v):\n%s", err, out)
	}
	t.Logf("broker drain 2 took %v", time.Since(start).Round(time.Millisecond))
	c.Kill(2)
	time.Sleep(2 * time.Second) // writes go on without broker 2
	if err := g.finish(); err != nil {
		t.Fatalf("consumer group: %v", err)
	}
	if err := p.finish(); err != nil {
		t.Fatalf("producer: %v", err)
	}
	t.Logf("producer %v; %v", p, g)
	if !committedPast(g.committedBy(time.Now()), committedAtBalance) {
		t.Fatalf("the group committed nothing new during the balance and drain: %v then %v",
			committedAtBalance, g.committedBy(time.Now()))
	}
	checkHistoryAfterMoves(t, c, h, topic, preloaded, size)
}

// balanceSize is TestBalanceAndDrainUnderLoad's scale, from the history
// preloaded per partition: about 64 segments of it (32 at the default
// size), and a local retention of two segments, so that the local tail
// stays a small share of the history at every size.
type balanceSize struct {
	historyBytes   int64 // preloaded into each partition
	segmentBytes   int64 // internal.segment.bytes
	localRetention int64 // local.retention.bytes
	valueBytes     int   // of each preloaded record
}

func balanceSizeFromEnv(t *testing.T) balanceSize {
	t.Helper()
	mib := 1
	if s := os.Getenv(balanceHistoryEnv); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of MiB ≥ 1", balanceHistoryEnv, s)
		}
		mib = n
	}
	history := int64(mib) << 20
	// At least 32 KiB: the preload's batches are half a segment, and with
	// smaller ones the default run spends its time in produce round trips.
	segment := min(max(history/64, 32<<10), 8<<20)
	return balanceSize{historyBytes: history, segmentBytes: segment, localRetention: 2 * segment, valueBytes: 8 << 10}
}

// wait bounds a phase that handles the whole history once (preloading,
// tiering, reading back): two minutes, and half a second per MiB, a few
// MB/s that a small machine running three brokers and MinIO keeps up.
func (s balanceSize) wait(partitions int) time.Duration {
	return 2*time.Minute + time.Duration(s.historyBytes*int64(partitions)>>20)*time.Second/2
}

// preloadValue is the value of preloaded record i of partition p: never
// kept, regenerated to check a read.
func preloadValue(p int32, i int64, size int) []byte {
	v := fmt.Appendf(make([]byte, 0, size), "pre-%02d-%09d-", p, i)
	return append(v, bytes.Repeat([]byte{'a' + byte(i%26)}, max(0, size-len(v)))...)
}

// preloadHistory writes size.historyBytes of preloadValue records to each
// partition of topic with large batches, and returns the partitions' end
// offsets (one offset per record). Each partition has its own idempotent
// producer: kgo sends one produce request at a time per broker and
// producer, so one producer for all would wait on the round trips.
func preloadHistory(t *testing.T, c *Cluster, topic string, partitions int32, size balanceSize) map[int32]int64 {
	t.Helper()
	perPartition := size.historyBytes / int64(size.valueBytes)
	ctx, cancel := context.WithTimeout(context.Background(), size.wait(int(partitions)))
	defer cancel()
	start := time.Now()
	errs := make([]error, partitions)
	var wg sync.WaitGroup
	for p := range partitions {
		cl := preloadClient(c, topic, size)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			errs[p] = preloadPartition(ctx, cl, p, perPartition, size.valueBytes)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("preloading %s: %v", topic, err)
	}
	took := time.Since(start)
	total := size.historyBytes * int64(partitions)
	t.Logf("preloaded %d MiB (%d records of %d bytes per partition) in %v: %.1f MB/s", total>>20, perPartition,
		size.valueBytes, took.Round(time.Millisecond), float64(total)/took.Seconds()/1e6)
	_, ends, err := listBoundsRetrying(c, topic, partitions, progressTimeout)
	if err != nil {
		t.Fatal(err)
	}
	for p := range partitions {
		if ends[p] != perPartition {
			t.Fatalf("%s-%d ends at %d after preloading %d records", topic, p, ends[p], perPartition)
		}
	}
	return ends
}

// preloadClient is an idempotent acks=all producer whose batches are at
// most half a segment (a segment rolls between batches), so that the
// history is many segments, most of them uploaded.
func preloadClient(c *Cluster, topic string, size balanceSize) *kgo.Client {
	batchBytes := int32(min(1_000_000, max(size.segmentBytes/2, 2*int64(size.valueBytes))))
	return c.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(batchBytes),
		kgo.MaxBufferedBytes(16<<20))
}

// preloadPartition produces records preloadValue(p, 0..n-1) and waits for
// them; the first error is returned.
func preloadPartition(ctx context.Context, cl *kgo.Client, p int32, n int64, valueBytes int) error {
	var mu sync.Mutex
	var firstErr error
	for i := range n {
		cl.Produce(ctx, &kgo.Record{Partition: p, Value: preloadValue(p, i, valueBytes)}, func(_ *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if firstErr == nil && err != nil {
				firstErr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
	}
	err := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(firstErr, err)
}

// waitHistoryTiered waits until, on every partition's leader, at least
// three quarters of the preloaded records are in the bucket and gone from
// the local disk.
func waitHistoryTiered(t *testing.T, c *Cluster, topic string, preloaded map[int32]int64, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	c.WaitFor("the preloaded history in the bucket and gone from the leaders' disks", timeout, func() (bool, string) {
		for p, end := range preloaded {
			m, err := c.Partition(topic, p)
			if err != nil || m.Leader < 0 {
				return false, fmt.Sprint(m, err)
			}
			s, ok := tierStatusOf(c.Broker(m.Leader), topic, p)
			if !ok || !s.Tiered || s.LocalStart < end*3/4 || s.TieredEnd < s.LocalStart {
				return false, fmt.Sprintf("%s-%d on leader %d: %+v", topic, p, m.Leader, s)
			}
		}
		return true, ""
	})
	t.Logf("history tiered in %v", time.Since(start).Round(time.Millisecond))
}

// balanceCopyingTails runs `strata cluster balance` on the cluster the
// fourth broker just joined and checks the outcome: 9±1 replicas and 3±1
// leaderships of topic per broker, and the bytes the moves copied
// (checkMoveBytes).
func balanceCopyingTails(t *testing.T, c *Cluster, topic string, partitions int, size balanceSize, brokers string) {
	t.Helper()
	adm := c.Admin()
	ctx, cancel := context.WithTimeout(context.Background(), 2*size.wait(partitions))
	defer cancel()
	before := takeMoveSnapshot(ctx, t, c, adm)
	start := time.Now()
	out, err := c.runStrata(size.wait(partitions)+time.Minute, "cluster", "balance", "--timeout", size.wait(partitions).String(), brokers)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("cluster balance (%v):\n%s", took.Round(time.Millisecond), out)
	after := takeMoveSnapshot(ctx, t, c, adm)
	replicas, leaders := clusterCounts(ctx, t, adm, topic)
	if !inBand(replicas, leaders, 1, 2, 3, 4) {
		t.Fatalf("after balance: replicas %v, leaders %v; want 9±1 and 3±1 on each of 4 brokers", replicas, leaders)
	}
	t.Logf("after balance: replicas %v, leaders %v", replicas, leaders)
	checkMoveBytes(ctx, t, c, before, after)
}

// clusterCounts is each broker's replicas and leaderships of topic.
func clusterCounts(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) (replicas, leaders map[int32]int) {
	t.Helper()
	replicas, leaders, err := topicCounts(ctx, adm, topic)
	if err != nil {
		t.Fatal(err)
	}
	return replicas, leaders
}

func topicCounts(ctx context.Context, adm *kadm.Client, topic string) (replicas, leaders map[int32]int, err error) {
	md, err := adm.Metadata(ctx, topic)
	if err == nil {
		err = md.Topics[topic].Err
	}
	if err != nil {
		return nil, nil, err
	}
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, p := range md.Topics[topic].Partitions {
		leaders[p.Leader]++
		for _, r := range p.Replicas {
			replicas[r]++
		}
	}
	return replicas, leaders, nil
}

// inBand says every broker of ids holds 9±1 replicas and 3±1 leaderships.
func inBand(replicas, leaders map[int32]int, ids ...int32) bool {
	for _, id := range ids {
		if replicas[id] < 8 || replicas[id] > 10 || leaders[id] < 2 || leaders[id] > 4 {
			return false
		}
	}
	return true
}

// moveSnapshot is the state of every partition of every topic that the
// bytes a balance copies are judged by, taken before and after it.
type moveSnapshot struct {
	replicas map[topicPartition][]int32
	leaders  map[topicPartition]int32
	ids      map[string]kadm.TopicID
	ends     map[topicPartition]int64 // high watermarks
	local    map[topicPartition]int64 // the leader's local log bytes
	tiered   map[topicPartition]int64 // the bucket's bytes, as the leader lists them
	copied   float64                  // strata_reassignment_bytes_out_total over the running brokers
}

func takeMoveSnapshot(ctx context.Context, t *testing.T, c *Cluster, adm *kadm.Client) moveSnapshot {
	t.Helper()
	s := moveSnapshot{replicas: map[topicPartition][]int32{}, leaders: map[topicPartition]int32{}, ids: map[string]kadm.TopicID{},
		ends: map[topicPartition]int64{}, local: map[topicPartition]int64{}, tiered: map[topicPartition]int64{}}
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, td := range md.Topics {
		s.ids[td.Topic] = td.ID
		for _, pd := range td.Partitions {
			tp := topicPartition{td.Topic, pd.Partition}
			s.replicas[tp], s.leaders[tp] = slices.Clone(pd.Replicas), pd.Leader
		}
	}
	ends, err := adm.ListEndOffsets(ctx, md.Topics.Names()...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets: %v", err)
	}
	ends.Each(func(o kadm.ListedOffset) { s.ends[topicPartition{o.Topic, o.Partition}] = o.Offset })
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatalf("DescribeLogDirs: %v", err)
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			tp := topicPartition{p.Topic, p.Partition}
			switch {
			case s.leaders[tp] != d.Broker:
			case d.Dir == "tiered:bucket":
				s.tiered[tp] += p.Size
			default:
				s.local[tp] += p.Size
			}
		})
	})
	for _, id := range c.Up() {
		n, err := c.Broker(id).MetricSum(ctx, "strata_reassignment_bytes_out_total")
		if err != nil {
			t.Fatal(err)
		}
		s.copied += n
	}
	return s
}

// moveBytesSlack is how much more than the tails a balance may copy:
// fetches retried, and records appended between a snapshot and a move.
const moveBytesSlack = 1.5

// checkMoveBytes checks what the moves between two snapshots copied
// (strata_reassignment_bytes_out_total): more than nothing, and at most
// moveBytesSlack × what the added replicas had to copy, which is, once per
// replica added to a partition, its leader's local tail when the moves
// began and the record bytes appended to it while they ran (read back
// from the log). It logs that against the moved partitions' history.
func checkMoveBytes(ctx context.Context, t *testing.T, c *Cluster, before, after moveSnapshot) {
	t.Helper()
	cl := c.Client()
	var tails, appended, bucket int64
	moved, added := 0, 0
	for tp, now := range after.replicas {
		adding := 0
		for _, id := range now {
			if !slices.Contains(before.replicas[tp], id) {
				adding++
			}
		}
		if adding == 0 {
			continue
		}
		grew, err := appendedBytes(ctx, cl, after.leaders[tp], after.ids[tp.topic], tp, before.ends[tp], after.ends[tp])
		if err != nil {
			t.Fatalf("bytes appended to %s-%d during the moves: %v", tp.topic, tp.partition, err)
		}
		moved, added = moved+1, added+adding
		tails += int64(adding) * before.local[tp]
		appended += int64(adding) * grew
		bucket += before.tiered[tp]
	}
	copied := after.copied - before.copied
	allowance := float64(tails + appended)
	if copied <= 0 || copied > moveBytesSlack*allowance {
		t.Fatalf("the moves copied %.0f bytes (strata_reassignment_bytes_out_total): want (0, %.1f × %.0f], the %d replicas' local tails %d and the %d bytes appended meanwhile",
			copied, moveBytesSlack, allowance, added, tails, appended)
	}
	t.Logf("moved %d partitions (%d replicas added): copied %.2f MiB = %.2f × (their local tails %.2f MiB + %.2f MiB appended during the moves); "+
		"the moved partitions hold %.1f MiB of history in the bucket: the moves copied %.2f%% of that",
		moved, added, copied/(1<<20), copied/allowance, mib(tails), mib(appended), mib(bucket), 100*copied/float64(max(1, bucket)))
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// appendedBytes is the record-batch bytes of tp's offsets [from, to),
// read from its leader with Fetch requests: what a replica that starts at
// from copies to reach to. A batch that straddles from counts whole.
func appendedBytes(ctx context.Context, cl *kgo.Client, leader int32, id kadm.TopicID, tp topicPartition, from, to int64) (int64, error) {
	var total int64
	for next := from; next < to; {
		raw, err := fetchRaw(ctx, cl, leader, id, tp, next)
		if err != nil {
			return 0, err
		}
		n, after := batchBytesBelow(raw, to)
		if after <= next {
			return 0, fmt.Errorf("no batch at offset %d (%d bytes fetched)", next, len(raw))
		}
		total, next = total+n, after
	}
	return total, nil
}

// fetchRaw is one Fetch of tp from offset from, sent to leader: the
// record batches as the log holds them.
func fetchRaw(ctx context.Context, cl *kgo.Client, leader int32, id kadm.TopicID, tp topicPartition, from int64) ([]byte, error) {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes = -1, 0, 16<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = tp.topic, [16]byte(id) // Fetch v13+ names the topic by id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = tp.partition, from, 16<<20
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("fetch of %s-%d from broker %d: %d topics in the response", tp.topic, tp.partition, leader, len(resp.Topics))
	}
	part := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch of %s-%d at %d from broker %d: %w", tp.topic, tp.partition, from, leader, err)
	}
	return part.RecordBatches, nil
}

// batchBytesBelow adds the sizes of the whole batches at the start of raw
// that begin below end, and returns the offset after the last one (0 if
// none). A batch cut short at the end of a response is left for the next
// fetch.
func batchBytesBelow(raw []byte, end int64) (n, next int64) {
	for len(raw) > 0 {
		h, err := recordbatch.ParseHeader(raw)
		if err != nil || h.BaseOffset >= end {
			break
		}
		n, next = n+int64(h.Size()), h.LastOffset()+1
		raw = raw[h.Size():]
	}
	return n, next
}

// committedPast reports whether some partition's committed offset in now
// is above the one in then.
func committedPast(now, then map[int32]timedCommit) bool {
	for p, c := range now {
		if c.Offset > then[p].Offset {
			return true
		}
	}
	return false
}

// checkHistoryAfterMoves reads every partition of topic back from offset 0
// (the preloaded records checked as they stream by, the others kept) and
// runs the history checker over what the timed producer wrote, whose log
// begins after the preloaded records.
func checkHistoryAfterMoves(t *testing.T, c *Cluster, h *history.History, topic string, preloaded map[int32]int64, size balanceSize) {
	t.Helper()
	partitions := int32(len(preloaded))
	start := time.Now()
	final := readBackPreloaded(t, c, topic, preloaded, size)
	t.Logf("read %s back from offset 0 in %v", topic, time.Since(start).Round(time.Millisecond))
	in := h.Snapshot()
	in.Observations, in.Commits = nil, nil
	in.Final = map[int32]history.FinalLog{}
	for p := range partitions {
		in.Final[p] = history.FinalLog{LogStart: preloaded[p], Records: final[p]}
	}
	rep := history.Check(in)
	t.Logf("history: %s", rep.Stats)
	if err := rep.Err(); err != nil {
		t.Fatalf("history checker: %v", err)
	}
}

// readBackPreloaded reads every partition of topic from offset 0 to its
// end. Offsets below preloaded[p] must hold preloadValue(p, offset), in
// order and without a gap; the records after them are returned.
func readBackPreloaded(t *testing.T, c *Cluster, topic string, preloaded map[int32]int64, size balanceSize) map[int32][]history.Record {
	t.Helper()
	partitions := int32(len(preloaded))
	starts, ends, err := listBoundsRetrying(c, topic, partitions, progressTimeout)
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[int32]kgo.Offset{}
	for p := range partitions {
		if starts[p] != 0 {
			t.Fatalf("%s-%d starts at %d, want 0 (nothing is deleted)", topic, p, starts[p])
		}
		offsets[p] = kgo.NewOffset().At(0)
	}
	cl := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxPartitionBytes(8<<20), kgo.FetchMaxBytes(64<<20))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), size.wait(int(partitions)))
	defer cancel()
	next := map[int32]int64{}
	records := map[int32][]history.Record{}
	for !allReached(next, ends) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back: at %v of %v: %v", topic, next, ends, errors.Join(ctx.Err(), fetches.Err()))
		}
		var bad error
		fetches.EachRecord(func(r *kgo.Record) {
			switch {
			case bad != nil || r.Offset >= ends[r.Partition]:
			case r.Offset != next[r.Partition]:
				bad = fmt.Errorf("%s-%d: offset %d read after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
			case r.Offset < preloaded[r.Partition] && !bytes.Equal(r.Value, preloadValue(r.Partition, r.Offset, size.valueBytes)):
				bad = fmt.Errorf("%s-%d: offset %d holds %.40q, not preloaded record %d", topic, r.Partition, r.Offset, r.Value, r.Offset)
			case r.Offset >= preloaded[r.Partition]:
				records[r.Partition] = append(records[r.Partition], history.Record{Offset: r.Offset, Value: string(r.Value)})
			}
			if bad == nil && r.Offset < ends[r.Partition] {
				next[r.Partition] = r.Offset + 1
			}
		})
		if bad != nil {
			t.Fatal(bad)
		}
	}
	return records
}

// allReached says every partition was read at least up to want.
func allReached(next, want map[int32]int64) bool {
	for p, w := range want {
		if next[p] < w {
			return false
		}
	}
	return true
}
