package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/strata-log/strata/broker/group"
	"github.com/strata-log/strata/broker/group/consumer"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// fastConsumerGroups: few offsets partitions and a short heartbeat
// interval, so that consumer-protocol reconciliation takes little time.
func fastConsumerGroups(c *Config) {
	c.Group = group.Config{OffsetsTopicPartitions: 4, InitialRebalanceDelay: -1, TickInterval: 20 * time.Millisecond,
		Consumer: consumer.Config{HeartbeatIntervalMs: 100}}
}

// ownership records which consumer owns which partition, from the
// clients' assignment callbacks, and fails the test if a partition is
// ever given to a consumer while another still owns it.
type ownership struct {
	t     *testing.T
	mu    sync.Mutex
	owner map[string]int // "topic/partition" -> consumer index
	count map[int]int
}

func (o *ownership) assigned(i int, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, ps := range m {
		for _, p := range ps {
			k := fmt.Sprintf("%s/%d", topic, p)
			if prev, ok := o.owner[k]; ok && prev != i {
				o.t.Errorf("partition %s given to consumer %d while consumer %d owns it", k, i, prev)
			}
			o.owner[k] = i
			o.count[i]++
		}
	}
}

func (o *ownership) revoked(i int, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for topic, ps := range m {
		for _, p := range ps {
			k := fmt.Sprintf("%s/%d", topic, p)
			if o.owner[k] == i {
				delete(o.owner, k)
				o.count[i]--
			}
		}
	}
}

func (o *ownership) snapshot() (owned int, perConsumer map[int]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	perConsumer = map[int]int{}
	for i, n := range o.count {
		perConsumer[i] = n
	}
	return len(o.owner), perConsumer
}

// waitEvenly waits until total partitions are owned, evenly by the
// consumers given, and fails the test after 20 s.
func (o *ownership) waitEvenly(t *testing.T, total int, consumers ...int) {
	t.Helper()
	each := total / len(consumers)
	even := func() (bool, int, map[int]int) {
		owned, per := o.snapshot()
		ok := owned == total
		for _, i := range consumers {
			ok = ok && per[i] == each
		}
		return ok, owned, per
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ok, owned, per := even()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("partitions owned: %d in all, per consumer %v; want %d each for %v", owned, per, each, consumers)
		}
	}
}

func consumer848(t *testing.T, addr, groupID, topic string, i int, own *ownership) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.assigned(i, m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoked(i, m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoked(i, m) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestConsumerGroupKgoNextGen: three franz-go consumers with the KIP-848
// protocol read every record of a 6-partition topic, never share a
// partition, and end up with two partitions each.
func TestConsumerGroupKgoNextGen(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastConsumerGroups)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "kip848"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	produceN(t, cl, "kip848", n)

	own := &ownership{t: t, owner: map[string]int{}, count: map[int]int{}}
	addr := tb.b.Addr().String()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		c := consumer848(t, addr, "g848", "kip848", i, own)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				done := len(seen) == n
				mu.Unlock()
				if done {
					return
				}
				pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				fs := c.PollFetches(pctx)
				cancel()
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)] = true
					mu.Unlock()
				})
			}
		}()
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("read %d distinct records, want %d", len(seen), n)
	}

	own.waitEvenly(t, 6, 0, 1, 2)

	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"g848"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		t.Fatalf("describe: %v %+v", err, resp)
	}
	g := resp.Groups[0]
	if len(g.Members) != 3 || g.AssignorName != consumer.UniformName && g.AssignorName != consumer.RangeName {
		t.Fatalf("described: %+v", g)
	}
	for _, m := range g.Members {
		if len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "kip848" ||
			len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
			t.Fatalf("member %s assignment %+v", m.MemberID, m.Assignment)
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || listed["g848"].ProtocolType != "consumer" {
		t.Fatalf("list groups: %v %+v", err, listed)
	}
	dg, err := adm.DescribeGroups(ctx, "g848")
	if err != nil || dg["g848"].ProtocolType != "consumer" || len(dg["g848"].Members) != 3 {
		t.Fatalf("describe groups: %v %+v", err, dg)
	}
	for _, m := range dg["g848"].Members {
		ca, ok := m.Assigned.AsConsumer()
		if !ok || len(ca.Topics) != 1 || ca.Topics[0].Topic != "kip848" || len(ca.Topics[0].Partitions) != 2 {
			t.Fatalf("described member %s: %+v", m.MemberID, m.Assigned)
		}
	}
	lreq := kmsg.NewPtrListGroupsRequest()
	lreq.TypesFilter = []string{"classic"}
	if lresp, err := lreq.RequestWith(ctx, cl); err != nil || len(lresp.Groups) != 0 {
		t.Fatalf("classic groups listed: %v %+v", err, lresp)
	}
	if resp, err := adm.DeleteGroups(ctx, "g848"); err != nil || !errors.Is(resp["g848"].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of a live consumer group: %v %+v", err, resp)
	}
}

func rawHeartbeat(t *testing.T, cl *kgo.Client, r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	resp, err := r.RequestWith(testCtx(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func assignedCount(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) int {
	if a == nil {
		return -1
	}
	n := 0
	for _, t := range a.Topics {
		n += len(t.Partitions)
	}
	return n
}

// TestConsumerGroupHeartbeatRaw drives ConsumerGroupHeartbeat v0 directly:
// a generated member id, a second member, revocation then assignment; a
// classic group answers GROUP_ID_NOT_FOUND.
func TestConsumerGroupHeartbeatRaw(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastConsumerGroups)
	adm, _ := adminClient(t, tb.b)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "raw848"); err != nil {
		t.Fatal(err)
	}
	// ConsumerGroupHeartbeat pinned to v0: the broker generates member ids.
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(int16(kmsg.ConsumerGroupHeartbeat), 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.MaxVersions(v0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	// Find the coordinator (creates __consumer_offsets) and wait for it to load.
	var a *kmsg.ConsumerGroupHeartbeatResponse
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Version, r.Group, r.MemberEpoch, r.RebalanceTimeoutMillis = 0, "raw", 0, 5000
		r.SubscribedTopicNames, r.Topics = []string{"raw848"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		a = rawHeartbeat(t, cl, r)
		if a.ErrorCode == 0 || time.Now().After(deadline) {
			break
		}
	}
	if a.ErrorCode != 0 || a.MemberID == nil || len(*a.MemberID) != 22 || a.MemberEpoch != 1 || assignedCount(a.Assignment) != 4 {
		t.Fatalf("first join: %+v", a)
	}
	b := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	b.Version, b.Group, b.MemberEpoch, b.RebalanceTimeoutMillis = 0, "raw", 0, 5000
	b.SubscribedTopicNames, b.Topics = []string{"raw848"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	rb := rawHeartbeat(t, cl, b)
	if rb.ErrorCode != 0 || rb.MemberEpoch != 2 || assignedCount(rb.Assignment) != 0 || *rb.MemberID == *a.MemberID {
		t.Fatalf("second join: %+v", rb)
	}
	// a keeps epoch 1 and is told to give up two partitions.
	ha := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	ha.Group, ha.MemberID, ha.MemberEpoch, ha.RebalanceTimeoutMillis = "raw", *a.MemberID, 1, -1
	for _, tp := range a.Assignment.Topics {
		ha.Topics = append(ha.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
	}
	ra := rawHeartbeat(t, cl, ha)
	if ra.ErrorCode != 0 || ra.MemberEpoch != 1 || assignedCount(ra.Assignment) != 2 {
		t.Fatalf("a told to revoke: %+v", ra)
	}
	// b gets nothing while a still owns its partitions.
	hb := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	hb.Group, hb.MemberID, hb.MemberEpoch, hb.RebalanceTimeoutMillis = "raw", *rb.MemberID, 2, -1
	hb.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := rawHeartbeat(t, cl, hb); r.ErrorCode != 0 || assignedCount(r.Assignment) > 0 {
		t.Fatalf("b before the revocation: %+v", r)
	}
	// a acknowledges: epoch 2; then b gets the two released partitions.
	ha.Topics = ha.Topics[:0]
	for _, tp := range ra.Assignment.Topics {
		ha.Topics = append(ha.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tp.TopicID, Partitions: tp.Partitions})
	}
	if r := rawHeartbeat(t, cl, ha); r.ErrorCode != 0 || r.MemberEpoch != 2 {
		t.Fatalf("a after revoking: %+v", r)
	}
	if r := rawHeartbeat(t, cl, hb); r.ErrorCode != 0 || r.MemberEpoch != 2 || assignedCount(r.Assignment) != 2 {
		t.Fatalf("b after the revocation: %+v", r)
	}
	// A stale epoch is fenced.
	ha.MemberEpoch = 7
	if r := rawHeartbeat(t, cl, ha); r.ErrorCode != kerr.FencedMemberEpoch.Code {
		t.Fatalf("fenced epoch: %+v", r)
	}

	// A restarted broker resumes the group from __consumer_offsets: b
	// heartbeats on with its epoch and keeps its partitions.
	tb.stop(t)
	tb = startTestBroker(t, endpoints, dir, fastConsumerGroups)
	adm, _ = adminClient(t, tb.b)
	cl2, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.MaxVersions(v0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl2.Close)
	hb.Topics = nil // owned partitions not sent: unchanged
	var rr *kmsg.ConsumerGroupHeartbeatResponse
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		hb.Topics = nil
		rr = rawHeartbeat(t, cl2, hb)
		retriable := rr.ErrorCode == kerr.CoordinatorLoadInProgress.Code || rr.ErrorCode == kerr.NotCoordinator.Code
		if !retriable || time.Now().After(deadline) {
			break
		}
	}
	if rr.ErrorCode != 0 || rr.MemberEpoch != 2 {
		t.Fatalf("b after a restart: %+v", rr)
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"raw"}
	dr, err := d.RequestWith(ctx, cl2)
	if err != nil || dr.Groups[0].ErrorCode != 0 || len(dr.Groups[0].Members) != 2 || dr.Groups[0].Epoch != 2 {
		t.Fatalf("describe after a restart: %v %+v", err, dr)
	}
	for _, m := range dr.Groups[0].Members {
		if m.MemberEpoch != 2 || len(m.Assignment.TopicPartitions) != 1 || len(m.Assignment.TopicPartitions[0].Partitions) != 2 {
			t.Fatalf("member after a restart: %+v", m)
		}
	}
	cl = cl2

	// A classic group with a member is not a consumer group.
	jc := groupConsumer(t, tb.b.Addr().String(), "classic848", "raw848")
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		jc.PollFetches(pctx)
		cancel()
		if d, err := adm.DescribeGroups(ctx, "classic848"); err == nil && len(d["classic848"].Members) == 1 {
			break
		}
	}
	c := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	c.Group, c.MemberID, c.MemberEpoch, c.RebalanceTimeoutMillis = "classic848", "m1", 0, 5000
	c.SubscribedTopicNames, c.Topics = []string{"raw848"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if r := rawHeartbeat(t, cl, c); r.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat on a classic group: %+v", r)
	}
}

func (o *ownership) releaseAll(i int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, owner := range o.owner {
		if owner == i {
			delete(o.owner, k)
		}
	}
	delete(o.count, i)
}

// pollInto polls c until stop is closed, adding record values to seen.
func pollInto(ctx context.Context, c *kgo.Client, mu *sync.Mutex, seen map[string]bool, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	for ctx.Err() == nil {
		select {
		case <-stop:
			return
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := c.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			mu.Lock()
			seen[string(r.Value)] = true
			mu.Unlock()
		})
	}
}

// TestConsumerGroupKgoNextGenMembershipChange: under load, one of three
// KIP-848 consumers leaves and another joins; every record is read and no
// partition is ever owned by two consumers at once.
func TestConsumerGroupKgoNextGenMembershipChange(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastConsumerGroups)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 6, 1, nil, "churn"); err != nil {
		t.Fatal(err)
	}
	own := &ownership{t: t, owner: map[string]int{}, count: map[int]int{}}
	addr := tb.b.Addr().String()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	stops := make([]chan struct{}, 4)
	clients := make([]*kgo.Client, 4)
	start := func(i int) {
		clients[i], stops[i] = consumer848(t, addr, "churn-g", "churn", i, own), make(chan struct{})
		wg.Add(1)
		go pollInto(ctx, clients[i], &mu, seen, stops[i], &wg)
	}
	for i := 0; i < 3; i++ {
		start(i)
	}
	const n = 600
	for i := 0; i < n; i++ {
		if i == n/3 { // consumer 0 leaves
			close(stops[0])
			own.releaseAll(0) // it stopped consuming: what it owned is free
			clients[0].Close()
		}
		if i == n/2 {
			start(3)
		}
		r := &kgo.Record{Topic: "churn", Value: []byte(fmt.Sprint(i))}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		done := len(seen) == n
		mu.Unlock()
		if done {
			break
		}
	}
	for _, i := range []int{1, 2, 3} {
		close(stops[i])
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("read %d distinct records, want %d", len(seen), n)
	}
	own.waitEvenly(t, 6, 1, 2, 3)
}

// TestConsumerGroupAuthorizationAndCoordinator: Read on the group for the
// heartbeat, Describe for describe; a group whose offsets partition this
// broker does not lead (here: __consumer_offsets not created yet) gets
// NOT_COORDINATOR.
func TestConsumerGroupAuthorizationAndCoordinator(t *testing.T) {
	tb := authzBroker(t)
	hbReq := func() *kmsg.ConsumerGroupHeartbeatRequest {
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.MemberEpoch, r.RebalanceTimeoutMillis = "authz848", "m1", 0, 5000
		r.SubscribedTopicNames, r.Topics = []string{"x"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	}
	if code := as(t, tb.b, "User:alice", hbReq()).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alice heartbeat: %v", kerr.ErrorForCode(code))
	}
	d := kmsg.NewPtrConsumerGroupDescribeRequest()
	d.Groups = []string{"authz848"}
	if code := as(t, tb.b, "User:alice", d).(*kmsg.ConsumerGroupDescribeResponse).Groups[0].ErrorCode; code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("alice describe: %v", kerr.ErrorForCode(code))
	}
	if code := as(t, tb.b, testSuperUser, hbReq()).(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode; code != kerr.NotCoordinator.Code {
		t.Fatalf("heartbeat before the offsets topic exists: %v", kerr.ErrorForCode(code))
	}
}

// readAll848 polls c until want distinct values were read from topic.
func readAll848(t *testing.T, c *kgo.Client, topic string, want int) {
	t.Helper()
	ctx := testCtx(t)
	seen := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); len(seen) < want && time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := c.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if r.Topic == topic {
				seen[string(r.Value)] = true
			}
		})
	}
	if len(seen) != want {
		t.Fatalf("read %d distinct records of %s, want %d", len(seen), topic, want)
	}
}

// TestConsumerGroupRegexAndClassicSideBySide: a KIP-848 consumer
// subscribed by regular expression picks up a topic created after it
// joined; a classic group reads the same topic meanwhile.
func TestConsumerGroupRegexAndClassicSideBySide(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, fastConsumerGroups)
	adm, cl := adminClient(t, tb.b)
	ctx := testCtx(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "re848-a"); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "re848-a", 50)
	own := &ownership{t: t, owner: map[string]int{}, count: map[int]int{}}
	rc, err := kgo.NewClient(kgo.SeedBrokers(tb.b.Addr().String()), kgo.ConsumerGroup("re-g"),
		kgo.ConsumeRegex(), kgo.ConsumeTopics("re848-.*"), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(500*time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.assigned(0, m) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.revoked(0, m) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	classic := groupConsumer(t, tb.b.Addr().String(), "classic-g", "re848-a")
	readAll848(t, rc, "re848-a", 50)
	readAll848(t, classic, "re848-a", 50)

	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "re848-b"); err != nil {
		t.Fatal(err)
	}
	produceN(t, cl, "re848-b", 30)
	readAll848(t, rc, "re848-b", 30)
	if total, _ := own.snapshot(); total != 5 {
		t.Fatalf("regex consumer owns %d partitions, want 5", total)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || listed["re-g"].ProtocolType != "consumer" || listed["classic-g"].ProtocolType != "consumer" {
		t.Fatalf("list: %v %+v", err, listed)
	}
	types := kmsg.NewPtrListGroupsRequest()
	types.TypesFilter = []string{"classic"}
	lr, err := types.RequestWith(ctx, cl)
	if err != nil || len(lr.Groups) != 1 || lr.Groups[0].Group != "classic-g" {
		t.Fatalf("classic groups: %v %+v", err, lr)
	}
}
