package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
)

// TestProduceAcks: acks=0 and acks=1 producers (non-idempotent, as Kafka
// requires for acks != all) land every record.
func TestProduceAcks(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	for _, tc := range []struct {
		topic string
		acks  kgo.Acks
	}{{"acks-0", kgo.NoAck()}, {"acks-1", kgo.LeaderAck()}} {
		createTopic(t, adm, tc.topic, 1, nil)
		cl := b.Client(kgo.DefaultProduceTopic(tc.topic), kgo.RequiredAcks(tc.acks), kgo.DisableIdempotentWrite())
		ctx := testCtx(t, 60*time.Second)
		for i := 0; i < 1000; i++ {
			cl.Produce(ctx, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", tc.topic, i)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("%s: flush: %v", tc.topic, err)
		}
		// acks=0 gives no answer to wait for: poll the end offset.
		testkit.WaitFor(t, 30*time.Second, tc.topic+" end offset 1000", func() bool { return endOffsets(t, adm, tc.topic)[0] == 1000 })
		got := consumeRange(t, b, tc.topic, 0, 0, 1000)
		for i, r := range got {
			if want := fmt.Sprintf("%s-%d", tc.topic, i); string(r.Value) != want || r.Offset != int64(i) {
				t.Fatalf("%s: offset %d = %q, want %d = %q", tc.topic, r.Offset, r.Value, i, want)
			}
		}
	}
}

// TestAutoCreateTopics: a Metadata request asking for an unknown topic
// creates it when auto.create.topics.enable is on (the default), and gets
// UNKNOWN_TOPIC_OR_PARTITION without creating it when it is off.
func TestAutoCreateTopics(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		created bool
	}{{"default on", nil, true}, {"off", []string{"--auto-create-topics=false"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := StartBroker(t, withArgs(tc.args...))
			const topic = "made-on-demand"
			cl := b.Client()
			ctx := testCtx(t, 30*time.Second)
			req := kmsg.NewPtrMetadataRequest()
			req.AllowAutoTopicCreation = true
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				t.Fatalf("metadata: %v", err)
			}
			if len(resp.Topics) != 1 {
				t.Fatalf("metadata: %d topics, want 1", len(resp.Topics))
			}
			code := kerr.ErrorForCode(resp.Topics[0].ErrorCode)
			if !tc.created {
				if !errors.Is(code, kerr.UnknownTopicOrPartition) {
					t.Fatalf("auto-create off: metadata error %v, want UNKNOWN_TOPIC_OR_PARTITION", code)
				}
				if topicExists(t, b.Admin(), topic) {
					t.Fatalf("auto-create off, yet the topic was created")
				}
				return
			}
			// Kafka may answer LEADER_NOT_AVAILABLE while the new topic settles.
			testkit.WaitFor(t, 30*time.Second, "auto-created topic in metadata", func() bool { return topicExists(t, b.Admin(), topic) })
			r := produceSync(t, b.Client(), &kgo.Record{Topic: topic, Value: []byte("x")})[0]
			if r.Offset != 0 {
				t.Fatalf("first record of the auto-created topic at offset %d", r.Offset)
			}
		})
	}
}

// TestManyPartitionsKeepServing: while a topic with many partitions is being
// created, the broker keeps answering Metadata on other connections (logs are
// opened outside the partition-map lock).
func TestManyPartitionsKeepServing(t *testing.T) {
	b := StartBroker(t)
	adm := b.Admin()
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		resp, err := adm.CreateTopic(ctx, 3000, 1, nil, "many-partitions")
		if err == nil {
			err = resp.Err
		}
		done <- err
	}()
	probe := b.Client()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, probe)
		cancel()
		if err != nil {
			t.Fatalf("Metadata unanswered for 5s while a 3000-partition topic is created: %v", err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("create 3000 partitions: %v", err)
			}
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}
