package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// TestKgoRoundTripThroughConnections drives the connection machinery with
// a real client: pipelined produce requests (acks=all, idempotent) to an
// auto-created topic, then a consumer reading everything back in order,
// on a broker restarted in between, with fsync durability.
func TestKgoRoundTripThroughConnections(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	dir := t.TempDir()
	fsync := func(c *Config) { c.DefaultPartitions, c.Durability = 1, hotlog.DurabilityFsync }
	tb := startTestBroker(t, endpoints, dir, fsync)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.DefaultProduceTopic("roundtrip"),
		kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 0; i < n; i++ {
		producer.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, func(r *kgo.Record, err error) {
			if err != nil {
				t.Errorf("produce %s: %v", r.Value, err)
			}
		})
	}
	if err := producer.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	producer.Close()
	tb.stop(t)

	again := startTestBroker(t, endpoints, dir, fsync)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(again.b.Addr().String()), kgo.ConsumeTopics("roundtrip"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	next := 0
	for next < n {
		fetches := consumer.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			t.Fatalf("after %d records: %v", next, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint(next) || r.Offset != int64(next) {
				t.Fatalf("record %d: value %s offset %d", next, r.Value, r.Offset)
			}
			next++
		})
	}
}
