package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
// record is there at its acknowledged offset.
func TestKill9KeepsAcknowledged(t *testing.T) {
	b := StartBroker(t)
	const topic = "kill9"
	createTopic(t, b.Admin(), topic, 4, nil)

	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(2))
	var mu sync.Mutex
	var acked []*kgo.Record // guarded by mu
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Partition: int32(i % 4), Value: fmt.Appendf(nil, "acked-%d", i)}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked = append(acked, r)
					mu.Unlock()
				}
			})
		}
	}()
	waitFor(t, 60*time.Second, "20000 acknowledged records", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 20000
	})
	b.Kill()
	cancel()
	<-done
	cl.Close() // fails whatever is still buffered; those were never acknowledged
	mu.Lock()
	final := append([]*kgo.Record(nil), acked...)
	mu.Unlock()
	t.Logf("%d records acknowledged before kill -9", len(final))

	b.Start()
	checkRecordsPresent(t, b, topic, final)
}

// waitFor polls cond every 50ms until it holds or timeout, then fails t.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > timeout {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %v for %s", waited.Round(time.Millisecond), what)
	}
}
