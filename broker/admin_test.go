package broker

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/datadir"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// testBroker is a broker on 127.0.0.1:0 over a metadata store and data dir
// that outlive it (for restart tests).
type testBroker struct {
	b     *Broker
	store *metadata.Store
}

func startTestBroker(t *testing.T, endpoints []string, dataDir string, edit func(*Config)) *testBroker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logger := testBrokerLogger()
	store, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "test", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{NodeID: 1, Listen: "127.0.0.1:0", DataDir: dataDir, Durability: hotlog.DurabilityReplication,
		DefaultPartitions: 2, Logger: logger}
	if edit != nil {
		edit(&cfg)
	}
	b, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tb := &testBroker{b: b, store: store}
	t.Cleanup(func() { tb.stop(t) })
	return tb
}

// stop shuts the broker down (once) and closes its store.
func (tb *testBroker) stop(t *testing.T) {
	if tb.b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tb.b.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	tb.store.Close()
	tb.b = nil
}

func adminClient(t *testing.T, b *Broker) (*kadm.Client, *kgo.Client) {
	t.Helper()
	// 30 s of read timeout beyond a request's own: requests that wait for
	// an fsync (markers, acks=-1) have timed out at kgo's default 10 s on
	// this 2-core machine when several suites fsync at once.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr().String()), kgo.RequestRetries(2),
		kgo.RequestTimeoutOverhead(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl), cl
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func configOf(t *testing.T, adm *kadm.Client, topic, key string) kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c
		}
	}
	t.Fatalf("config %s of %s not described", key, topic)
	return kadm.Config{}
}

func expectCreateErr(t *testing.T, resp kadm.CreateTopicResponse, err error, want *kerr.Error) {
	t.Helper()
	if err != nil && !errors.Is(err, want) {
		t.Fatalf("create %s: %v, want %v", resp.Topic, err, want)
	}
	if !errors.Is(resp.Err, want) {
		t.Fatalf("create %s: err %v (%s), want %v", resp.Topic, resp.Err, resp.ErrMessage, want)
	}
}

func TestCreateTopics(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)

	resp, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"retention.ms": kmsg.StringPtr("60000")}, "orders")
	if err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	if resp.ID == (kadm.TopicID{}) || resp.NumPartitions != 3 || resp.ReplicationFactor != 1 {
		t.Fatalf("create response %+v", resp)
	}
	if c := resp.Configs["retention.ms"]; c.Value == nil || *c.Value != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("create response config retention.ms: %+v", c)
	}
	for p := 0; p < 3; p++ {
		if _, err := os.Stat(filepath.Join(tb.b.cfg.DataDir, "orders-"+string(rune('0'+p)), datadir.MetadataFile)); err != nil {
			t.Fatalf("partition dir %d: %v", p, err)
		}
	}

	resp, err = adm.CreateTopic(ctx, 1, 1, nil, "orders")
	expectCreateErr(t, resp, err, kerr.TopicAlreadyExists)
	resp, err = adm.CreateTopic(ctx, 1, 1, nil, "bad name")
	expectCreateErr(t, resp, err, kerr.InvalidTopicException)
	resp, err = adm.CreateTopic(ctx, 1, 3, nil, "rf3")
	expectCreateErr(t, resp, err, kerr.InvalidReplicationFactor)
	resp, err = adm.CreateTopic(ctx, 0, 1, nil, "zero")
	expectCreateErr(t, resp, err, kerr.InvalidPartitions)
	resp, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("soon")}, "badcfg")
	expectCreateErr(t, resp, err, kerr.InvalidConfig)
	resp, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"no.such.config": kmsg.StringPtr("1")}, "badcfg")
	expectCreateErr(t, resp, err, kerr.InvalidConfig)
	resp, err = adm.CreateTopic(ctx, 1, 1, nil, "orders.v1")
	if err != nil || resp.Err != nil {
		t.Fatalf("create orders.v1: %v %v", err, resp.Err)
	}
	resp, err = adm.CreateTopic(ctx, 1, 1, nil, "orders_v1")
	expectCreateErr(t, resp, err, kerr.InvalidTopicException)

	// Defaults: -1 partitions → num.partitions (2), -1 replication → 1.
	resp, err = adm.CreateTopic(ctx, -1, -1, nil, "defaults")
	if err != nil || resp.Err != nil || resp.NumPartitions != 2 || resp.ReplicationFactor != 1 {
		t.Fatalf("defaults: %v %+v", err, resp)
	}

	vresp, err := adm.ValidateCreateTopics(ctx, 4, 1, nil, "validated")
	if err != nil || vresp["validated"].Err != nil {
		t.Fatalf("validate only: %v %+v", err, vresp)
	}

	topics, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("validated") || !topics.Has("orders") || len(topics["orders"].Partitions) != 3 {
		t.Fatalf("listed: %v", topics.Names())
	}
	for _, p := range topics["orders"].Partitions {
		if p.Leader != 1 || len(p.ISR) != 1 || p.Err != nil {
			t.Fatalf("partition %+v", p)
		}
	}
}

func TestManualAssignmentAndCreatePartitions(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)

	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "manual", -1, -1
	for p := int32(0); p < 2; p++ {
		ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		ra.Partition, ra.Replicas = p, []int32{1}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	}
	bad := rt
	bad.Topic = "manual-bad"
	bad.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{7}}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt, bad}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Fatalf("manual: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("unknown broker in assignment: %+v", resp.Topics[1])
	}

	cp, err := adm.CreatePartitions(ctx, 2, "manual")
	if err != nil || cp["manual"].Err != nil {
		t.Fatalf("create partitions: %v %+v", err, cp)
	}
	topics, err := adm.ListTopics(ctx, "manual")
	if err != nil || len(topics["manual"].Partitions) != 4 {
		t.Fatalf("after adding: %v %+v", err, topics)
	}
	if _, code := tb.b.parts.lookup("manual", 3); code != 0 {
		t.Fatalf("new partition not served: code %d", code)
	}
	cp, err = adm.UpdatePartitions(ctx, 3, "manual")
	if err != nil || !errors.Is(cp["manual"].Err, kerr.InvalidPartitions) {
		t.Fatalf("shrinking: %v %+v", err, cp)
	}
	cp, err = adm.CreatePartitions(ctx, 1, "nope")
	if err != nil || !errors.Is(cp["nope"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("unknown topic: %v %+v", err, cp)
	}
}

func TestDescribeAndAlterConfigs(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("60000")}, "cfg"); err != nil || resp.Err != nil {
		t.Fatalf("create: %v %v", err, resp.Err)
	}
	c := configOf(t, adm, "cfg", "retention.ms")
	if *c.Value != "60000" || c.Source != kmsg.ConfigSourceDynamicTopicConfig || len(c.Synonyms) != 1 || c.Synonyms[0].Key != "retention.ms" {
		t.Fatalf("retention.ms: %+v", c)
	}
	if c := configOf(t, adm, "cfg", "segment.bytes"); *c.Value != "1073741824" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes: %+v", c)
	}

	alter := []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kmsg.StringPtr("1048576")},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
		{Op: kadm.AppendConfig, Name: "cleanup.policy", Value: kmsg.StringPtr("compact")},
	}
	ar, err := adm.AlterTopicConfigs(ctx, alter, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, ar)
	}
	// Read-your-writes: the broker's own view changed before it answered.
	if p, code := tb.b.parts.lookup("cfg", 0); code != 0 || p.config().SegmentBytes != 1048576 || !p.config().HasCompact() {
		t.Fatalf("local config not updated: %d %+v", code, p.config())
	}
	if c := configOf(t, adm, "cfg", "retention.ms"); *c.Value != "604800000" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("retention.ms after delete: %+v", c)
	}
	if c := configOf(t, adm, "cfg", "cleanup.policy"); *c.Value != "delete,compact" {
		t.Fatalf("cleanup.policy after append: %q", *c.Value)
	}

	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kmsg.StringPtr("-5")}}, "cfg")
	if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatalf("invalid value: %v %+v", err, ar)
	}
	ar, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.AppendConfig, Name: "segment.bytes", Value: kmsg.StringPtr("1")}}, "cfg")
	if err != nil || !errors.Is(ar[0].Err, kerr.InvalidConfig) {
		t.Fatalf("append to a non-list: %v %+v", err, ar)
	}
	ar, err = adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.bytes", Value: kmsg.StringPtr("1000")}}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("validate only: %v %+v", err, ar)
	}
	if c := configOf(t, adm, "cfg", "retention.bytes"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("validate-only changed retention.bytes: %+v", c)
	}

	// Legacy AlterConfigs replaces every override.
	ar, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.bytes", Value: kmsg.StringPtr("5000")}}, "cfg")
	if err != nil || ar[0].Err != nil {
		t.Fatalf("alter state: %v %+v", err, ar)
	}
	if c := configOf(t, adm, "cfg", "segment.bytes"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("segment.bytes override survived a full replace: %+v", c)
	}
	if c := configOf(t, adm, "cfg", "retention.bytes"); *c.Value != "5000" {
		t.Fatalf("retention.bytes: %+v", c)
	}

	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil || rcs[0].Err != nil || len(rcs[0].Configs) == 0 {
		t.Fatalf("broker configs: %v %+v", err, rcs)
	}
	rcs, err = adm.DescribeTopicConfigs(ctx, "missing")
	if err == nil && (len(rcs) != 1 || !errors.Is(rcs[0].Err, kerr.UnknownTopicOrPartition)) {
		t.Fatalf("missing topic: %+v", rcs)
	}
}

func TestDeleteTopics(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	for _, name := range []string{"gone", "by-id"} {
		if resp, err := adm.CreateTopic(ctx, 2, 1, nil, name); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, resp.Err)
		}
	}
	dr, err := adm.DeleteTopics(ctx, "gone", "never")
	if err != nil || dr["gone"].Err != nil || !errors.Is(dr["never"].Err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("delete: %v %+v", err, dr)
	}
	if _, err := os.Stat(filepath.Join(tb.b.cfg.DataDir, "gone-0")); !os.IsNotExist(err) {
		t.Fatalf("directory of deleted topic still there: %v", err)
	}
	if _, code := tb.b.parts.lookup("gone", 0); code != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("deleted topic still served: code %d", code)
	}

	id, _ := tb.b.parts.topicID("by-id")
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{TopicID: id}, {TopicID: [16]byte{9}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "by-id" {
		t.Fatalf("delete by id: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown id: %+v", resp.Topics[1])
	}
	// A topic of the same name again starts empty, with a new id.
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "gone"); err != nil || resp.Err != nil {
		t.Fatalf("re-create: %v %v", err, resp.Err)
	}
}

func TestMetadataAutoCreate(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	tb := startTestBroker(t, endpoints, t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	md := func(allow bool, topics ...string) *kmsg.MetadataResponse {
		req := kmsg.NewPtrMetadataRequest()
		req.AllowAutoTopicCreation = allow
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := md(false, "auto")
	if resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("not allowed: %+v", resp.Topics[0])
	}
	resp = md(true, "auto", "bad/name")
	if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("auto-created: %+v", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != kerr.InvalidTopicException.Code {
		t.Fatalf("invalid name: %+v", resp.Topics[1])
	}
	if resp.ControllerID != 1 || len(resp.Brokers) != 1 || resp.ClusterID == nil || *resp.ClusterID == "" {
		t.Fatalf("cluster part: %+v", resp)
	}
	none := kmsg.NewPtrMetadataRequest()
	none.Topics = []kmsg.MetadataRequestTopic{} // empty (not null) at v1+: no topics
	all, err := none.RequestWith(ctx, cl)
	if err != nil || len(all.Topics) != 0 {
		t.Fatalf("empty list returned %d topics", len(all.Topics))
	}

	off := startTestBroker(t, endpoints, t.TempDir(), func(c *Config) { c.NodeID, c.DisableAutoCreateTopics = 2, true })
	_, cl2 := adminClient(t, off.b)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("auto-off")}}
	resp, err = req.RequestWith(ctx, cl2)
	if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("auto.create.topics.enable=false: %v %+v", err, resp)
	}
}

func TestDescribeClusterAndProducerIDs(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	if err != nil || dc.ErrorCode != 0 || dc.ControllerID != 1 || len(dc.Brokers) != 1 || dc.ClusterID == "" {
		t.Fatalf("describe cluster: %v %+v", err, dc)
	}
	seen := map[int64]bool{}
	for i := 0; i < 3; i++ {
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 || seen[resp.ProducerID] {
			t.Fatalf("init producer id: %v %+v", err, resp)
		}
		seen[resp.ProducerID] = true
	}
	// A transactional id goes to its transaction coordinator: here no
	// broker leads its __transaction_state partition yet (FindCoordinator
	// creates the topic), so NOT_COORDINATOR. Sent over a raw connection
	// to skip kgo's coordinator lookup.
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.Version, txn.TransactionalID = 4, kmsg.StringPtr("tx")
	c := dialWire(t, tb.b)
	c.send(txn, 5)
	_, body, err := c.recv(true)
	if err != nil {
		t.Fatal(err)
	}
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.Version = 4
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("transactional: %v %+v", err, resp)
	}
}

// TestRestartKeepsTopicsAndConfigs: New+Start on the same dirs and etcd
// serves the same topics and configs; a topic deleted while the broker was
// down has its directories removed at start.
func TestRestartKeepsTopicsAndConfigs(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	dir := t.TempDir()
	tb := startTestBroker(t, endpoints, dir, nil)
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)
	for _, name := range []string{"kept", "dropped"} {
		if resp, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kmsg.StringPtr("123456")}, name); err != nil || resp.Err != nil {
			t.Fatalf("create: %v %v", err, resp.Err)
		}
	}
	if ar, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: kmsg.StringPtr("2097152")}}, "kept"); err != nil || ar[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, ar)
	}
	tb.stop(t)
	if err := tb.store.DeleteTopic(ctx, "dropped"); err == nil {
		t.Fatal("store should be closed") // the broker's own store is closed; use another
	}
	other, err := metadata.Open(ctx, metadata.Config{Endpoints: endpoints, Cluster: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteTopic(ctx, "dropped"); err != nil {
		t.Fatal(err)
	}
	other.Close()

	again := startTestBroker(t, endpoints, dir, nil)
	adm2, _ := adminClient(t, again.b)
	if c := configOf(t, adm2, "kept", "retention.ms"); *c.Value != "123456" {
		t.Fatalf("retention.ms after restart: %+v", c)
	}
	if c := configOf(t, adm2, "kept", "segment.bytes"); *c.Value != "2097152" {
		t.Fatalf("segment.bytes after restart: %+v", c)
	}
	testkit.WaitFor(t, 10*time.Second, "condition", func() bool { _, code := again.b.parts.lookup("kept", 1); return code == 0 }) // re-elected
	if p, code := again.b.parts.lookup("kept", 1); code != 0 || p.config().RetentionMs != 123456 {
		t.Fatalf("partition after restart: code %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "dropped-0")); !os.IsNotExist(err) {
		t.Fatalf("directory of topic deleted while down: %v", err)
	}
}

// testBrokerLogger discards logs unless STRATA_TEST_BROKER_LOG=1 (debug
// logs on stderr, for diagnosing a failure).
func testBrokerLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_BROKER_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
