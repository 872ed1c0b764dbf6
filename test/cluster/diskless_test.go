package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/tier"
)

// disklessZone is the client id that routes a client's diskless partitions
// to the brokers of a zone (Inkless's convention, which Strata follows).
func disklessZone(id int32) kgo.Opt { return kgo.ClientID(fmt.Sprintf("diskless_az=rack%d", id)) }

// TestDisklessThroughEveryBroker: three brokers, one zone each, and a
// diskless topic. Idempotent acks=all producers write the same partition
// through every broker at once; consumers read it through every broker, and
// kcat through one: every record once, in offset order, each producer's in
// the order it wrote them. No broker has a directory for the topic.
func TestDisklessThroughEveryBroker(t *testing.T) {
	defer timed(t, "TestDisklessThroughEveryBroker")()
	c := Start(t, Config{MinIO: true, RackPerBroker: true, ExtraArgs: []string{"--diskless-append-linger", "50ms"}})
	const (
		topic   = "diskless"
		perZone = 300
	)
	c.CreateTopic(topic, 2, 3, map[string]string{"diskless.enable": "true"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, id := range c.Up() {
		cl := c.Client(disklessZone(id), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond))
		leader := disklessLeader(ctx, t, cl, topic, 0)
		if leader != id {
			t.Fatalf("a client of zone rack%d is sent to broker %d for %s-0, want broker %d", id, leader, topic, id)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perZone; i += 10 {
				var recs []*kgo.Record
				for j := i; j < i+10; j++ {
					recs = append(recs, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "z%d-%05d", id, j)})
				}
				if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					errs <- fmt.Errorf("produce through broker %d: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := perZone * len(c.Up())
	// Every broker wrote shared objects and committed them; none replicated
	// a byte of the topic to another.
	for _, id := range c.Up() {
		objects, err1 := c.Broker(id).MetricSum(ctx, "strata_diskless_objects_total")
		commits, err2 := c.Broker(id).MetricSum(ctx, "strata_diskless_commits_total")
		replicated, err3 := c.Broker(id).MetricSum(ctx, `strata_topic_replication_bytes_out_total{topic="`+topic+`"}`)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		if objects == 0 || commits == 0 || replicated != 0 {
			t.Fatalf("broker %d: %v shared objects, %v commits, %v bytes replicated; want >0, >0, 0", id, objects, commits, replicated)
		}
	}
	for _, id := range c.Up() {
		values := consumeDiskless(ctx, t, c.Client(disklessZone(id),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})), total)
		checkZonesInOrder(t, values, perZone, fmt.Sprintf("read through broker %d", id))
	}
	// A consumer group reads the topic, commits, and its lag is zero.
	group := c.Client(disklessZone(3), kgo.ConsumerGroup("diskless-group"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	read := 0
	for read < total {
		fetches := group.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("group read %d of %d: %v", read, total, fetches.Errors())
		}
		read += fetches.NumRecords()
	}
	if err := group.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("group commit: %v", err)
	}
	lags, err := kadm.NewClient(c.Client()).Lag(ctx, "diskless-group")
	if err != nil {
		t.Fatalf("lag of the group: %v", err)
	}
	lag := lags["diskless-group"]
	if err := lag.Error(); err != nil {
		t.Fatalf("lag of the group: %v", err)
	}
	if l := lag.Lag.Total(); l != 0 || lag.Lag[topic][0].Commit.At != int64(total) {
		t.Fatalf("group lag %d, committed %+v; want 0 at %d", l, lag.Lag[topic][0].Commit, total)
	}
	kcat := testkit.NeedBinary(t, "kcat")
	out := runTool(ctx, t, kcat, "-C", "-b", c.Broker(2).Addr, "-X", "client.id=diskless_az=rack2",
		"-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o %s\n")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != total || !strings.HasPrefix(lines[0], "0 ") || !strings.HasPrefix(lines[total-1], fmt.Sprint(total-1)+" ") {
		t.Fatalf("kcat read %d lines (first %q), want offsets 0..%d", len(lines), lines[0], total-1)
	}
	// Balancing plans nothing for diskless partitions: they have no replicas.
	plan, err := c.runStrata(time.Minute, "cluster", "balance", "--dry-run", "--json", "--brokers="+strings.Join(c.Addrs(), ","))
	if err != nil {
		t.Fatal(err)
	}
	var report struct {
		Moves []struct {
			Topic string `json:"topic"`
		} `json:"moves"`
	}
	if err := json.Unmarshal([]byte(plan), &report); err != nil {
		t.Fatalf("cluster balance --json: %v\n%s", err, plan)
	}
	for _, m := range report.Moves {
		if m.Topic == topic {
			t.Fatalf("cluster balance plans to move a diskless partition:\n%s", plan)
		}
	}
	for _, b := range c.Brokers() {
		matches, _ := filepath.Glob(filepath.Join(b.DataDir, topic+"-*"))
		if len(matches) > 0 {
			t.Fatalf("broker %d has local directories for the diskless topic: %v", b.ID, matches)
		}
	}
}

// disklessLeader is the broker cl's metadata names for topic's partition.
func disklessLeader(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, partition int32) int32 {
	t.Helper()
	var leader int32 = -1
	for leader < 0 && ctx.Err() == nil {
		md, err := kadm.NewClient(cl).Metadata(ctx, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[partition]; ok && p.Err == nil {
				leader = p.Leader
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return leader
}

// consumeDiskless polls cl until it has n records, checking that offsets
// run from 0 without a gap, and returns their values in offset order.
func consumeDiskless(ctx context.Context, t *testing.T, cl *kgo.Client, n int) []string {
	t.Helper()
	var values []string
	for len(values) < n {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records: %v", len(values), n, fetches.Errors())
		}
		for _, e := range fetches.Errors() {
			t.Logf("fetch error (retried): %v", e)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(len(values)) {
				t.Fatalf("record at offset %d after %d records", r.Offset, len(values))
			}
			values = append(values, string(r.Value))
		})
	}
	cl.Close()
	return values
}

// checkZonesInOrder: each zone's records appear once each and in the order
// written.
func checkZonesInOrder(t *testing.T, values []string, perZone int, what string) {
	t.Helper()
	next := map[string]int{}
	for off, v := range values {
		zone, seq, ok := strings.Cut(v, "-")
		var n int
		if _, err := fmt.Sscanf(seq, "%d", &n); !ok || err != nil {
			t.Fatalf("%s: offset %d holds %q", what, off, v)
		}
		if n != next[zone] {
			t.Fatalf("%s: offset %d holds %s record %d, want %d (lost, duplicated or reordered)", what, off, zone, n, next[zone])
		}
		next[zone]++
	}
	for zone, n := range next {
		if n != perZone {
			t.Fatalf("%s: zone %s has %d records, want %d", what, zone, n, perZone)
		}
	}
}

// runTool runs a command line tool and returns its stdout; a failure fails t.
func runTool(ctx context.Context, t *testing.T, bin string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	return string(out)
}

// TestDisklessRetention: a diskless topic with a short retention.ms, merged
// a second after its commit. Once its records are older than retention.ms,
// ListOffsets earliest reaches the log end on every partition, the merged
// segment objects leave the bucket after the delayed delete, and records
// produced later are read from where the start moved to.
func TestDisklessRetention(t *testing.T) {
	defer timed(t, "TestDisklessRetention")()
	c := Start(t, Config{ExtraArgs: []string{"--diskless-append-linger", "50ms",
		"--diskless-merge-age", "1s", "--diskless-merge-interval", "1s"}})
	const (
		topic        = "dlret"
		partitions   = 3
		perPartition = 100
		retention    = 8 * time.Second
	)
	c.CreateTopic(topic, partitions, 3, map[string]string{"diskless.enable": "true",
		"retention.ms": fmt.Sprint(retention.Milliseconds())})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for i := from; i < to; i++ {
				recs = append(recs, &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d-%05d", p, i)})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	producing := time.Now() // the records' timestamps are later
	produce(0, perPartition)

	bucket, err := tier.OpenURL(ctx, c.ObjectStore, nil)
	if err != nil {
		t.Fatal(err)
	}
	segments := func() (int, error) {
		objs, err := bucket.List(ctx, "cluster/topics/"+topic+"-")
		n := 0
		for _, o := range objs {
			if strings.HasSuffix(o.Key, ".seg") {
				n++
			}
		}
		return n, err
	}
	c.WaitFor("the diskless batches merged into segment objects", time.Minute, func() (bool, string) {
		n, err := segments()
		return err == nil && n >= partitions, fmt.Sprintf("%d segment objects, %v", n, err)
	})
	adm := kadm.NewClient(c.Client())
	c.WaitFor("ListOffsets earliest at the log end of every partition", time.Minute, func() (bool, string) {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		var got []int64
		for p := int32(0); p < partitions; p++ {
			o, ok := starts.Lookup(topic, p)
			if !ok || o.Err != nil {
				return false, fmt.Sprintf("partition %d: %+v", p, o)
			}
			got = append(got, o.Offset)
		}
		return slices.Equal(got, []int64{perPartition, perPartition, perPartition}), fmt.Sprintf("earliest %v", got)
	})
	if since := time.Since(producing); since < retention {
		t.Fatalf("the log start moved %v after the produce, before retention.ms %v", since, retention)
	}
	// Deleted ObjectDeleteDelay (30 s) after their manifest entries.
	c.WaitFor("the merged segment objects deleted from the bucket", 2*time.Minute, func() (bool, string) {
		n, err := segments()
		return err == nil && n == 0, fmt.Sprintf("%d segment objects, %v", n, err)
	})

	produce(perPartition, perPartition+1)
	consumer := c.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {
		0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	got := map[int32]string{}
	for len(got) < partitions {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read after retention: %v, got %v", fetches.Errors(), got)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset != perPartition {
				t.Fatalf("partition %d read offset %d from the start, want %d", r.Partition, r.Offset, perPartition)
			}
			got[r.Partition] = string(r.Value)
		})
	}
	consumer.Close()
	for p := int32(0); p < partitions; p++ {
		if want := fmt.Sprintf("p%d-%05d", p, perPartition); got[p] != want {
			t.Fatalf("partition %d holds %q after retention, want %q", p, got[p], want)
		}
	}
}

// TestDisklessCompaction: a diskless topic with cleanup.policy=compact
// refuses keyless records, and once its batches are merged the merging
// broker's cleaner rewrites the merged objects: reading from offset 0
// (through any broker) gives each key's latest value only, at the offsets
// it was acknowledged at, and the log end does not move.
func TestDisklessCompaction(t *testing.T) {
	defer timed(t, "TestDisklessCompaction")()
	c := Start(t, Config{ExtraArgs: []string{"--diskless-append-linger", "50ms",
		"--diskless-merge-age", "1s", "--diskless-merge-interval", "1s", "--log-cleaner-backoff", "1s"}})
	const (
		topic      = "dlcompact"
		partitions = 2
		keys       = 40
		rounds     = 15
	)
	c.CreateTopic(topic, partitions, 3, map[string]string{"diskless.enable": "true", "cleanup.policy": "compact",
		"min.cleanable.dirty.ratio": "0.01"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("no key")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("a keyless record on a compacted diskless topic: %v, want INVALID_RECORD", err)
	}

	latest := map[int32]map[string]int64{} // partition → key → offset of its last value
	for r := range rounds {
		var recs []*kgo.Record
		for p := int32(0); p < partitions; p++ {
			for k := range keys {
				recs = append(recs, &kgo.Record{Partition: p, Key: fmt.Appendf(nil, "key-%02d", k),
					Value: fmt.Appendf(nil, "round-%02d", r)})
			}
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce round %d: %v", r, err)
		}
		for _, pr := range res {
			if latest[pr.Record.Partition] == nil {
				latest[pr.Record.Partition] = map[string]int64{}
			}
			latest[pr.Record.Partition][string(pr.Record.Key)] = pr.Record.Offset
		}
	}
	const end = keys * rounds
	adm := kadm.NewClient(c.Client())
	defer adm.Close()

	read := func(via int32) (map[int32][]*kgo.Record, error) {
		consumer := c.Client(kgo.SeedBrokers(c.Addrs(via)...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
			topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}))
		defer consumer.Close()
		out := map[int32][]*kgo.Record{}
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		for done := 0; done < partitions; {
			fetches := consumer.PollFetches(rctx)
			if rctx.Err() != nil {
				return out, fmt.Errorf("reading through broker %d: %v", via, fetches.Errors())
			}
			fetches.EachRecord(func(r *kgo.Record) {
				out[r.Partition] = append(out[r.Partition], r)
				if r.Offset == end-1 {
					done++
				}
			})
		}
		return out, nil
	}
	c.WaitFor("the merged objects compacted to each key's latest value", 2*time.Minute, func() (bool, string) {
		got, err := read(1)
		if err != nil {
			return false, err.Error()
		}
		return len(got[0]) == keys && len(got[1]) == keys, fmt.Sprintf("%d and %d records read", len(got[0]), len(got[1]))
	})
	for via := int32(1); via <= 3; via++ {
		got, err := read(via)
		if err != nil {
			t.Fatal(err)
		}
		for p := int32(0); p < partitions; p++ {
			if len(got[p]) != keys {
				t.Fatalf("through broker %d, partition %d: %d records, want %d", via, p, len(got[p]), keys)
			}
			for i, r := range got[p] {
				if want := latest[p][string(r.Key)]; r.Offset != want || string(r.Value) != fmt.Sprintf("round-%02d", rounds-1) ||
					(i > 0 && r.Offset <= got[p][i-1].Offset) {
					t.Fatalf("through broker %d, partition %d: record %d is %s=%s at %d; want the last round's value at %d, in offset order",
						via, p, i, r.Key, r.Value, r.Offset, want)
				}
			}
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < partitions; p++ {
		if o, ok := ends.Lookup(topic, p); !ok || o.Offset != end {
			t.Fatalf("partition %d ends at %+v after compaction, want %d", p, o, end)
		}
	}
	// The objects compaction replaced await their delayed deletion on the
	// broker that compacted them, so every broker is asked.
	https := []string{c.Broker(1).HTTPAddr, c.Broker(2).HTTPAddr, c.Broker(3).HTTPAddr}
	out, err := c.runStrata(time.Minute, "tier", "verify", "--full", "--object-store", c.ObjectStore, "--http", strings.Join(https, ","))
	if err != nil || !strings.Contains(out, "\n0 problems") {
		t.Fatalf("tier verify --full of the compacted diskless topic (%v):\n%s", err, out)
	}
}
