package broker

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// Raw-protocol checks of behaviour where Strata must answer as Kafka 4 does.

// metadataOf asks for topics by name, without auto-creation.
func metadataOf(t *testing.T, cl *kgo.Client, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// createTopicRaw sends one CreateTopics request and returns its only topic.
func createTopicRaw(t *testing.T, cl *kgo.Client, name string, partitions int32, timeout time.Duration) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(timeout.Milliseconds())
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0]
}

// A new partition's first leader leads at epoch 0, as in Kafka: clients
// that fetch or seek with a leader epoch compare against it.
func TestNewPartitionStartsAtLeaderEpochZero(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	if ct := createTopicRaw(t, cl, "epoch0", 3, 30*time.Second); ct.ErrorCode != 0 {
		t.Fatalf("create: %v %v", kerr.ErrorForCode(ct.ErrorCode), ct.ErrorMessage)
	}
	mt := metadataOf(t, cl, "epoch0").Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != 3 {
		t.Fatalf("metadata: %+v", mt)
	}
	for _, p := range mt.Partitions {
		if p.ErrorCode != 0 || p.Leader != 1 || p.LeaderEpoch != 0 {
			t.Errorf("partition %d: leader %d at epoch %d (error %d), want leader 1 at epoch 0",
				p.Partition, p.Leader, p.LeaderEpoch, p.ErrorCode)
		}
	}
}

// CreateTopics answers when the topic is usable: with a controller slower
// than any fixed wait, the answer still comes after the leaders are
// elected, within the request's timeout.
func TestCreateTopicsAnswersWhenLeadersAreElected(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		c.ControllerDebounce = 6 * time.Second
	})
	_, cl := adminClient(t, tb.b)
	if ct := createTopicRaw(t, cl, "usable", 4, 30*time.Second); ct.ErrorCode != 0 {
		t.Fatalf("create: %v %v", kerr.ErrorForCode(ct.ErrorCode), ct.ErrorMessage)
	}
	mt := metadataOf(t, cl, "usable").Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != 4 {
		t.Fatalf("metadata right after CreateTopics: %+v", mt)
	}
	for _, p := range mt.Partitions {
		if p.ErrorCode != 0 || p.Leader < 0 {
			t.Errorf("partition %d right after CreateTopics: leader %d, error %v", p.Partition, p.Leader, kerr.ErrorForCode(p.ErrorCode))
		}
	}

	// A timeout shorter than the election: REQUEST_TIMED_OUT, the topic
	// exists, and each of its partitions is LEADER_NOT_AVAILABLE.
	if ct := createTopicRaw(t, cl, "slow", 2, time.Second); ct.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("create with a 1 s timeout: %v, want REQUEST_TIMED_OUT", kerr.ErrorForCode(ct.ErrorCode))
	}
	mt = metadataOf(t, cl, "slow").Topics[0]
	if mt.ErrorCode != 0 || len(mt.Partitions) != 2 {
		t.Fatalf("metadata of the topic whose leaders are pending: %+v", mt)
	}
	for _, p := range mt.Partitions {
		if p.ErrorCode != kerr.LeaderNotAvailable.Code || p.Leader != -1 {
			t.Errorf("pending partition %d: leader %d, error %v, want LEADER_NOT_AVAILABLE", p.Partition, p.Leader, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}

// Auto-creation through Metadata answers the new topic with
// LEADER_NOT_AVAILABLE and no partitions, as Kafka does; the client's next
// Metadata sees the partitions.
func TestMetadataAutoCreateAnswersLeaderNotAvailable(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("auto")
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	if mt := resp.Topics[0]; mt.ErrorCode != kerr.LeaderNotAvailable.Code || len(mt.Partitions) != 0 {
		t.Fatalf("auto-created topic: error %v, %d partitions; want LEADER_NOT_AVAILABLE and none",
			kerr.ErrorForCode(mt.ErrorCode), len(mt.Partitions))
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mt := metadataOf(t, cl, "auto").Topics[0]
		led := mt.ErrorCode == 0 && len(mt.Partitions) == 2
		for _, p := range mt.Partitions {
			led = led && p.Leader == 1
		}
		if led {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("auto-created topic never led: %+v", mt)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// message.format.version is accepted and ignored by CreateTopics,
// AlterConfigs and IncrementalAlterConfigs, as Kafka 4 does.
func TestMessageFormatVersionAcceptedAndIgnored(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	create := kmsg.NewPtrCreateTopicsRequest()
	create.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "old-tools", 1, 1
	rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{
		{Name: "message.format.version", Value: kmsg.StringPtr("2.8-IV1")},
		{Name: "retention.ms", Value: kmsg.StringPtr("3600000")},
	}
	create.Topics = append(create.Topics, rt)
	cresp, err := create.RequestWith(ctx, cl)
	if err != nil || cresp.Topics[0].ErrorCode != 0 {
		t.Fatalf("create with message.format.version: %v %+v", err, cresp)
	}

	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "old-tools"
	ar.Configs = []kmsg.AlterConfigsRequestResourceConfig{
		{Name: "message.format.version", Value: kmsg.StringPtr("0.10.0")},
		{Name: "retention.ms", Value: kmsg.StringPtr("7200000")},
	}
	alter.Resources = append(alter.Resources, ar)
	aresp, err := alter.RequestWith(ctx, cl)
	if err != nil || aresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs with message.format.version: %v %+v", err, aresp)
	}

	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "old-tools"
	ir.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "message.format.version", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("3.0")},
	}
	inc.Resources = append(inc.Resources, ir)
	iresp, err := inc.RequestWith(ctx, cl)
	if err != nil || iresp.Resources[0].ErrorCode != 0 {
		t.Fatalf("IncrementalAlterConfigs with message.format.version: %v %+v", err, iresp)
	}

	overrides, err := tb.store.Topic(ctx, "old-tools")
	if err != nil {
		t.Fatal(err)
	}
	if _, stored := overrides.Configs["message.format.version"]; stored || overrides.Configs["retention.ms"] != "7200000" {
		t.Fatalf("stored overrides %v: want retention.ms=7200000 and no message.format.version", overrides.Configs)
	}
}

// Altering the configs of a topic that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION, even when the configs are invalid too.
func TestAlterConfigsOfMissingTopic(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, "missing"
	ar.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "no.such.config", Value: kmsg.StringPtr("1")}}
	alter.Resources = append(alter.Resources, ar)
	aresp, err := alter.RequestWith(ctx, cl)
	if err != nil || aresp.Resources[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("AlterConfigs of a missing topic: %v %+v, want UNKNOWN_TOPIC_OR_PARTITION", err, aresp)
	}
	inc := kmsg.NewPtrIncrementalAlterConfigsRequest()
	ir := kmsg.NewIncrementalAlterConfigsRequestResource()
	ir.ResourceType, ir.ResourceName = kmsg.ConfigResourceTypeTopic, "missing"
	ir.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{
		{Name: "retention.ms", Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr("not-a-number")},
	}
	inc.Resources = append(inc.Resources, ir)
	iresp, err := inc.RequestWith(ctx, cl)
	if err != nil || iresp.Resources[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("IncrementalAlterConfigs of a missing topic: %v %+v, want UNKNOWN_TOPIC_OR_PARTITION", err, iresp)
	}
}

// describeConfigsRaw describes one resource with synonyms and documentation.
func describeConfigsRaw(t *testing.T, cl *kgo.Client, typ kmsg.ConfigResourceType, name string) kmsg.DescribeConfigsResponseResource {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms, req.IncludeDocumentation = true, true
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType, r.ResourceName = typ, name
	req.Resources = append(req.Resources, r)
	// To the seed broker: kgo would send a cluster-wide ("") BROKER
	// resource to any broker it knows.
	kresp, err := cl.SeedBrokers()[0].Request(testCtx(t), req)
	if err != nil {
		t.Fatalf("describe %v %q: %v", typ, name, err)
	}
	resp := kresp.(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("describe %v %q: %v %+v", typ, name, err, resp)
	}
	return resp.Resources[0]
}

// DescribeConfigs follows Kafka's synonym rules and returns documentation
// when asked for.
func TestDescribeConfigsSynonymsAndDocumentation(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	_, cl := adminClient(t, tb.b)
	if ct := createTopicRaw(t, cl, "described", 1, 30*time.Second); ct.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(ct.ErrorCode))
	}
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range describeConfigsRaw(t, cl, kmsg.ConfigResourceTypeTopic, "described").Configs {
		byName[c.Name] = c
		if c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("topic config %s: no documentation", c.Name)
		}
	}
	// retention.ms defaulted: log.retention.ms has no default of its own
	// in Kafka (log.retention.hours has), so no synonym.
	if c := byName["retention.ms"]; c.Source != kmsg.ConfigSourceDefaultConfig || len(c.ConfigSynonyms) != 0 {
		t.Errorf("retention.ms: source %v, synonyms %+v; want DEFAULT_CONFIG and none", c.Source, c.ConfigSynonyms)
	}
	// segment.bytes defaulted: the broker default log.segment.bytes.
	if c := byName["segment.bytes"]; len(c.ConfigSynonyms) != 1 || c.ConfigSynonyms[0].Name != "log.segment.bytes" ||
		c.ConfigSynonyms[0].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes synonyms %+v; want log.segment.bytes DEFAULT_CONFIG", c.ConfigSynonyms)
	}

	brokerConfigs := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range describeConfigsRaw(t, cl, kmsg.ConfigResourceTypeBroker, "1").Configs {
		brokerConfigs[c.Name] = c
		if c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("broker config %s: no documentation", c.Name)
		}
	}
	for _, name := range []string{"log.cleaner.backoff.ms", "log.retention.check.interval.ms", "num.partitions", "broker.id"} {
		if _, ok := brokerConfigs[name]; !ok {
			t.Errorf("broker config %s not described", name)
		}
	}
}

// sessionFetchRequest fetches partitions 0..len(offsets)-1 of topic from offsets.
func sessionFetchRequest(topic string, id [16]byte, offsets []int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis = 1<<20, 0
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	for i, o := range offsets {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(i), o, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// answered lists the partitions a fetch answer carries and their records.
func answered(t *testing.T, resp *kmsg.FetchResponse) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	for _, st := range resp.Topics {
		for _, sp := range st.Partitions {
			if sp.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", sp.Partition, kerr.ErrorForCode(sp.ErrorCode))
			}
			out[sp.Partition] = countRecords(t, sp.RecordBatches)
		}
	}
	return out
}

// Fetch sessions (KIP-227) over the wire: a sessionless fetch is served
// whatever id it carries; a full fetch opens a session; incremental
// fetches answer only the partitions with news.
func TestFetchSessions(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	kid := createDataTopic(t, adm, "sess", 3, nil)
	id := [16]byte(kid)
	produce := func(partition int32, n int) {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "sess", Partition: partition, Value: []byte("v")}
		}
		produceSyncAll(t, newDataClient(t, b, kgo.RecordPartitioner(kgo.ManualPartitioner())), recs)
	}
	produce(0, 2)
	produce(1, 3)

	// Sessionless (epoch -1) with a non-zero id: served, session 0.
	req := sessionFetchRequest("sess", id, []int64{0, 0, 0})
	req.SessionID, req.SessionEpoch = 12345, -1
	resp := requestDirect(t, cl, req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 {
		t.Fatalf("sessionless fetch with an id: error %v, session %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionID)
	}
	if got := answered(t, resp); got[0] != 2 || got[1] != 3 || len(got) != 3 {
		t.Fatalf("sessionless fetch answered %v", got)
	}

	// Full fetch opening a session.
	req = sessionFetchRequest("sess", id, []int64{0, 0, 0})
	req.SessionID, req.SessionEpoch = 0, 0
	resp = requestDirect(t, cl, req).(*kmsg.FetchResponse)
	session := resp.SessionID
	if resp.ErrorCode != 0 || session == 0 || len(answered(t, resp)) != 3 {
		t.Fatalf("full fetch: error %v, session %d, %d partitions", kerr.ErrorForCode(resp.ErrorCode), session, len(answered(t, resp)))
	}

	// Incremental, moving partitions 0 and 1 past their records: both
	// answer (their offsets moved, nothing new); partition 2 has nothing.
	req = sessionFetchRequest("sess", id, []int64{2, 3})
	req.SessionID, req.SessionEpoch = session, 1
	resp = requestDirect(t, cl, req).(*kmsg.FetchResponse)
	if got := answered(t, resp); resp.SessionID != session || len(got) != 0 {
		t.Fatalf("incremental fetch with no news: session %d, answered %v", resp.SessionID, got)
	}

	// New records on partition 2 only: the empty incremental fetch
	// answers partition 2 alone.
	produce(2, 4)
	req = kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.SessionID, req.SessionEpoch = 1<<20, session, 2
	resp = requestDirect(t, cl, req).(*kmsg.FetchResponse)
	if got := answered(t, resp); len(got) != 1 || got[2] != 4 {
		t.Fatalf("incremental fetch after producing to partition 2 answered %v, want only partition 2 with 4 records", got)
	}

	// A stale epoch, and an unknown session.
	req.SessionEpoch = 2
	if resp = requestDirect(t, cl, req).(*kmsg.FetchResponse); resp.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("replayed epoch: %v, want INVALID_FETCH_SESSION_EPOCH", kerr.ErrorForCode(resp.ErrorCode))
	}
	req.SessionID, req.SessionEpoch = session+1, 1
	if resp = requestDirect(t, cl, req).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: %v, want FETCH_SESSION_ID_NOT_FOUND", kerr.ErrorForCode(resp.ErrorCode))
	}
}

// Under fsync durability an acks=1 produce is answered after the leader's
// flush: with the leader alone in the ISR, the record is visible to
// ListOffsets and consumers as soon as the producer hears of it.
func TestAcksOneVisibleOnAckUnderFsync(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	createDataTopic(t, adm, "acks1", 1, nil)
	producer := newDataClient(t, b, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0))
	for i := range 20 {
		r := &kgo.Record{Topic: "acks1", Value: []byte("v")}
		if err := producer.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "acks1"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := requestDirect(t, cl, req).(*kmsg.ListOffsetsResponse)
		if got := resp.Topics[0].Partitions[0].Offset; got != int64(i+1) {
			t.Fatalf("after acknowledged record %d (offset %d), ListOffsets latest = %d, want %d", i+1, r.Offset, got, i+1)
		}
	}
}

// ElectLeaders moves leadership back to the preferred replica, answers
// ELECTION_NOT_NEEDED once it leads, and UNKNOWN_TOPIC_OR_PARTITION for a
// partition that does not exist.
func TestElectLeadersPreferred(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	b1 := startReplicaBroker(t, endpoints, 1, hotlog.DurabilityReplication, nil)
	b2 := startReplicaBroker(t, endpoints, 2, hotlog.DurabilityReplication, nil)
	topic, p1, p2 := createReplicatedTopic(t, b1, b2)
	testkit.WaitFor(t, 20*time.Second, "broker 1 leads", func() bool { return p1.isLeader() })
	states, err := b1.store.PartitionStates(testCtx(t), topic.ID)
	if err != nil {
		t.Fatal(err)
	}
	electLeader(t, b1.store, topic.ID, b2.b, states[0].LeaderEpoch+1, []int32{1, 2})
	testkit.WaitFor(t, 20*time.Second, "broker 2 leads", func() bool { return p2.isLeader() })
	_, cl := adminClient(t, b1.b)

	elect := func(topics []kmsg.ElectLeadersRequestTopic) *kmsg.ElectLeadersResponse {
		req := kmsg.NewPtrElectLeadersRequest()
		req.ElectionType, req.Topics, req.TimeoutMillis = 0, topics, 30000
		return requestDirect(t, cl, req).(*kmsg.ElectLeadersResponse)
	}
	rep := []kmsg.ElectLeadersRequestTopic{{Topic: "rep", Partitions: []int32{0}}}
	resp := elect(rep)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("preferred election: %+v", resp)
	}
	testkit.WaitFor(t, 20*time.Second, "broker 1 leads again", func() bool { return p1.isLeader() })
	after, err := b1.store.PartitionStates(testCtx(t), topic.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].Leader != 1 || after[0].LeaderEpoch != states[0].LeaderEpoch+2 {
		t.Fatalf("after the election: leader %d epoch %d, want 1 at %d", after[0].Leader, after[0].LeaderEpoch, states[0].LeaderEpoch+2)
	}
	if code := elect(rep).Topics[0].Partitions[0].ErrorCode; code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("second election: %v, want ELECTION_NOT_NEEDED", kerr.ErrorForCode(code))
	}
	if resp := elect(nil); len(resp.Topics) != 0 {
		t.Fatalf("election of every partition, none needing one: %+v", resp.Topics)
	}
	missing := elect([]kmsg.ElectLeadersRequestTopic{{Topic: "rep", Partitions: []int32{5}}, {Topic: "nope", Partitions: []int32{0}}})
	for _, rt := range missing.Topics {
		if code := rt.Partitions[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("%s-%d: %v, want UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, rt.Partitions[0].Partition, kerr.ErrorForCode(code))
		}
	}
}

// ListPartitionReassignments answers an empty list when nothing moves; DescribeLogDirs lists
// the local partitions with their sizes; DescribeTopicPartitions pages
// through partitions with a cursor.
func TestReassignmentsLogDirsAndTopicPartitions(t *testing.T) {
	b, adm, cl := dataPathBroker(t)
	createDataTopic(t, adm, "dirs", 3, nil)
	createDataTopic(t, adm, "alpha", 2, nil)
	produceSyncAll(t, newDataClient(t, b), makeTestRecords("dirs", 30))

	lpr := requestDirect(t, cl, kmsg.NewPtrListPartitionReassignmentsRequest()).(*kmsg.ListPartitionReassignmentsResponse)
	if lpr.ErrorCode != 0 || len(lpr.Topics) != 0 {
		t.Fatalf("ListPartitionReassignments: %+v", lpr)
	}

	dld := kmsg.NewPtrDescribeLogDirsRequest()
	dld.Topics = []kmsg.DescribeLogDirsRequestTopic{{Topic: "dirs", Partitions: []int32{0, 1, 2}}}
	dresp := requestDirect(t, cl, dld).(*kmsg.DescribeLogDirsResponse)
	if dresp.ErrorCode != 0 || len(dresp.Dirs) != 1 || dresp.Dirs[0].ErrorCode != 0 || dresp.Dirs[0].Dir != b.cfg.DataDir ||
		dresp.Dirs[0].TotalBytes <= 0 || dresp.Dirs[0].UsableBytes <= 0 || len(dresp.Dirs[0].Topics) != 1 {
		t.Fatalf("DescribeLogDirs: %+v", dresp)
	}
	var size int64
	for _, p := range dresp.Dirs[0].Topics[0].Partitions {
		size += p.Size
	}
	if len(dresp.Dirs[0].Topics[0].Partitions) != 3 || size <= 0 {
		t.Fatalf("DescribeLogDirs partitions %+v", dresp.Dirs[0].Topics[0].Partitions)
	}

	describe := func(limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor) *kmsg.DescribeTopicPartitionsResponse {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit, req.Cursor = limit, cursor
		return requestDirect(t, cl, req).(*kmsg.DescribeTopicPartitionsResponse)
	}
	var seen []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for range 10 {
		resp := describe(2, cursor)
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				if rt.ErrorCode != 0 || p.ErrorCode != 0 || p.LeaderID != 1 || p.LeaderEpoch != 0 {
					t.Fatalf("%s-%d: %+v", *rt.Topic, p.Partition, p)
				}
				seen = append(seen, fmt.Sprintf("%s-%d", *rt.Topic, p.Partition))
			}
		}
		if resp.NextCursor == nil {
			break
		}
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if want := []string{"alpha-0", "alpha-1", "dirs-0", "dirs-1", "dirs-2"}; !slices.Equal(seen, want) {
		t.Fatalf("paged DescribeTopicPartitions saw %v, want %v", seen, want)
	}
	named := kmsg.NewPtrDescribeTopicPartitionsRequest()
	named.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "ghost"}}
	if resp := requestDirect(t, cl, named).(*kmsg.DescribeTopicPartitionsResponse); len(resp.Topics) != 1 ||
		resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("unknown topic: %+v", resp.Topics)
	}
}

// A consumer-protocol member whose regex names __consumer_offsets gets its
// partitions; a broad regex leaves it out, as in Kafka 4.
func TestConsumerRegexNamesInternalTopic(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) { c.Group.OffsetsTopicPartitions = 3 })
	_, cl := adminClient(t, tb.b)
	if ct := createTopicRaw(t, cl, "plain", 2, 30*time.Second); ct.ErrorCode != 0 {
		t.Fatalf("create: %v", kerr.ErrorForCode(ct.ErrorCode))
	}
	subscribed := func(group, regex string) []string {
		var resp *kmsg.ConsumerGroupHeartbeatResponse
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
			r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = group, "m-"+group, 0, 5000
			r.SubscribedTopicRegex, r.Topics = &regex, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
			resp = requestDirect(t, cl, r).(*kmsg.ConsumerGroupHeartbeatResponse)
			retry := resp.ErrorCode == kerr.NotCoordinator.Code || resp.ErrorCode == kerr.CoordinatorLoadInProgress.Code ||
				resp.ErrorCode == kerr.CoordinatorNotAvailable.Code
			if !retry || time.Now().After(deadline) {
				break
			}
			fc := kmsg.NewPtrFindCoordinatorRequest() // creates __consumer_offsets
			fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
			requestDirect(t, cl, fc)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("join %s: %v", group, kerr.ErrorForCode(resp.ErrorCode))
		}
		d := kmsg.NewPtrConsumerGroupDescribeRequest()
		d.Groups = []string{group}
		g := requestDirect(t, cl, d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0]
		if g.ErrorCode != 0 || len(g.Members) != 1 {
			t.Fatalf("describe %s: %+v", group, g)
		}
		return g.Members[0].SubscribedTopics
	}
	if got := subscribed("broad", ".*"); !slices.Equal(got, []string{"plain"}) {
		t.Errorf("regex .* subscribed %v, want [plain] (no internal topic)", got)
	}
	if got := subscribed("named", "__consumer_offsets"); !slices.Equal(got, []string{"__consumer_offsets"}) {
		t.Errorf("regex __consumer_offsets subscribed %v, want [__consumer_offsets]", got)
	}
}

// Dynamic broker configs: set cluster-wide or per broker through either
// API, persisted in etcd, applied live by every broker (also one started
// afterwards), and described with Kafka's sources and synonyms.
func TestDynamicBrokerConfigs(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	b1 := startTestBroker(t, endpoints, t.TempDir(), nil)
	_, cl := adminClient(t, b1.b)
	incremental := func(resource string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) int16 {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBroker, resource, ops
		req.Resources = append(req.Resources, r)
		return requestDirect(t, cl, req).(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode
	}
	set := func(name, value string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
		return kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: name, Op: kmsg.IncrementalAlterConfigOpSet, Value: kmsg.StringPtr(value)}
	}
	if code := incremental("", set("max.connections", "50")); code != 0 {
		t.Fatalf("cluster-wide set: %v", kerr.ErrorForCode(code))
	}
	if code := incremental("", set("log.message.format.version", "2.8-IV1")); code != 0 {
		t.Fatalf("log.message.format.version (accepted and ignored): %v", kerr.ErrorForCode(code))
	}
	if code := incremental("", set("log.dirs", "/elsewhere")); code != kerr.InvalidRequest.Code {
		t.Fatalf("set of a static config: %v, want INVALID_REQUEST", kerr.ErrorForCode(code))
	}
	if code := incremental("", set("max.connections", "-3")); code != kerr.InvalidConfig.Code {
		t.Fatalf("negative max.connections: %v, want INVALID_CONFIG", kerr.ErrorForCode(code))
	}
	if got := b1.b.connLimits.Limits().MaxConnections; got != 50 {
		t.Fatalf("broker 1 applies max.connections %d, want 50", got)
	}

	// A broker started afterwards loads it, and takes per-broker values set
	// through the legacy AlterConfigs on another broker.
	b2 := startTestBroker(t, endpoints, t.TempDir(), func(c *Config) { c.NodeID = 2 })
	if got := b2.b.connLimits.Limits().MaxConnections; got != 50 {
		t.Fatalf("broker 2 started with max.connections %d, want 50", got)
	}
	alter := kmsg.NewPtrAlterConfigsRequest()
	ar := kmsg.NewAlterConfigsRequestResource()
	ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	ar.Configs = []kmsg.AlterConfigsRequestResourceConfig{
		{Name: "log.cleaner.backoff.ms", Value: kmsg.StringPtr("1234")},
		{Name: "max.connections.per.ip", Value: kmsg.StringPtr("1")},
	}
	alter.Resources = append(alter.Resources, ar)
	if code := requestDirect(t, cl, alter).(*kmsg.AlterConfigsResponse).Resources[0].ErrorCode; code != 0 {
		t.Fatalf("per-broker AlterConfigs through broker 1: %v", kerr.ErrorForCode(code))
	}
	testkit.WaitFor(t, 20*time.Second, "broker 2 applies its own configs through its watch", func() bool {
		return b2.b.cleaner.Config().Backoff == 1234*time.Millisecond && b2.b.connLimits.Limits().MaxConnectionsPerIP == 1
	})
	if b1.b.cleaner.Config().Backoff == 1234*time.Millisecond || b1.b.connLimits.Limits().MaxConnectionsPerIP != 0 {
		t.Fatal("broker 1 took broker 2's own values")
	}

	// Live: one connection from this host is all broker 2 admits now.
	first, err := net.Dial("tcp", b2.b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	testkit.WaitFor(t, 10*time.Second, "broker 2 counts the first connection", func() bool { return b2.b.connLimits.Stats().Open == 1 })
	second, err := net.Dial("tcp", b2.b.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	_ = second.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := second.Read(make([]byte, 1)); err == nil {
		t.Fatalf("a second connection from one IP was served (%d bytes) with max.connections.per.ip=1", n)
	}

	// Described with sources and synonyms, highest first.
	byName := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range describeConfigsRaw(t, cl, kmsg.ConfigResourceTypeBroker, "1").Configs {
		byName[c.Name] = c
	}
	c := byName["max.connections"]
	if *c.Value != "50" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig || c.ReadOnly || len(c.ConfigSynonyms) != 2 ||
		c.ConfigSynonyms[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
		c.ConfigSynonyms[1].Source != kmsg.ConfigSourceStaticBrokerConfig || *c.ConfigSynonyms[1].Value != "0" {
		t.Fatalf("max.connections on broker 1: %+v", c)
	}
	if c := byName["log.dirs"]; !c.ReadOnly || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Fatalf("log.dirs: %+v", c)
	}
	defaults := describeConfigsRaw(t, cl, kmsg.ConfigResourceTypeBroker, "").Configs
	if len(defaults) != 1 || defaults[0].Name != "max.connections" || defaults[0].Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Fatalf("cluster-wide defaults: %+v", defaults)
	}

	// DELETE falls back to the static value everywhere.
	del := kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "max.connections", Op: kmsg.IncrementalAlterConfigOpDelete}
	if code := incremental("", del); code != 0 {
		t.Fatalf("delete: %v", kerr.ErrorForCode(code))
	}
	testkit.WaitFor(t, 20*time.Second, "broker 2 back to no connection limit", func() bool {
		return b2.b.connLimits.Limits().MaxConnections == 0
	})
}

// UpdateFeatures: the first broker's configured levels bootstrap the
// cluster's finalized ones; UpdateFeatures moves them by Kafka's rules, all
// or nothing, and every broker advertises the result with a larger epoch.
func TestUpdateFeatures(t *testing.T) {
	endpoints := metadatatest.StartEmbedded(t)
	b1 := startTestBroker(t, endpoints, t.TempDir(), nil)
	b2 := startTestBroker(t, endpoints, t.TempDir(), func(c *Config) { c.NodeID, c.TransactionVersion = 2, 1 })
	_, cl1 := adminClient(t, b1.b)
	_, cl2 := adminClient(t, b2.b)
	finalized := func(cl *kgo.Client) (int16, int64) {
		resp := requestDirect(t, cl, kmsg.NewPtrApiVersionsRequest()).(*kmsg.ApiVersionsResponse)
		for _, f := range resp.FinalizedFeatures {
			if f.Name == "transaction.version" {
				return f.MaxVersionLevel, resp.FinalizedFeaturesEpoch
			}
		}
		return 0, resp.FinalizedFeaturesEpoch
	}
	level, epoch := finalized(cl2)
	if level != 2 || epoch <= 0 {
		t.Fatalf("broker 2 (configured 1) advertises transaction.version %d at epoch %d, want the cluster's 2 at an epoch > 0", level, epoch)
	}
	update := func(version int16, validateOnly bool, u kmsg.UpdateFeaturesRequestFeatureUpdate) *kmsg.UpdateFeaturesResponse {
		req := kmsg.NewPtrUpdateFeaturesRequest()
		req.ValidateOnly = validateOnly
		req.FeatureUpdates = append(req.FeatureUpdates, u)
		pinned := kversion.Stable()
		pinned.SetMaxKeyVersion(req.Key(), version)
		cl, err := kgo.NewClient(kgo.SeedBrokers(b1.b.Addr().String()), kgo.MaxVersions(pinned))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return requestDirect(t, cl, req).(*kmsg.UpdateFeaturesResponse)
	}
	tv := func(level int16, typ int8) kmsg.UpdateFeaturesRequestFeatureUpdate {
		return kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "transaction.version", MaxVersionLevel: level, UpgradeType: typ}
	}

	if r := update(1, false, tv(1, 1)); r.ErrorCode != kerr.InvalidUpdateVersion.Code || r.ErrorMessage == nil {
		t.Fatalf("downgrade typed as an upgrade: %v %v, want INVALID_UPDATE_VERSION with a reason", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if r := update(1, true, tv(1, 2)); r.ErrorCode != 0 {
		t.Fatalf("validate-only safe downgrade: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if level, _ := finalized(cl1); level != 2 {
		t.Fatalf("validate-only changed the level to %d", level)
	}
	r := update(1, false, tv(1, 2))
	if r.ErrorCode != 0 || len(r.Results) != 1 || r.Results[0].Feature != "transaction.version" || r.Results[0].ErrorCode != 0 {
		t.Fatalf("v1 safe downgrade: %v %+v, want success with the feature listed", kerr.ErrorForCode(r.ErrorCode), r.Results)
	}
	if level, e := finalized(cl1); level != 1 || e <= epoch {
		t.Fatalf("after the downgrade broker 1 advertises %d at epoch %d, want 1 at an epoch > %d", level, e, epoch)
	}
	testkit.WaitFor(t, 20*time.Second, "broker 2 advertises the downgrade", func() bool { l, _ := finalized(cl2); return l == 1 })

	r = update(2, false, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "no.such.feature", MaxVersionLevel: 1, UpgradeType: 1})
	if r.ErrorCode != kerr.InvalidUpdateVersion.Code || len(r.Results) != 0 {
		t.Fatalf("v2 unknown feature: %v %+v, want a top-level INVALID_UPDATE_VERSION only", kerr.ErrorForCode(r.ErrorCode), r.Results)
	}
	if r := update(2, false, tv(3, 1)); r.ErrorCode != kerr.InvalidUpdateVersion.Code {
		t.Fatalf("level above the supported range: %v, want INVALID_UPDATE_VERSION", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := update(0, false, kmsg.UpdateFeaturesRequestFeatureUpdate{Feature: "transaction.version", AllowDowngrade: true}); r.ErrorCode != 0 {
		t.Fatalf("v0 downgrade to 0 with AllowDowngrade: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if level, _ := finalized(cl1); level != 0 {
		t.Fatalf("transaction.version at level 0 is still advertised as finalized (%d)", level)
	}
	if r := update(2, false, tv(2, 1)); r.ErrorCode != 0 {
		t.Fatalf("upgrade back to 2: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	testkit.WaitFor(t, 20*time.Second, "broker 2 advertises the upgrade", func() bool { l, _ := finalized(cl2); return l == 2 })

	// A restarted cluster keeps the finalized level, not a broker's flag.
	b3 := startTestBroker(t, endpoints, t.TempDir(), func(c *Config) { c.NodeID, c.TransactionVersion = 3, 1 })
	_, cl3 := adminClient(t, b3.b)
	if level, _ := finalized(cl3); level != 2 {
		t.Fatalf("a broker started later with --transaction-version 1 advertises %d, want the finalized 2", level)
	}
}
