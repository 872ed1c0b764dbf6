package broker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/broker/datadir"
	"github.com/strata-log/strata/diskless"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/metadata/metadatatest"
	"github.com/strata-log/strata/tier/objstore"
)

func TestClientRack(t *testing.T) {
	cases := map[string]string{
		"":                                  "",
		"app":                               "",
		"diskless_az=eu-west-1a":            "eu-west-1a",
		"app-1,diskless_az=use1-az2":        "use1-az2",
		"app; diskless_az = use1-az2 ;x=y":  "use1-az2",
		"not_diskless_az=a,diskless_az=b":   "b",
		"diskless_az":                       "",
		"other=1,diskless_az=,diskless_az=": "",
	}
	for clientID, want := range cases {
		if got := clientRack(clientID); got != want {
			t.Errorf("clientRack(%q) = %q, want %q", clientID, got, want)
		}
	}
}

// TestDisklessMetadataPartitions: every partition's leader is
// diskless.Leader over the live brokers and the client's rack, shown as
// the only replica and ISR member, at leader epoch 0.
func TestDisklessMetadataPartitions(t *testing.T) {
	topic := metadata.Topic{Name: "dl", ID: metadata.TopicID{7}, Replicas: metadata.DisklessAssignment(50),
		Configs: map[string]string{"diskless.enable": "true"}}
	tv := topicView{topic: topic, cfg: metadata.TopicConfig{DisklessEnable: true}}
	view := brokerView{list: []metadata.BrokerInfo{{NodeID: 1, Rack: "a"}, {NodeID: 2, Rack: "b"}, {NodeID: 3, Rack: "b"}}}
	for _, rack := range []string{"", "a", "b"} {
		parts := disklessMetadataPartitions(tv, view, rack)
		if len(parts) != 50 {
			t.Fatalf("%d partitions", len(parts))
		}
		for i, mp := range parts {
			want := diskless.Leader(topic.ID, int32(i), view.list, rack)
			if mp.Partition != int32(i) || mp.Leader != want || mp.LeaderEpoch != 0 || mp.ErrorCode != 0 ||
				!slices.Equal(mp.Replicas, []int32{want}) || !slices.Equal(mp.ISR, []int32{want}) ||
				mp.OfflineReplicas == nil || len(mp.OfflineReplicas) != 0 {
				t.Fatalf("rack %q partition %d: %+v, want leader %d", rack, i, mp, want)
			}
			if rack == "a" && mp.Leader != 1 {
				t.Fatalf("client in rack a led by %d", mp.Leader)
			}
		}
	}
	for _, mp := range disklessMetadataPartitions(tv, brokerView{}, "") {
		if mp.Leader != -1 || mp.ErrorCode != kerr.LeaderNotAvailable.Code || len(mp.Replicas) != 0 || mp.Replicas == nil {
			t.Fatalf("no live broker: %+v", mp)
		}
	}
}

func TestDisklessTxnRefused(t *testing.T) {
	dl, classic := metadata.TopicConfig{DisklessEnable: true}, metadata.TopicConfig{}
	if code, msg := disklessTxnRefused(dl, true); code != kerr.UnsupportedForMessageFormat.Code || msg != disklessTxnMessage {
		t.Fatalf("transactional batch to a diskless topic: %d %q", code, msg)
	}
	for _, c := range []struct {
		cfg           metadata.TopicConfig
		transactional bool
	}{{dl, false}, {classic, true}, {classic, false}} {
		if code, msg := disklessTxnRefused(c.cfg, c.transactional); code != 0 || msg != "" {
			t.Fatalf("%+v: %d %q, want accepted", c, code, msg)
		}
	}
}

func TestDisklessReplicas(t *testing.T) {
	spec := topicSpec{name: "dl", partitions: 3, replicationFactor: 3}
	if got, code, _ := disklessReplicas(spec, true); code != 0 || len(got) != 3 || len(got[0]) != 0 {
		t.Fatalf("replicas %v code %d", got, code)
	}
	cases := []struct {
		name string
		edit func(*topicSpec)
		want int16
	}{
		{"manual assignment", func(s *topicSpec) { s.assignment = [][]int32{{1}} }, kerr.InvalidReplicaAssignment.Code},
		{"no partitions", func(s *topicSpec) { s.partitions = 0 }, kerr.InvalidPartitions.Code},
		{"too many partitions", func(s *topicSpec) { s.partitions = maxPartitions + 1 }, kerr.InvalidPartitions.Code},
		{"replication factor 0", func(s *topicSpec) { s.replicationFactor = 0 }, kerr.InvalidReplicationFactor.Code},
	}
	for _, c := range cases {
		s := spec
		c.edit(&s)
		if _, code, msg := disklessReplicas(s, true); code != c.want || msg == "" {
			t.Errorf("%s: code %d %q, want %d", c.name, code, msg, c.want)
		}
	}
	if _, code, _ := disklessReplicas(spec, false); code != kerr.InvalidConfig.Code {
		t.Fatalf("no bucket: code %d, want INVALID_CONFIG", code)
	}
}

var disklessConfig = map[string]*string{"diskless.enable": kmsg.StringPtr("true")}

// startDisklessBroker is a broker with a bucket (diskless topics need one)
// and a diskless topic "dl" of 3 partitions beside a classic "classic".
func startDisklessBroker(t *testing.T) (*testBroker, *kadm.Client, *kgo.Client) {
	t.Helper()
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), func(c *Config) {
		c.ObjectStore = objstore.NewMemStore()
	})
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	resp, err := adm.CreateTopic(ctx, 3, 3, disklessConfig, "dl")
	if err != nil || resp.Err != nil {
		t.Fatalf("create dl: %v %v", err, resp.Err)
	}
	if resp.NumPartitions != 3 || resp.ReplicationFactor != 1 {
		t.Fatalf("create dl: %+v", resp)
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, nil, "classic"); err != nil || resp.Err != nil {
		t.Fatalf("create classic: %v %v", err, resp.Err)
	}
	return tb, adm, cl
}

// TestDisklessTopicCreation: creation checks the diskless rules; the
// registry knows the topic but opens nothing for it.
func TestDisklessTopicCreation(t *testing.T) {
	tb, adm, cl := startDisklessBroker(t)
	ctx := testCtx(t)

	topic, cfg, ok := tb.b.parts.disklessTopic("dl")
	if !ok || !cfg.DisklessEnable || len(topic.Replicas) != 3 || topic.Name != "dl" {
		t.Fatalf("disklessTopic: %+v %+v %v", topic, cfg, ok)
	}
	if byID, _, ok := tb.b.parts.disklessTopicByID(topic.ID); !ok || byID.Name != "dl" {
		t.Fatalf("disklessTopicByID: %+v %v", byID, ok)
	}
	if _, _, ok := tb.b.parts.disklessTopic("classic"); ok {
		t.Fatal("a classic topic found as diskless")
	}
	if _, _, ok := tb.b.parts.disklessTopic("nope"); ok {
		t.Fatal("an unknown topic found as diskless")
	}
	for _, p := range tb.b.parts.localPartitions() {
		if p.topic == "dl" {
			t.Fatalf("diskless partition %d opened locally", p.index)
		}
	}
	if _, code := tb.b.parts.lookup("dl", 0); code != kerr.NotLeaderForPartition.Code {
		t.Fatalf("lookup of a diskless partition: code %d", code)
	}
	for p := 0; p < 3; p++ {
		if _, err := os.Stat(filepath.Join(tb.b.cfg.DataDir, fmt.Sprintf("dl-%d", p))); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("partition dir dl-%d: %v, want none", p, err)
		}
	}
	if c := configOf(t, adm, "dl", "diskless.enable"); *c.Value != "true" || c.Source != kmsg.ConfigSourceDynamicTopicConfig {
		t.Fatalf("described diskless.enable of dl: %+v", c)
	}
	if c := configOf(t, adm, "classic", "diskless.enable"); *c.Value != "false" || c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Fatalf("described diskless.enable of classic: %+v", c)
	}

	bad := []struct {
		name    string
		configs map[string]*string
		want    *kerr.Error
	}{
		{"no-remote", map[string]*string{"diskless.enable": kmsg.StringPtr("true"), "remote.storage.enable": kmsg.StringPtr("false")}, kerr.InvalidConfig},
		{"not-bool", map[string]*string{"diskless.enable": kmsg.StringPtr("yes")}, kerr.InvalidConfig},
	}
	for _, c := range bad {
		resp, err := adm.CreateTopic(ctx, 1, 1, c.configs, c.name)
		expectCreateErr(t, resp, err, c.want)
	}

	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "dl-manual", -1, -1
	rt.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{1}}}
	rt.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "diskless.enable", Value: kmsg.StringPtr("true")}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{rt}
	if code := requestDirect(t, cl, req).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != kerr.InvalidReplicaAssignment.Code {
		t.Fatalf("manual assignment: %v", kerr.ErrorForCode(code))
	}

	cp, err := adm.CreatePartitions(ctx, 2, "dl")
	if err != nil || cp["dl"].Err != nil {
		t.Fatalf("adding partitions: %v %+v", err, cp)
	}
	if topic, _, _ := tb.b.parts.disklessTopic("dl"); len(topic.Replicas) != 5 {
		t.Fatalf("%d partitions after adding 2", len(topic.Replicas))
	}
}

// TestDisklessTopicNoBucket: a broker without an object store refuses
// diskless topics.
func TestDisklessTopicNoBucket(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), nil)
	adm, _ := adminClient(t, tb.b)
	resp, err := adm.CreateTopic(testCtx(t), 1, 1, disklessConfig, "dl")
	expectCreateErr(t, resp, err, kerr.InvalidConfig)
	if !strings.Contains(resp.ErrMessage, "needs a bucket") {
		t.Fatalf("message %q", resp.ErrMessage)
	}
}

// TestDisklessMetadata: Metadata and DescribeTopicPartitions show each
// diskless partition led by the broker diskless.Leader picks (the only
// one here), as its only replica and ISR member, at epoch 0.
func TestDisklessMetadata(t *testing.T) {
	tb, adm, cl := startDisklessBroker(t)
	topics, err := adm.ListTopics(testCtx(t), "dl")
	if err != nil {
		t.Fatal(err)
	}
	dl := topics["dl"]
	if dl.Err != nil || len(dl.Partitions) != 3 {
		t.Fatalf("dl: %+v", dl)
	}
	for _, p := range dl.Partitions {
		if p.Err != nil || p.Leader != 1 || p.LeaderEpoch != 0 || !slices.Equal(p.Replicas, []int32{1}) ||
			!slices.Equal(p.ISR, []int32{1}) || len(p.OfflineReplicas) != 0 {
			t.Fatalf("partition %+v", p)
		}
	}

	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.Topics = []kmsg.DescribeTopicPartitionsRequestTopic{{Topic: "dl"}}
	resp := requestDirect(t, cl, req).(*kmsg.DescribeTopicPartitionsResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("DescribeTopicPartitions: %+v", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 || p.LeaderID != tb.b.cfg.NodeID || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
			t.Fatalf("DescribeTopicPartitions partition %+v", p)
		}
	}
}

// TestDisklessAlterConfigsRefused: diskless.enable cannot be set, changed,
// deleted or dropped after creation, by either API, validating only or
// not; nothing changes. Other configs of a diskless topic alter as usual.
func TestDisklessAlterConfigsRefused(t *testing.T) {
	tb, adm, _ := startDisklessBroker(t)
	ctx := testCtx(t)
	wantRefused := func(what string, resps kadm.AlterConfigsResponses, err error) {
		t.Helper()
		if err != nil || len(resps) != 1 || !errors.Is(resps[0].Err, kerr.InvalidConfig) ||
			!strings.Contains(resps[0].ErrMessage, "diskless.enable cannot be changed after the topic is created") {
			t.Fatalf("%s: %v %+v, want INVALID_CONFIG for diskless.enable", what, err, resps)
		}
	}
	before, _, _ := tb.b.parts.disklessTopic("dl")

	set := func(v string) []kadm.AlterConfig {
		return []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "diskless.enable", Value: kmsg.StringPtr(v)}}
	}
	resps, err := adm.AlterTopicConfigs(ctx, set("false"), "dl")
	wantRefused("SET false", resps, err)
	resps, err = adm.ValidateAlterTopicConfigs(ctx, set("false"), "dl")
	wantRefused("SET false, validate only", resps, err)
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: "diskless.enable"}}, "dl")
	wantRefused("DELETE", resps, err)
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}, "dl")
	wantRefused("full replace without it", resps, err)
	resps, err = adm.ValidateAlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("60000")}}, "dl")
	wantRefused("full replace without it, validate only", resps, err)
	resps, err = adm.AlterTopicConfigs(ctx, set("true"), "classic")
	wantRefused("SET true on a classic topic", resps, err)
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "diskless.enable", Value: kmsg.StringPtr("true")}}, "classic")
	wantRefused("full replace making a classic topic diskless", resps, err)

	after, _, ok := tb.b.parts.disklessTopic("dl")
	if !ok || after.Revision != before.Revision {
		t.Fatalf("refused alterations changed the topic: revision %d → %d", before.Revision, after.Revision)
	}
	if c := configOf(t, adm, "classic", "diskless.enable"); *c.Value != "false" {
		t.Fatalf("classic diskless.enable %q", *c.Value)
	}

	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: kmsg.StringPtr("false")}}, "dl")
	if err != nil || !errors.Is(resps[0].Err, kerr.InvalidConfig) || !strings.Contains(resps[0].ErrMessage, "remote.storage.enable") {
		t.Fatalf("remote storage off on a diskless topic: %v %+v", err, resps)
	}
	resps, err = adm.AlterTopicConfigs(ctx, append(set("true"),
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kmsg.StringPtr("60000")}), "dl")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("other configs of a diskless topic: %v %+v", err, resps)
	}
	resps, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{
		{Name: "diskless.enable", Value: kmsg.StringPtr("true")}, {Name: "retention.ms", Value: kmsg.StringPtr("120000")},
	}, "dl")
	if err != nil || resps[0].Err != nil {
		t.Fatalf("full replace keeping diskless.enable: %v %+v", err, resps)
	}
	if _, cfg, ok := tb.b.parts.disklessTopic("dl"); !ok || cfg.RetentionMs != 120000 {
		t.Fatalf("after altering: %+v %v", cfg, ok)
	}
}

// TestDisklessReplicaAdminRefused: ElectLeaders has nothing to elect and
// AlterPartitionReassignments nothing to move for a diskless partition.
func TestDisklessReplicaAdminRefused(t *testing.T) {
	_, _, cl := startDisklessBroker(t)
	elect := kmsg.NewPtrElectLeadersRequest()
	elect.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "dl", Partitions: []int32{0, 2}}}
	eresp := requestDirect(t, cl, elect).(*kmsg.ElectLeadersResponse)
	if len(eresp.Topics) != 1 || len(eresp.Topics[0].Partitions) != 2 {
		t.Fatalf("ElectLeaders: %+v", eresp)
	}
	for _, p := range eresp.Topics[0].Partitions {
		if p.ErrorCode != kerr.ElectionNotNeeded.Code {
			t.Fatalf("ElectLeaders dl-%d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	elect.Topics = nil // every partition: diskless ones need none, so are left out
	for _, rt := range requestDirect(t, cl, elect).(*kmsg.ElectLeadersResponse).Topics {
		if rt.Topic == "dl" {
			t.Fatalf("ElectLeaders of every partition lists dl: %+v", rt)
		}
	}

	move := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	move.TimeoutMillis = 30000
	mt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	mt.Topic = "dl"
	mt.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 1, Replicas: []int32{1}}}
	move.Topics = []kmsg.AlterPartitionAssignmentsRequestTopic{mt}
	mresp := requestDirect(t, cl, move).(*kmsg.AlterPartitionAssignmentsResponse)
	p := mresp.Topics[0].Partitions[0]
	if p.ErrorCode != kerr.InvalidReplicaAssignment.Code || p.ErrorMessage == nil || *p.ErrorMessage != "diskless partitions have no replicas to move" {
		t.Fatalf("reassigning dl-1: %v %v", kerr.ErrorForCode(p.ErrorCode), p.ErrorMessage)
	}
}

// TestDisklessAddPartitionsToTxnRefused: a transaction may not add a
// diskless partition, in the clients' form (v3) or the brokers' (v4+);
// the request's other partitions are not attempted.
func TestDisklessAddPartitionsToTxnRefused(t *testing.T) {
	tb, _, cl := startDisklessBroker(t)
	codesOf := func(topics []kmsg.AddPartitionsToTxnResponseTransactionTopic) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range topics {
			for _, p := range rt.Partitions {
				out[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.ErrorCode
			}
		}
		return out
	}
	want := map[string]int16{
		"dl-0":      kerr.UnsupportedForMessageFormat.Code,
		"dl-2":      kerr.UnsupportedForMessageFormat.Code,
		"dl-9":      kerr.UnknownTopicOrPartition.Code,
		"classic-0": kerr.OperationNotAttempted.Code,
	}
	topics := []kmsg.AddPartitionsToTxnRequestTransactionTopic{
		{Topic: "dl", Partitions: []int32{0, 2, 9}}, {Topic: "classic", Partitions: []int32{0}},
	}

	v3 := kmsg.NewPtrAddPartitionsToTxnRequest()
	v3.TransactionalID, v3.ProducerID, v3.ProducerEpoch = "tx", 1000, 0
	for _, rt := range topics {
		v3.Topics = append(v3.Topics, kmsg.AddPartitionsToTxnRequestTopic{Topic: rt.Topic, Partitions: rt.Partitions})
	}
	pinned := kversion.Stable()
	pinned.SetMaxKeyVersion(int16(kmsg.AddPartitionsToTxn), 3)
	cl3, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.MaxVersions(pinned))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl3.Close)
	resp3 := requestDirect(t, cl3, v3).(*kmsg.AddPartitionsToTxnResponse)
	got3 := map[string]int16{}
	for _, rt := range resp3.Topics {
		for _, p := range rt.Partitions {
			got3[fmt.Sprintf("%s-%d", rt.Topic, p.Partition)] = p.ErrorCode
		}
	}
	if !maps.Equal(got3, want) {
		t.Fatalf("v3 codes %v, want %v", got3, want)
	}

	v4 := kmsg.NewPtrAddPartitionsToTxnRequest() // negotiated: v4 or later
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.Topics = "tx", 1000, 0, topics
	v4.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	resp4 := requestDirect(t, cl, v4).(*kmsg.AddPartitionsToTxnResponse)
	if resp4.ErrorCode != 0 || len(resp4.Transactions) != 1 {
		t.Fatalf("v4: %+v", resp4)
	}
	if got := codesOf(resp4.Transactions[0].Topics); !maps.Equal(got, want) {
		t.Fatalf("v4 codes %v, want %v", got, want)
	}
}

// TestRegistryKnowsDisklessTopics: the registry mirrors a diskless topic
// (lookups by name and id, partition count, configs, a stray directory of
// its name removed at load) and opens nothing for it, also when its
// configs do not parse (it stays diskless: its record has no replicas).
func TestRegistryKnowsDisklessTopics(t *testing.T) {
	f := newTestRegistry(t)
	dl := testTopic("dl", 1, 5, metadata.DisklessAssignment(3)...)
	if err := datadir.Claim(filepath.Join(f.dir, "dl-0"), dl.ID); err != nil { // as if it was classic once
		t.Fatal(err)
	}
	dl.Configs = map[string]string{"diskless.enable": "true", "retention.ms": "60000"}
	if err := f.m.load(metadata.Snapshot{Topics: []metadata.Topic{dl}}); err != nil {
		t.Fatal(err)
	}
	if got := f.hosted("dl"); len(got) != 0 || f.dirExists("dl-0") || len(f.m.localPartitions()) != 0 {
		t.Fatalf("diskless partitions opened %v (stray dir left: %v)", got, f.dirExists("dl-0"))
	}
	if got := f.replicas.applied(); len(got) != 0 {
		t.Fatalf("replica states applied to a diskless topic: %v", got)
	}
	topic, cfg, ok := f.m.disklessTopic("dl")
	if !ok || topic.ID != dl.ID || len(topic.Replicas) != 3 || cfg.RetentionMs != 60000 || !cfg.DisklessEnable {
		t.Fatalf("disklessTopic: %+v %+v %v", topic, cfg, ok)
	}
	if _, _, ok := f.m.disklessTopicByID(dl.ID); !ok {
		t.Fatal("disklessTopicByID found nothing")
	}
	if tv, ok := f.m.topic("dl"); !ok || len(tv.states) != 3 {
		t.Fatalf("topic view %+v: want one (leaderless) state per partition", tv)
	}
	if !f.m.leadersElected(dl.ID, 0, brokerView{}) {
		t.Fatal("a diskless topic waits for leader elections")
	}

	odd := testTopic("odd", 2, 6, metadata.DisklessAssignment(1)...)
	odd.Configs = map[string]string{"diskless.enable": "true", "retention.ms": "soon"}
	if err := f.m.applyTopic(odd, nil); err != nil {
		t.Fatal(err)
	}
	if _, cfg, ok := f.m.disklessTopic("odd"); !ok || !cfg.DisklessEnable {
		t.Fatal("a diskless topic with unparsable configs was taken for a classic one")
	}
}
