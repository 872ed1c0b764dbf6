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
	"github.com/twmb/franz-go/pkg/kversion"

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

	// Cooperative rebalancing may still be finishing its second round.
	var described kadm.DescribedGroups
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		described, err = adm.DescribeGroups(ctx, "g1")
		if err == nil && described["g1"].State == "Stable" {
			break
		}
	}
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
	byKey := map[string]kmsg.FindCoordinatorResponseCoordinator{}
	for _, c := range resp.Coordinators { // kgo may reorder keys
		byKey[c.Key] = c
	}
	if byKey["a"].ErrorCode != 0 || byKey["a"].NodeID != 1 || byKey["b"].NodeID != 1 || byKey[""].ErrorCode != kerr.InvalidGroupID.Code {
		t.Fatalf("v4+ answers: %+v", resp.Coordinators)
	}
	txn := kmsg.NewPtrFindCoordinatorRequest()
	txn.CoordinatorType, txn.CoordinatorKeys = 1, []string{"tx"}
	resp, err = txn.RequestWith(ctx, cl)
	if err != nil || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[0].NodeID != 1 {
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

// TestGroupProtocolOldVersions drives the classic protocol by hand at old
// versions: JoinGroup v3 (no MEMBER_ID_REQUIRED), v4 (KIP-394), SyncGroup,
// Heartbeat, DescribeGroups, ListGroups with a state filter, LeaveGroup v1.
func TestGroupProtocolOldVersions(t *testing.T) {
	tb := startTestBroker(t, metadatatest.StartEmbedded(t), t.TempDir(), fastGroups)
	_, modern := adminClient(t, tb.b)
	// Kafka 2.0's versions: JoinGroup v3, SyncGroup v2, Heartbeat v2,
	// LeaveGroup v2, DescribeGroups v2.
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.MaxVersions(kversion.V2_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	ctx := testCtx(t)
	// Wait for the coordinator (creates and loads __consumer_offsets).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := kadm.NewClient(cl).FetchOffsets(ctx, "old"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 3, "old", 6000, 6000
	join.ProtocolType = "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1, 2, 3}}}
	jr, err := join.RequestWith(ctx, cl)
	if err != nil || jr.Version != 3 || jr.ErrorCode != 0 || jr.Generation != 1 || jr.LeaderID != jr.MemberID || len(jr.Members) != 1 ||
		string(jr.Members[0].ProtocolMetadata) != "\x01\x02\x03" || jr.Protocol == nil || *jr.Protocol != "range" {
		t.Fatalf("join v3: %v %+v", err, jr)
	}
	member := jr.MemberID
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Version, sync.Group, sync.Generation, sync.MemberID = 2, "old", 1, member
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: member, MemberAssignment: []byte("mine")}}
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil || sr.ErrorCode != 0 || string(sr.MemberAssignment) != "mine" {
		t.Fatalf("sync v2: %v %+v", err, sr)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group, hb.Generation, hb.MemberID = 1, "old", 1, member
	if hr, err := hb.RequestWith(ctx, cl); err != nil || hr.ErrorCode != 0 {
		t.Fatalf("heartbeat: %v %+v", err, hr)
	}
	hb.Generation = 5
	if hr, err := hb.RequestWith(ctx, cl); err != nil || hr.ErrorCode != kerr.IllegalGeneration.Code {
		t.Fatalf("heartbeat with a stale generation: %v %+v", err, hr)
	}
	desc := kmsg.NewPtrDescribeGroupsRequest()
	desc.Version, desc.Groups = 1, []string{"old", "never"}
	dr, err := desc.RequestWith(ctx, cl)
	if err != nil || len(dr.Groups) != 2 || dr.Groups[0].State != "Stable" || string(dr.Groups[0].Members[0].MemberAssignment) != "mine" ||
		dr.Groups[1].State != "Dead" {
		t.Fatalf("describe: %v %+v", err, dr)
	}
	list := kmsg.NewPtrListGroupsRequest()
	list.Version, list.StatesFilter = 4, []string{"Stable"}
	if lr, err := list.RequestWith(ctx, modern); err != nil || len(lr.Groups) != 1 || lr.Groups[0].GroupState != "Stable" {
		t.Fatalf("list Stable: %v %+v", err, lr)
	}
	list.StatesFilter = []string{"Empty"}
	if lr, err := list.RequestWith(ctx, modern); err != nil || len(lr.Groups) != 0 {
		t.Fatalf("list Empty: %v %+v", err, lr)
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version, leave.Group, leave.MemberID = 1, "old", member
	if lr, err := leave.RequestWith(ctx, cl); err != nil || lr.ErrorCode != 0 {
		t.Fatalf("leave v1: %v %+v", err, lr)
	}
	if lr, err := leave.RequestWith(ctx, cl); err != nil || lr.ErrorCode != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave: %v %+v", err, lr)
	}
	join.Version = 4
	if jr, err := join.RequestWith(ctx, modern); err != nil || jr.ErrorCode != kerr.MemberIDRequired.Code || jr.MemberID == "" {
		t.Fatalf("join v4: %v %+v", err, jr)
	}
}
