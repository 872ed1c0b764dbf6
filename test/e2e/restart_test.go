package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// TestRestartKeepsDataAndConfigs: SIGTERM exits 0, and the restarted broker
// serves every record and every topic config override.
func TestRestartKeepsDataAndConfigs(t *testing.T) {
	b := StartBroker(t)
	const topic = "restart"
	configs := map[string]string{
		"retention.ms":      "123456789",
		"segment.bytes":     "1048576",
		"max.message.bytes": "2000000",
		"cleanup.policy":    "delete",
	}
	createTopic(t, b.Admin(), topic, 3, configs)
	cl := b.Client(kgo.DefaultProduceTopic(topic))
	var produced []*kgo.Record
	for i := 0; i < 30; i++ {
		var rs []*kgo.Record
		for j := 0; j < 100; j++ {
			n := i*100 + j
			rs = append(rs, &kgo.Record{Partition: int32(n % 3), Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, "value-%d", n)})
		}
		produced = append(produced, produceSync(t, cl, rs...)...)
	}
	cl.Close()

	b.Restart()

	checkTopicConfigs(t, b.Admin(), topic, configs)
	checkRecordsPresent(t, b, topic, produced)
	ends := endOffsets(t, b.Admin(), topic)
	if total := ends[0] + ends[1] + ends[2]; total != int64(len(produced)) || len(ends) != 3 {
		t.Fatalf("after restart: end offsets %v (sum %d), want 3 partitions summing to %d", ends, total, len(produced))
	}
}

// checkTopicConfigs asserts DescribeConfigs shows each override as a dynamic
// topic config with its value.
func checkTopicConfigs(t *testing.T, adm *kadm.Client, topic string, want map[string]string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe configs: %v", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs %s: %v / %v", topic, err, rc.Err)
	}
	got := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		got[c.Key] = c
	}
	for k, v := range want {
		c, ok := got[k]
		if !ok || c.Value == nil || *c.Value != v {
			t.Fatalf("config %s = %v, want %q (all: %v)", k, c.MaybeValue(), v, rc.Configs)
		}
		if c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
			t.Errorf("config %s source %v, want DYNAMIC_TOPIC_CONFIG", k, c.Source)
		}
	}
}

// checkRecordsPresent consumes each partition up to the highest produced
// offset and asserts every produced record is there with its offset and value.
func checkRecordsPresent(t *testing.T, b *Broker, topic string, produced []*kgo.Record) {
	t.Helper()
	byPart := map[int32]map[int64]*kgo.Record{}
	maxOff := map[int32]int64{}
	for _, r := range produced {
		if byPart[r.Partition] == nil {
			byPart[r.Partition] = map[int64]*kgo.Record{}
		}
		byPart[r.Partition][r.Offset] = r
		maxOff[r.Partition] = max(maxOff[r.Partition], r.Offset)
	}
	for p, want := range byPart {
		got := consumeRange(t, b, topic, p, 0, maxOff[p]+1)
		seen := map[int64]*kgo.Record{}
		for _, r := range got {
			seen[r.Offset] = r
		}
		for off, w := range want {
			g, ok := seen[off]
			if !ok {
				t.Fatalf("%s[%d] offset %d (value %q) missing", topic, p, off, w.Value)
			}
			if string(g.Value) != string(w.Value) || string(g.Key) != string(w.Key) {
				t.Fatalf("%s[%d] offset %d: key/value %q/%q, want %q/%q", topic, p, off, g.Key, g.Value, w.Key, w.Value)
			}
		}
	}
}

// TestKill9KeepsAcknowledged: kill -9 in the middle of acks=all production
// with the default durability (fsync); after restart every acknowledged
// record is there at its acknowledged offset. The process dies but the
// machine does not, so --durability=replication (page cache only) must keep
// them too.
func TestKill9KeepsAcknowledged(t *testing.T) {
	t.Run("default fsync", func(t *testing.T) { kill9DuringProduce(t, StartBroker(t)) })
	t.Run("replication", func(t *testing.T) {
		kill9DuringProduce(t, StartBroker(t, withArgs("--durability", "replication")))
	})
}

func kill9DuringProduce(t *testing.T, b *Broker) {
	const topic = "kill9"
	createTopic(t, b.Admin(), topic, 4, nil)

	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2))
	var mu sync.Mutex
	var acked []*kgo.Record // guarded by mu
	failed := 0             // guarded by mu
	produced := 0           // owned by the producer goroutine until done is closed
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i, produced = i+1, produced+1 {
			r := &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, "acked-%d", i)}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					acked = append(acked, r)
				} else {
					failed++
				}
			})
		}
	}()
	testkit.WaitFor(t, 60*time.Second, "20000 acknowledged records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 20000
	})
	b.Kill()
	cancel()
	<-done
	cl.Close() // fails whatever is still buffered; those were never acknowledged
	// Promises of failed records arrive after Close returns: wait for all,
	// so no acknowledgement can come after the copy below.
	testkit.WaitFor(t, 30*time.Second, "every produce promise to resolve", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)+failed == produced
	})
	mu.Lock()
	final := append([]*kgo.Record(nil), acked...)
	unacked := failed
	mu.Unlock()
	t.Logf("%d records acknowledged before kill -9, %d not", len(final), unacked)
	if unacked == 0 {
		t.Fatalf("every record was acknowledged: the kill did not land mid-stream")
	}

	b.Start()
	checkRecordsPresent(t, b, topic, final)
}

// TestEnvConfig: every serve flag can come from STRATA_<NAME>; the node id
// given that way is the one clients see.
func TestEnvConfig(t *testing.T) {
	b := StartBroker(t, withEnvConfig(7))
	ctx := testCtx(t, 30*time.Second)
	md, err := b.Admin().BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if len(md.Brokers) != 1 || md.Brokers[0].NodeID != 7 || md.Brokers[0].Port != int32(portOf(t, b.Addr)) {
		t.Fatalf("brokers %+v, want node 7 at %s", md.Brokers, b.Addr)
	}
	b.Restart() // the same environment brings back the same broker
}

func portOf(t testing.TB, addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRestartKeepsDeletions: what was deleted stays deleted across a clean
// restart: the low watermark set by DeleteRecords and a deleted topic.
func TestRestartKeepsDeletions(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	const topic, gone = "keep-low-watermark", "deleted-before-restart"
	createTopic(t, adm, topic, 1, nil)
	createTopic(t, adm, gone, 2, nil)
	cl := b.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 100; i++ {
		produceSync(t, cl, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", i)})
	}
	produceSync(t, cl, &kgo.Record{Topic: gone, Value: []byte("soon gone")})
	ctx := testCtx(t, 60*time.Second)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 30})
	if dr, err := adm.DeleteRecords(ctx, offs); err != nil || dr.Error() != nil {
		t.Fatalf("delete records: %v %v", err, dr.Error())
	}
	if resp, err := adm.DeleteTopics(ctx, gone); err != nil || resp.Error() != nil {
		t.Fatalf("delete topic: %v %v", err, resp.Error())
	}
	cl.Close()

	b.Restart()
	adm = b.Admin()
	if start, end := startOffsets(t, adm, topic)[0], endOffsets(t, adm, topic)[0]; start != 30 || end != 100 {
		t.Fatalf("after restart: earliest %d latest %d, want 30 and 100 (DeleteRecords undone?)", start, end)
	}
	if p := fetchPartition(t, b, topic, 10); kerr.ErrorForCode(p.ErrorCode) != kerr.OffsetOutOfRange {
		t.Fatalf("after restart: fetch at 10 below low watermark 30: %v, want OFFSET_OUT_OF_RANGE", kerr.ErrorForCode(p.ErrorCode))
	}
	if topicExists(t, adm, gone) {
		t.Fatalf("topic %s deleted before the restart is back", gone)
	}
	for p := int32(0); p < 2; p++ {
		if _, err := os.Stat(b.PartitionDir(gone, p)); err == nil {
			t.Errorf("deleted topic's directory %s still on disk after restart", b.PartitionDir(gone, p))
		}
	}
}
