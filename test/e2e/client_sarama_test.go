package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/strata-log/strata/internal/testkit"
)

// IBM/sarama against a real broker, as its users drive it: every codec with
// keys and headers, a partition consumer, a consumer group through a
// rebalance, an idempotent producer, a transaction read with
// read_committed, and the admin calls sarama offers.

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V4_0_0_0
	c.ClientID = "strata-e2e-sarama"
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Retry.Max = 10
	c.Producer.Retry.Backoff = 200 * time.Millisecond
	c.Metadata.Retry.Max = 20
	c.Metadata.Retry.Backoff = 200 * time.Millisecond
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Net.DialTimeout, c.Net.ReadTimeout, c.Net.WriteTimeout = 10*time.Second, 30*time.Second, 30*time.Second
	return c
}

func saramaAdmin(t *testing.T, b *Broker) sarama.ClusterAdmin {
	t.Helper()
	adm, err := sarama.NewClusterAdmin([]string{b.Addr}, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

// saramaBrokerWithTopic starts a broker and creates topic through sarama's
// admin, which it returns too.
func saramaBrokerWithTopic(t *testing.T, topic string, partitions int32) (*Broker, sarama.ClusterAdmin) {
	t.Helper()
	b := StartBroker(t)
	adm := saramaAdmin(t, b)
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	return b, adm
}

// saramaProduce sends n records with key k-i, value v-i and a header, one
// SendMessage each, and returns their offsets.
func saramaProduce(t *testing.T, p sarama.SyncProducer, topic string, partition int32, n int, prefix string) []int64 {
	t.Helper()
	var offsets []int64
	for i := range n {
		msg := &sarama.ProducerMessage{Topic: topic, Partition: partition, Key: sarama.StringEncoder(fmt.Sprintf("k-%d", i)),
			Value:   sarama.StringEncoder(fmt.Sprintf("%s-%d", prefix, i)),
			Headers: []sarama.RecordHeader{{Key: []byte("h"), Value: []byte(prefix)}}}
		_, off, err := p.SendMessage(msg)
		if err != nil {
			t.Fatalf("sarama produce %s-%d: %v", prefix, i, err)
		}
		offsets = append(offsets, off)
	}
	return offsets
}

// saramaConsume reads partition from offset until n messages arrived.
func saramaConsume(t *testing.T, b *Broker, cfg *sarama.Config, topic string, partition int32, from int64, n int) []*sarama.ConsumerMessage {
	t.Helper()
	c, err := sarama.NewConsumer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, partition, from)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var out []*sarama.ConsumerMessage
	deadline := time.After(60 * time.Second)
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			out = append(out, m)
		case err := <-pc.Errors():
			t.Fatalf("sarama consume %s[%d]: %v", topic, partition, err)
		case <-deadline:
			t.Fatalf("sarama consume %s[%d]: %d of %d messages after 60s", topic, partition, len(out), n)
		}
	}
	return out
}

func TestSaramaProduceConsumeCodecs(t *testing.T) {
	b, _ := saramaBrokerWithTopic(t, "sarama-codecs", 1)
	codecs := []sarama.CompressionCodec{sarama.CompressionNone, sarama.CompressionGZIP, sarama.CompressionSnappy,
		sarama.CompressionLZ4, sarama.CompressionZSTD}
	for _, codec := range codecs {
		cfg := saramaConfig()
		cfg.Producer.Compression = codec
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
		p, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		saramaProduce(t, p, "sarama-codecs", 0, 20, codec.String())
		p.Close()
	}
	msgs := saramaConsume(t, b, saramaConfig(), "sarama-codecs", 0, sarama.OffsetOldest, 20*len(codecs))
	for i, m := range msgs {
		codec, n := codecs[i/20].String(), i%20
		if m.Offset != int64(i) || string(m.Key) != fmt.Sprintf("k-%d", n) || string(m.Value) != fmt.Sprintf("%s-%d", codec, n) ||
			len(m.Headers) != 1 || string(m.Headers[0].Value) != codec {
			t.Fatalf("message %d: offset %d key %q value %q headers %v", i, m.Offset, m.Key, m.Value, m.Headers)
		}
	}
}

func TestSaramaIdempotentAndTransactions(t *testing.T) {
	b, _ := saramaBrokerWithTopic(t, "sarama-txn", 1)
	idem := saramaConfig()
	idem.Producer.Idempotent = true
	idem.Net.MaxOpenRequests = 1
	idem.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{b.Addr}, idem)
	if err != nil {
		t.Fatal(err)
	}
	if offs := saramaProduce(t, p, "sarama-txn", 0, 10, "idem"); !slices.Equal(offs, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("idempotent offsets %v", offs)
	}
	p.Close()

	txCfg := saramaConfig()
	txCfg.Producer.Idempotent = true
	txCfg.Net.MaxOpenRequests = 1
	txCfg.Producer.Transaction.ID = "sarama-tx"
	txCfg.Producer.Partitioner = sarama.NewManualPartitioner
	tp, err := sarama.NewSyncProducer([]string{b.Addr}, txCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Close()
	for _, commit := range []bool{false, true} {
		if err := tp.BeginTxn(); err != nil {
			t.Fatal(err)
		}
		prefix := map[bool]string{false: "aborted", true: "committed"}[commit]
		saramaProduce(t, tp, "sarama-txn", 0, 5, prefix)
		finish := tp.AbortTxn
		if commit {
			finish = tp.CommitTxn
		}
		if err := finish(); err != nil {
			t.Fatalf("end %s transaction: %v", prefix, err)
		}
	}
	rc := saramaConfig()
	rc.Consumer.IsolationLevel = sarama.ReadCommitted
	var values []string
	for _, m := range saramaConsume(t, b, rc, "sarama-txn", 0, sarama.OffsetOldest, 15) {
		values = append(values, string(m.Value))
	}
	want := []string{}
	for i := range 10 {
		want = append(want, fmt.Sprintf("idem-%d", i))
	}
	for i := range 5 {
		want = append(want, fmt.Sprintf("committed-%d", i))
	}
	if !slices.Equal(values, want) {
		t.Fatalf("read_committed saw %v, want %v", values, want)
	}
}

// saramaGroupHandler records the messages a member consumed and the
// partitions each of its sessions held.
type saramaGroupHandler struct {
	mu       sync.Mutex
	values   map[string]int
	sessions [][]int32
}

func (h *saramaGroupHandler) Setup(s sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sessions = append(h.sessions, slices.Clone(s.Claims()["sarama-group"]))
	return nil
}

func (h *saramaGroupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *saramaGroupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.values[string(m.Value)]++
		h.mu.Unlock()
		s.MarkMessage(m, "")
	}
	return nil
}

func (h *saramaGroupHandler) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.values)
}

func TestSaramaConsumerGroupRebalance(t *testing.T) {
	b, _ := saramaBrokerWithTopic(t, "sarama-group", 4)
	cfg := saramaConfig()
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for part := range int32(4) {
		saramaProduce(t, p, "sarama-group", part, 25, fmt.Sprintf("p%d", part))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := func(h *saramaGroupHandler) sarama.ConsumerGroup {
		gcfg := saramaConfig()
		gcfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
		g, err := sarama.NewConsumerGroup([]string{b.Addr}, "sarama-g", gcfg)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{"sarama-group"}, h); err != nil && ctx.Err() == nil {
					t.Logf("consume: %v", err)
					time.Sleep(200 * time.Millisecond)
				}
			}
		}()
		return g
	}
	first := &saramaGroupHandler{values: map[string]int{}}
	g1 := start(first)
	defer g1.Close()
	testkit.WaitFor(t, 60*time.Second, "the first member consumes all 100 records", func() bool { return first.count() == 100 })

	second := &saramaGroupHandler{values: map[string]int{}}
	g2 := start(second)
	defer g2.Close()
	testkit.WaitFor(t, 60*time.Second, "the second member joins and gets partitions", func() bool {
		second.mu.Lock()
		defer second.mu.Unlock()
		return len(second.sessions) > 0 && len(second.sessions[len(second.sessions)-1]) > 0
	})
	for part := range int32(4) {
		saramaProduce(t, p, "sarama-group", part, 5, fmt.Sprintf("late-p%d", part))
	}
	testkit.WaitFor(t, 60*time.Second, "the 20 late records consumed once across both members", func() bool {
		return first.count()+second.count() == 120
	})
	if second.count() == 0 {
		t.Fatal("the second member consumed nothing after the rebalance")
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	second.mu.Lock()
	defer second.mu.Unlock()
	for v, n := range first.values {
		if n != 1 || second.values[v] != 0 {
			t.Fatalf("%s consumed %d times by the first member and %d by the second (committed offsets lost)", v, n, second.values[v])
		}
	}
}

func TestSaramaAdmin(t *testing.T) {
	b := StartBroker(t)
	adm := saramaAdmin(t, b)
	retention := "3600000"
	if err := adm.CreateTopic("sarama-admin", &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false); err != nil {
		t.Fatal(err)
	}
	topics, err := adm.ListTopics()
	if err != nil || topics["sarama-admin"].NumPartitions != 2 {
		t.Fatalf("ListTopics: %v %+v", err, topics["sarama-admin"])
	}
	if err := adm.CreatePartitions("sarama-admin", 3, nil, false); err != nil {
		t.Fatal(err)
	}
	md, err := adm.DescribeTopics([]string{"sarama-admin"})
	if err != nil || len(md) != 1 || len(md[0].Partitions) != 3 {
		t.Fatalf("DescribeTopics: %v %+v", err, md)
	}
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sarama-admin"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range entries {
		found = found || (e.Name == "retention.ms" && e.Value == retention)
	}
	if !found {
		t.Fatalf("DescribeConfig lacks retention.ms=%s", retention)
	}
	newRetention := "7200000"
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, "sarama-admin", map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &newRetention}}, false); err != nil {
		t.Fatal(err)
	}
	cfg := saramaConfig()
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	saramaProduce(t, p, "sarama-admin", 0, 10, "r")
	p.Close()
	if err := adm.DeleteRecords("sarama-admin", map[int32]int64{0: 4}); err != nil {
		t.Fatal(err)
	}
	// The data directory, then the bucket's bytes as a "tiered:bucket" directory.
	if dirs, err := adm.DescribeLogDirs([]int32{1}); err != nil || len(dirs[1]) != 2 || dirs[1][1].Path != "tiered:bucket" {
		t.Fatalf("DescribeLogDirs: %v %+v", err, dirs)
	}
	if reassign, err := adm.ListPartitionReassignments("sarama-admin", []int32{0}); err != nil || len(reassign) != 0 {
		t.Fatalf("ListPartitionReassignments: %v %+v", err, reassign)
	}
	if _, ctrlErr := adm.Controller(); ctrlErr != nil {
		t.Fatal(ctrlErr)
	}
	if _, err := adm.ListConsumerGroups(); err != nil {
		t.Fatal(err)
	}
	if err := adm.DeleteTopic("sarama-admin"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 30*time.Second, "the topic disappears", func() bool {
		topics, err := adm.ListTopics()
		_, still := topics["sarama-admin"]
		return err == nil && !still
	})
}
