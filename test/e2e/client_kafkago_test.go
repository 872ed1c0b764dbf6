package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// segmentio/kafka-go against a real broker, as its users drive it: every
// codec with keys and headers through its Writer, a partition Reader, a
// consumer-group Reader through a rebalance, read_committed of a
// transaction, and its admin Client. kafka-go has no idempotent or
// transactional producer, so the transaction is written by franz-go.

func kafkaGoClient(b *Broker) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(b.Addr), Timeout: 30 * time.Second}
}

func kafkaGoCreateTopic(t *testing.T, b *Broker, topic string, partitions int) {
	t.Helper()
	resp, err := kafkaGoClient(b).CreateTopics(testCtx(t, 60*time.Second), &kafka.CreateTopicsRequest{
		Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: partitions, ReplicationFactor: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := resp.Errors[topic]; err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// kafkaGoRead reads n messages of one partition from offset.
func kafkaGoRead(t *testing.T, b *Broker, topic string, partition int, offset int64, n int, iso kafka.IsolationLevel) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr}, Topic: topic, Partition: partition,
		MaxWait: 200 * time.Millisecond, IsolationLevel: iso})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 60*time.Second)
	var out []kafka.Message
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go read %s[%d]: %d of %d: %v", topic, partition, len(out), n, err)
		}
		out = append(out, m)
	}
	return out
}

func TestKafkaGoProduceConsumeCodecs(t *testing.T) {
	b := StartBroker(t)
	kafkaGoCreateTopic(t, b, "kgo-codecs", 1)
	codecs := []kafka.Compression{0, kafka.Gzip, kafka.Snappy, kafka.Lz4, kafka.Zstd}
	for _, codec := range codecs {
		w := &kafka.Writer{Addr: kafka.TCP(b.Addr), Topic: "kgo-codecs", Compression: codec, RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond, MaxAttempts: 10}
		var msgs []kafka.Message
		for i := range 20 {
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k-%d", i)), Value: []byte(fmt.Sprintf("%s-%d", codecName(codec), i)),
				Headers: []kafka.Header{{Key: "h", Value: []byte(codecName(codec))}}})
		}
		if err := w.WriteMessages(testCtx(t, 60*time.Second), msgs...); err != nil {
			t.Fatalf("write %s: %v", codecName(codec), err)
		}
		w.Close()
	}
	for i, m := range kafkaGoRead(t, b, "kgo-codecs", 0, 0, 20*len(codecs), kafka.ReadUncommitted) {
		codec, n := codecName(codecs[i/20]), i%20
		if m.Offset != int64(i) || string(m.Key) != fmt.Sprintf("k-%d", n) || string(m.Value) != fmt.Sprintf("%s-%d", codec, n) ||
			len(m.Headers) != 1 || string(m.Headers[0].Value) != codec {
			t.Fatalf("message %d: offset %d key %q value %q headers %v", i, m.Offset, m.Key, m.Value, m.Headers)
		}
	}
}

func codecName(c kafka.Compression) string {
	if c == 0 {
		return "none"
	}
	return compress.Codec(c.Codec()).Name()
}

// TestKafkaGoReadCommitted: a read_committed Reader sees nothing of an open
// transaction (the broker's last stable offset holds it back) and all of it
// once committed. Aborted transactions are left out: kafka-go does not drop
// their records client-side (segmentio/kafka-go#1332), against Kafka too.
func TestKafkaGoReadCommitted(t *testing.T) {
	b := StartBroker(t)
	kafkaGoCreateTopic(t, b, "kgo-txn", 1)
	tx := b.Client(kgo.TransactionalID("kafkago-tx"), kgo.DefaultProduceTopic("kgo-txn"))
	ctx := testCtx(t, 60*time.Second)
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("committed-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr}, Topic: "kgo-txn", Partition: 0,
		MaxWait: 200 * time.Millisecond, IsolationLevel: kafka.ReadCommitted})
	defer r.Close()
	early, cancel := context.WithTimeout(ctx, 2*time.Second)
	m, err := r.ReadMessage(early)
	cancel()
	if err == nil {
		t.Fatalf("read_committed returned %q of an open transaction", m.Value)
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range kafkaGoRead(t, b, "kgo-txn", 0, 0, 5, kafka.ReadCommitted) {
		got = append(got, string(m.Value))
	}
	if want := []string{"committed-0", "committed-1", "committed-2", "committed-3", "committed-4"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed saw %v, want %v", got, want)
	}
}

func TestKafkaGoConsumerGroupRebalance(t *testing.T) {
	b := StartBroker(t)
	kafkaGoCreateTopic(t, b, "kgo-group", 4)
	w := &kafka.Writer{Addr: kafka.TCP(b.Addr), Topic: "kgo-group", Balancer: &kafka.RoundRobin{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond, MaxAttempts: 10}
	defer w.Close()
	write := func(prefix string, n int) {
		var msgs []kafka.Message
		for i := range n {
			msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		}
		if err := w.WriteMessages(testCtx(t, 60*time.Second), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	write("early", 100)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var mu sync.Mutex
	seen := map[string][]int{} // value → the members that read it
	var wg sync.WaitGroup
	member := func(id int) *kafka.Reader {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{b.Addr}, GroupID: "kafkago-g", Topic: "kgo-group",
			MaxWait: 200 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 10 * time.Second,
			RebalanceTimeout: 10 * time.Second, CommitInterval: 0, StartOffset: kafka.FirstOffset})
		wg.Go(func() {
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					return
				}
				mu.Lock()
				seen[string(m.Value)] = append(seen[string(m.Value)], id)
				mu.Unlock()
				if err := r.CommitMessages(ctx, m); err != nil && !errors.Is(err, context.Canceled) {
					t.Logf("member %d commit: %v", id, err)
				}
			}
		})
		return r
	}
	count := func(member int) (values, byMember int) {
		mu.Lock()
		defer mu.Unlock()
		for _, ids := range seen {
			values++
			if slices.Contains(ids, member) {
				byMember++
			}
		}
		return values, byMember
	}
	r1 := member(1)
	testkit.WaitFor(t, 60*time.Second, "member 1 reads the 100 early records", func() bool { v, _ := count(1); return v == 100 })
	r2 := member(2)
	// Wait until the group has rebalanced to two members before writing
	// more: then both get partitions.
	testkit.WaitFor(t, 60*time.Second, "two members in the group", func() bool {
		groups, err := kafkaGoClient(b).DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{"kafkago-g"}})
		if err != nil || len(groups.Groups) != 1 || groups.Groups[0].GroupState != "Stable" {
			return false
		}
		return len(groups.Groups[0].Members) == 2
	})
	write("late", 40)
	testkit.WaitFor(t, 60*time.Second, "the 40 late records read", func() bool { v, _ := count(0); return v == 140 })
	if _, by2 := count(2); by2 == 0 {
		t.Fatal("member 2 read nothing after the rebalance")
	}
	cancel()
	r1.Close()
	r2.Close()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for v, ids := range seen {
		if len(ids) != 1 && v[:4] == "late" {
			t.Fatalf("%s read by members %v: the late records must be read once", v, ids)
		}
	}
}

func TestKafkaGoAdmin(t *testing.T) {
	b := StartBroker(t)
	cl := kafkaGoClient(b)
	ctx := testCtx(t, 60*time.Second)
	kafkaGoCreateTopic(t, b, "kgo-admin", 2)
	md, err := cl.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"kgo-admin"}})
	if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 2 {
		t.Fatalf("Metadata: %v %+v", err, md)
	}
	cp, err := cl.CreatePartitions(ctx, &kafka.CreatePartitionsRequest{Topics: []kafka.TopicPartitionsConfig{{Name: "kgo-admin", Count: 3}}})
	if err != nil || cp.Errors["kgo-admin"] != nil {
		t.Fatalf("CreatePartitions: %v %+v", err, cp)
	}
	inc, err := cl.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{Resources: []kafka.IncrementalAlterConfigsRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "kgo-admin",
		Configs: []kafka.IncrementalAlterConfigsRequestConfig{{Name: "retention.ms", Value: "7200000", ConfigOperation: kafka.ConfigOperationSet}},
	}}})
	if err != nil || len(inc.Resources) != 1 || inc.Resources[0].Error != nil {
		t.Fatalf("IncrementalAlterConfigs: %v %+v", err, inc)
	}
	dc, err := cl.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: "kgo-admin", ConfigNames: []string{"retention.ms"}}}})
	if err != nil || len(dc.Resources) != 1 || len(dc.Resources[0].ConfigEntries) != 1 || dc.Resources[0].ConfigEntries[0].ConfigValue != "7200000" {
		t.Fatalf("DescribeConfigs: %v %+v", err, dc)
	}
	lo, err := cl.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{"kgo-admin": {kafka.LastOffsetOf(0)}}})
	if err != nil || lo.Topics["kgo-admin"][0].LastOffset != 0 {
		t.Fatalf("ListOffsets: %v %+v", err, lo)
	}
	el, err := cl.ElectLeaders(ctx, &kafka.ElectLeadersRequest{Topic: "kgo-admin", Partitions: []int{0}})
	if err != nil || len(el.PartitionResults) != 1 {
		t.Fatalf("ElectLeaders: %v %+v", err, el)
	}
	if code := el.PartitionResults[0].Error; code != nil && !errors.Is(code, kafka.ElectionNotNeeded) {
		t.Fatalf("ElectLeaders of a led partition: %v, want none or ELECTION_NOT_NEEDED", code)
	}
	if _, err := cl.ListGroups(ctx, &kafka.ListGroupsRequest{}); err != nil {
		t.Fatal(err)
	}
	api, err := cl.ApiVersions(ctx, &kafka.ApiVersionsRequest{})
	if err != nil || len(api.ApiKeys) == 0 {
		t.Fatalf("ApiVersions: %v", err)
	}
	dt, err := cl.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: []string{"kgo-admin"}})
	if err != nil || dt.Errors["kgo-admin"] != nil {
		t.Fatalf("DeleteTopics: %v %+v", err, dt)
	}
}
