package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// fastGroups keeps group tests quick: few offsets partitions, no initial
// rebalance delay.
func fastGroups(c *Config) {
	c.Group = group.Config{OffsetsTopicPartitions: 4, InitialRebalanceDelay: -1, TickInterval: 20 * time.Millisecond}
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
}

// consumeGroup runs a group consumer until it has read want records in
// total with the others sharing seen, then commits.
func groupConsumer(t *testing.T, addr, groupID, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func TestGroupConsumeCommitRestart(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastGroups)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "events"); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "events", 200)

	addr := tb.b.Addr().String()
	consumers := []*kgo.Client{groupConsumer(t, addr, "g1", "events"), groupConsumer(t, addr, "g1", "events")}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Add(1)
		go func(c *kgo.Client) {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				done := len(seen) == 200
				mu.Unlock()
				if done {
					return
				}
				pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				fs := c.PollFetches(pctx)
				cancel()
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)] = true
					mu.Unlock()
				})
				if err := c.CommitUncommittedOffsets(ctx); err != nil && !errors.Is(err, kerr.RebalanceInProgress) {
					t.Errorf("commit: %v", err)
				}
			}
		}(c)
	}
	wg.Wait()
	if len(seen) != 200 {
		t.Fatalf("read %d distinct records, want 200", len(seen))
	}

	described, err := adm.DescribeGroups(ctx, "g1")
	if err != nil || described["g1"].State != "Stable" || len(described["g1"].Members) != 2 {
		t.Fatalf("describe: %v %+v", err, described["g1"])
	}
	if resp, err := adm.DeleteGroups(ctx, "g1"); err != nil || !errors.Is(resp["g1"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of a live group: %v %+v", err, resp)
	}
	// Wait until the commits of both consumers cover everything.
	var total int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		offsets, err := adm.FetchOffsets(ctx, "g1")
		if err != nil {
			t.Fatal(err)
		}
		total = 0
		offsets.Each(func(o kadm.OffsetResponse) { total += o.At })
		if total == 200 {
			break
		}
	}
	if total != 200 {
		t.Fatalf("committed offsets sum to %d, want 200", total)
	}
	for _, c := range consumers {
		c.Close() // leaves the group
	}

	tb.stop(t)
	again := startTestBroker(t, endpoints, dir, fastGroups)
	adm2, _ := adminClient(t, again.b)
	var after kadm.OffsetResponses
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if after, err = adm2.FetchOffsets(ctx, "g1"); err == nil {
			break
		}
	}
	total = 0
	after.Each(func(o kadm.OffsetResponse) { total += o.At })
	if err != nil || total != 200 {
		t.Fatalf("after restart: offsets sum %d, err %v", total, err)
	}
	listed, err := adm2.ListGroups(ctx)
	if err != nil || listed["g1"].State != "Empty" {
		t.Fatalf("list after restart: %v %+v", err, listed)
	}
	if resp, err := adm2.DeleteGroups(ctx, "g1"); err != nil || resp["g1"].Err != nil {
		t.Fatalf("delete: %v %+v", err, resp)
	}
	if listed, _ := adm2.ListGroups(ctx); len(listed) != 0 {
		t.Fatalf("groups after delete: %+v", listed)
	}
}

func TestFindCoordinatorForms(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastGroups)
	_, cl := adminClient(t, tb.b)
	ctx := testCtx(t)

	old := kmsg.NewPtrFindCoordinatorRequest()
	old.Version, old.CoordinatorKey = 3, "some-group"
	resp, err := old.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 || resp.NodeID != 1 || resp.Port <= 0 {
		t.Fatalf("v3: %v %+v", err, resp)
	}
	batched := kmsg.NewPtrFindCoordinatorRequest()
	batched.CoordinatorKeys = []string{"a", "b", ""}
	resp, err = batched.RequestWith(ctx, cl)
	if err != nil || len(resp.Coordinators) != 3 {
		t.Fatalf("v4+: %v %+v", err, resp)
	}
	if c := resp.Coordinators; c[0].ErrorCode != 0 || c[0].Key != "a" || c[1].NodeID != 1 || c[2].ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("v4+ answers: %+v", c)
	}
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType, txn.CoordinatorKeys = 1, []string{"tx"}
	resp, err = txn.RequestWith(ctx, cl)
	if err != nil || resp.Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code || resp.Coordinators[0].ErrorMessage == nil {
		t.Fatalf("transaction key: %v %+v", err, resp)
	}
	// The offsets topic now exists, compacted and internal.
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(group.OffsetsTopic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 || !mresp.Topics[0].IsInternal || len(mresp.Topics[0].Partitions) != 4 {
		t.Fatalf("offsets topic metadata: %v %+v", err, mresp)
	}
	adm := kadm.NewClient(cl)
	if c := configOf(t, adm, group.OffsetsTopic, "cleanup.policy"); c.Value == nil || *c.Value != "compact" {
		t.Fatalf("offsets topic cleanup.policy: %+v", c)
	}
}

func TestSimpleCommitFetchAndOffsetDelete(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastGroups)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	// Find the coordinator first so the offsets topic exists and is loaded.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := adm.FetchOffsets(ctx, "simple")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "simple", -1
	for _, topic := range []string{"t", "missing"} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for p := int32(0); p < 2; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, int64(10+p), 0, kmsg.StringPtr("m")
			rt.Partitions = append(rt.Partitions, rp)
		}
		commit.Topics = append(commit.Topics, rt)
	}
	cresp, err := commit.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range cresp.Topics {
		for _, rp := range rt.Partitions {
			want := int16(0)
			if rt.Topic == "missing" {
				want = kerr.UnknownTopicOrPartition.Code
			}
			if rp.ErrorCode != want {
				t.Fatalf("commit %s/%d: code %d, want %d", rt.Topic, rp.Partition, rp.ErrorCode, want)
			}
		}
	}

	// v8+ multi-group fetch: one known group (all offsets), one unknown.
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	g1 := kmsg.NewOffsetFetchRequestGroup()
	g1.Group = "simple"
	g2 := kmsg.NewOffsetFetchRequestGroup()
	g2.Group = "nobody"
	g2.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{g1, g2}
	fresp, err := fetch.RequestWith(ctx, cl)
	if err != nil || len(fresp.Groups) != 2 {
		t.Fatalf("fetch v8: %v %+v", err, fresp)
	}
	if g := fresp.Groups[0]; len(g.Topics) != 1 || len(g.Topics[0].Partitions) != 2 || g.Topics[0].Partitions[1].Offset != 11 || *g.Topics[0].Partitions[1].Metadata != "m" {
		t.Fatalf("fetch simple: %+v", g)
	}
	if g := fresp.Groups[1]; g.ErrorCode != 0 || g.Topics[0].Partitions[0].Offset != -1 {
		t.Fatalf("fetch unknown group: %+v", g)
	}

	// v1 (single group, explicit partitions).
	v1 := kmsg.NewPtrOffsetFetchRequest()
	v1.Version, v1.Group = 1, "simple"
	v1.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	v1resp, err := v1.RequestWith(ctx, cl)
	if err != nil || v1resp.Topics[0].Partitions[0].Offset != 10 {
		t.Fatalf("fetch v1: %v %+v", err, v1resp)
	}

	del, err := adm.DeleteOffsets(ctx, "simple", kadm.TopicsSet{"t": {0: {}}})
	if err != nil || del.Error() != nil {
		t.Fatalf("offset delete: %v %v", err, del.Error())
	}
	offsets, err := adm.FetchOffsets(ctx, "simple")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := offsets.Lookup("t", 0); ok {
		t.Fatalf("offset of t/0 still there: %+v", offsets)
	}
	if o, ok := offsets.Lookup("t", 1); !ok || o.At != 11 {
		t.Fatalf("offset of t/1: %+v", o)
	}
	// Offsets of a deleted topic go.
	if _, err := adm.DeleteTopics(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		offsets, err = adm.FetchOffsets(ctx, "simple")
		if err == nil && len(offsets) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets of a deleted topic stay: %v %+v", err, offsets)
		}
	}
}
