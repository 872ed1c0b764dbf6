package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/internal/testkit"
)

// Consumer-group acceptance tests: franz-go group consumers with
// the cooperative-sticky and eager range assignors and static membership,
// kcat's balanced consumer, offsets surviving a restart, kadm's group admin
// and the strata group command.

// groupBrokerArgs keep group tests quick: a short initial rebalance delay
// and few offsets partitions.
var groupBrokerArgs = withArgs("--group-initial-rebalance-delay", "300ms", "--offsets-topic-num-partitions", "8")

const groupSession = 6 * time.Second // the broker's minimum session timeout

// groupConsumer is one franz-go group member whose network can be cut
// (kill): it then stops heartbeating without leaving, like a crashed
// process.
type groupConsumer struct {
	t    *testing.T
	name string
	cl   *kgo.Client

	killed atomic.Bool
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	conns    []net.Conn
	seen     map[int32]map[int64]bool // partition -> offsets read
	assigned map[int32]bool
	changes  int // assignment callbacks (assigned, revoked, lost)
}

func newGroupConsumer(t *testing.T, b *Broker, name, group, topic string, opts ...kgo.Opt) *groupConsumer {
	t.Helper()
	c := &groupConsumer{t: t, name: name, seen: map[int32]map[int64]bool{}, assigned: map[int32]bool{}, done: make(chan struct{})}
	all := append([]kgo.Opt{
		kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID(name),
		kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.AutoCommitInterval(300 * time.Millisecond), kgo.Dialer(c.dial),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.change(m[topic], true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.change(m[topic], false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { c.change(m[topic], false) }),
	}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	c.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.poll(ctx)
	t.Cleanup(c.close)
	return c
}

func (c *groupConsumer) dial(ctx context.Context, network, host string) (net.Conn, error) {
	if c.killed.Load() {
		return nil, errors.New("consumer killed")
	}
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, host)
	if err == nil {
		c.mu.Lock()
		c.conns = append(c.conns, conn)
		c.mu.Unlock()
	}
	return conn, err
}

func (c *groupConsumer) change(partitions []int32, assigned bool) {
	if c.killed.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes++
	for _, p := range partitions {
		if assigned {
			c.assigned[p] = true
		} else {
			delete(c.assigned, p)
		}
	}
}

func (c *groupConsumer) poll(ctx context.Context) {
	defer close(c.done)
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		if c.killed.Load() {
			return
		}
		c.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			if c.seen[r.Partition] == nil {
				c.seen[r.Partition] = map[int64]bool{}
			}
			c.seen[r.Partition][r.Offset] = true
		})
		c.mu.Unlock()
	}
}

// kill cuts the consumer off: no heartbeat, no LeaveGroup, no commit.
func (c *groupConsumer) kill() {
	c.killed.Store(true)
	c.cancel()
	c.mu.Lock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.mu.Unlock()
	<-c.done
}

// stop closes the client normally (static members do not leave).
func (c *groupConsumer) stop() {
	c.cancel()
	<-c.done
	c.cl.Close()
}

func (c *groupConsumer) close() {
	c.cancel()
	<-c.done
	go c.cl.Close() // a killed client may take a while to give up
}

func (c *groupConsumer) assignment() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int32
	for p := range c.assigned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (c *groupConsumer) changeCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changes
}

// assignedUnion is the partitions the consumers own together, and whether
// no partition is owned twice.
func assignedUnion(cs []*groupConsumer) (map[int32]bool, bool) {
	union := map[int32]bool{}
	for _, c := range cs {
		for _, p := range c.assignment() {
			if union[p] {
				return union, false
			}
			union[p] = true
		}
	}
	return union, true
}

// runProducer produces to every partition of topic until stop is closed.
func runProducer(t *testing.T, b *Broker, topic string) (stop func()) {
	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var failed atomic.Value
	go func() {
		defer close(done)
		for i := 0; ctx.Err() == nil; i++ {
			cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}, func(_ *kgo.Record, err error) {
				if err != nil && !errors.Is(err, context.Canceled) {
					failed.Store(err)
				}
			})
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return func() {
		cancel()
		<-done
		_ = cl.Flush(context.Background())
		if err, _ := failed.Load().(error); err != nil {
			t.Fatalf("producer: %v", err)
		}
	}
}

// checkNothingLost: every offset below each partition's end was read by
// some consumer (the killed one counts for what it read before it died).
func checkNothingLost(t *testing.T, b *Broker, topic string, cs []*groupConsumer) {
	t.Helper()
	ends := endOffsets(t, b.Admin(), topic)
	covered := func() (int32, int64, bool) {
		for p, end := range ends {
			for o := int64(0); o < end; o++ {
				found := false
				for _, c := range cs {
					c.mu.Lock()
					found = found || c.seen[p][o]
					c.mu.Unlock()
				}
				if !found {
					return p, o, false
				}
			}
		}
		return 0, 0, true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, o, ok := covered()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %s/%d@%d was never consumed (ends %v)", topic, p, o, ends)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// groupKillScenario: three consumers and a producer; one consumer dies; its
// partitions move to the others within the session timeout and nothing is
// lost.
func groupKillScenario(t *testing.T, balancer kgo.GroupBalancer) {
	b := StartBroker(t, groupBrokerArgs)
	const topic, group = "orders", "workers"
	createTopic(t, b.Admin(), topic, 12, nil)
	stopProducer := runProducer(t, b, topic)
	var cs []*groupConsumer
	for i := 0; i < 3; i++ {
		cs = append(cs, newGroupConsumer(t, b, fmt.Sprintf("c%d", i), group, topic, kgo.Balancers(balancer)))
	}
	testkit.WaitFor(t, 60*time.Second, "3 consumers sharing 12 partitions", func() bool {
		union, disjoint := assignedUnion(cs)
		return disjoint && len(union) == 12 && len(cs[0].assignment()) > 0 && len(cs[1].assignment()) > 0 && len(cs[2].assignment()) > 0
	})
	time.Sleep(time.Second) // let them consume and commit
	victim := cs[2]
	lost := victim.assignment()
	victim.kill()
	killedAt := time.Now()
	testkit.WaitFor(t, 4*groupSession, "the survivors to own all 12 partitions", func() bool {
		union, disjoint := assignedUnion(cs[:2])
		return disjoint && len(union) == 12
	})
	moved := time.Since(killedAt)
	t.Logf("partitions %v of the killed consumer moved after %v", lost, moved.Round(time.Millisecond))
	if moved > 2*groupSession {
		t.Errorf("partitions moved after %v, want within about the session timeout (%v)", moved, groupSession)
	}
	time.Sleep(500 * time.Millisecond)
	stopProducer()
	checkNothingLost(t, b, topic, cs)
}

func TestGroupCooperativeStickyKill(t *testing.T) {
	groupKillScenario(t, kgo.CooperativeStickyBalancer())
}

func TestGroupEagerRangeKill(t *testing.T) {
	groupKillScenario(t, kgo.RangeBalancer())
}

// TestGroupStaticMembership: a static member that restarts inside the
// session timeout gets its partitions back with no rebalance.
func TestGroupStaticMembership(t *testing.T) {
	b := StartBroker(t, groupBrokerArgs)
	const topic, group = "static", "static-workers"
	createTopic(t, b.Admin(), topic, 12, nil)
	stopProducer := runProducer(t, b, topic)
	session := kgo.SessionTimeout(20 * time.Second)
	var cs []*groupConsumer
	for i := 0; i < 3; i++ {
		cs = append(cs, newGroupConsumer(t, b, fmt.Sprintf("s%d", i), group, topic, kgo.InstanceID(fmt.Sprintf("instance-%d", i)), session))
	}
	testkit.WaitFor(t, 60*time.Second, "3 static consumers sharing 12 partitions", func() bool {
		union, disjoint := assignedUnion(cs)
		return disjoint && len(union) == 12 && len(cs[0].assignment()) > 0 && len(cs[1].assignment()) > 0 && len(cs[2].assignment()) > 0
	})
	time.Sleep(2 * time.Second) // no rebalance in flight
	before := cs[2].assignment()
	changes := []int{cs[0].changeCount(), cs[1].changeCount()}
	cs[2].stop()
	restarted := newGroupConsumer(t, b, "s2-again", group, topic, kgo.InstanceID("instance-2"), session)
	testkit.WaitFor(t, 30*time.Second, "the restarted static member to get partitions", func() bool { return len(restarted.assignment()) > 0 })
	time.Sleep(2 * time.Second)
	if got := restarted.assignment(); !slices.Equal(got, before) {
		t.Fatalf("restarted static member got %v, had %v", got, before)
	}
	if now := []int{cs[0].changeCount(), cs[1].changeCount()}; !slices.Equal(now, changes) {
		t.Fatalf("the other members saw a rebalance (assignment callbacks %v -> %v)", changes, now)
	}
	described, err := b.Admin().DescribeGroups(testCtx(t, 30*time.Second), group)
	if err != nil || described[group].State != "Stable" || len(described[group].Members) != 3 {
		t.Fatalf("describe: %v %+v", err, described[group])
	}
	stopProducer()
	checkNothingLost(t, b, topic, []*groupConsumer{cs[0], cs[1], cs[2], restarted})
}

// TestGroupKcatBalanced: librdkafka's balanced consumer (kcat -G) reads
// everything and commits.
func TestGroupKcatBalanced(t *testing.T) {
	kcat := testkit.NeedBinary(t, "kcat")
	b := StartBroker(t, groupBrokerArgs)
	const topic, group = "kcat-group", "kcat-readers"
	createTopic(t, b.Admin(), topic, 3, nil)
	cl := b.Client(kgo.DefaultProduceTopic(topic))
	var want []string
	for i := 0; i < 300; i++ {
		want = append(want, fmt.Sprintf("rec-%03d", i))
		produceSync(t, cl, &kgo.Record{Key: fmt.Appendf(nil, "%d", i), Value: []byte(want[i])})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", b.Addr, "-G", group, "-o", "beginning", "-e", "-q",
		"-X", "session.timeout.ms=6000", "-X", "auto.commit.interval.ms=200", topic)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -G: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("kcat -G read %d records, want %d", len(got), len(want))
	}
	testkit.WaitFor(t, 20*time.Second, "kcat's commits to cover every record", func() bool {
		offsets, err := b.Admin().FetchOffsets(testCtx(t, 10*time.Second), group)
		var sum int64
		offsets.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return err == nil && sum == 300
	})
}

// TestGroupOffsetsSurviveRestart: committed offsets and groups come back
// after a restart (the coordinator reloads __consumer_offsets).
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	b := StartBroker(t, groupBrokerArgs)
	const topic = "durable-offsets"
	createTopic(t, b.Admin(), topic, 4, nil)
	adm := b.Admin()
	ctx := testCtx(t, 60*time.Second)
	commits := kadm.Offsets{}
	for p := int32(0); p < 4; p++ {
		commits.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(100 + p), LeaderEpoch: -1, Metadata: fmt.Sprint("meta-", p)})
	}
	resps, err := adm.CommitOffsets(ctx, "survivor", commits)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A static member's group: its member and assignment outlive both the
	// client (static members do not leave on close) and the broker.
	member := newGroupConsumer(t, b, "live", "live-group", topic, kgo.InstanceID("live-1"), kgo.SessionTimeout(60*time.Second))
	testkit.WaitFor(t, 30*time.Second, "the static member's assignment", func() bool { return len(member.assignment()) == 4 })
	time.Sleep(time.Second)
	member.stop()
	b.Restart()
	adm = b.Admin()
	var fetched kadm.OffsetResponses
	testkit.WaitFor(t, 30*time.Second, "OffsetFetch after the restart", func() bool {
		fetched, err = adm.FetchOffsets(ctx, "survivor")
		return err == nil
	})
	for p := int32(0); p < 4; p++ {
		o, ok := fetched.Lookup(topic, p)
		if !ok || o.At != int64(100+p) || o.Metadata != fmt.Sprint("meta-", p) {
			t.Fatalf("partition %d after restart: %+v (found %v)", p, o, ok)
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || listed["survivor"].State != "Empty" {
		t.Fatalf("list groups after restart: %v %+v", err, listed)
	}
	described, err := adm.DescribeGroups(ctx, "live-group")
	d := described["live-group"]
	if err != nil || d.State != "Stable" || len(d.Members) != 1 || d.Members[0].InstanceID == nil || *d.Members[0].InstanceID != "live-1" {
		t.Fatalf("static group after restart: %v %+v", err, d)
	}
	if assigned, ok := d.Members[0].Assigned.AsConsumer(); !ok || len(assigned.Topics) != 1 || len(assigned.Topics[0].Partitions) != 4 {
		t.Fatalf("static member's assignment after restart: %+v", d.Members[0].Assigned)
	}
	again := newGroupConsumer(t, b, "live-again", "live-group", topic, kgo.InstanceID("live-1"), kgo.SessionTimeout(60*time.Second))
	testkit.WaitFor(t, 30*time.Second, "the restarted static member's assignment", func() bool { return len(again.assignment()) == 4 })
}

// TestGroupAdmin: kadm list/describe/lag, delete group, offset delete, and
// the strata group command.
func TestGroupAdmin(t *testing.T) {
	b := StartBroker(t, groupBrokerArgs)
	const topic, group = "admin-topic", "admin-group"
	createTopic(t, b.Admin(), topic, 2, nil)
	cl := b.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 10; i++ {
		produceSync(t, cl, &kgo.Record{Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)})
	}
	adm := b.Admin()
	ctx := testCtx(t, 60*time.Second)
	consumer := b.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(groupSession))
	read := 0
	for read < 7 {
		fs := consumer.PollRecords(ctx, 7-read)
		if err := fs.Err0(); err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, r := range fs.Records() {
			if err := consumer.CommitRecords(ctx, r); err != nil {
				t.Fatalf("commit: %v", err)
			}
			read++
		}
	}
	checkLagAndCommand(t, b, adm, topic, group)
	if resp, err := adm.DeleteGroups(ctx, group); err != nil || !errors.Is(resp[group].Err, kerr.NonEmptyGroup) {
		t.Fatalf("delete of a live group: %v %+v", err, resp)
	}
	if resp, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}}); err != nil || !errors.Is(resp.Error(), kerr.GroupSubscribedToTopic) {
		t.Fatalf("offset delete of a subscribed topic: %v %v", err, resp)
	}
	consumer.Close() // leaves the group: Empty
	testkit.WaitFor(t, 20*time.Second, "the group to become Empty", func() bool {
		l, err := adm.ListGroups(ctx, "Empty")
		return err == nil && l[group].Group == group
	})
	checkResetAndDeletes(t, b, adm, topic, group)
}

// checkLagAndCommand: 10 records, 7 committed by a live member.
func checkLagAndCommand(t *testing.T, b *Broker, adm *kadm.Client, topic, group string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	lags, err := adm.Lag(ctx, group)
	lag := lags[group]
	if err != nil || lag.Error() != nil || lag.State != "Stable" || len(lag.Members) != 1 {
		t.Fatalf("lag: %v %+v", err, lag)
	}
	if total := lag.Lag.Total(); total != 3 {
		t.Fatalf("total lag %d, want 3 (10 produced, 7 committed)", total)
	}
	out := runStrata(t, "group", "describe", "--brokers", b.Addr, group)
	for _, want := range []string{"state Stable", topic, "LAG"} {
		if !strings.Contains(out, want) {
			t.Fatalf("strata group describe lacks %q:\n%s", want, out)
		}
	}
	if out := runStrata(t, "group", "list", "--brokers", b.Addr); !strings.Contains(out, group) {
		t.Fatalf("strata group list:\n%s", out)
	}
}

// checkResetAndDeletes: strata group reset, OffsetDelete and DeleteGroups
// on the Empty group.
func checkResetAndDeletes(t *testing.T, b *Broker, adm *kadm.Client, topic, group string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	runStrata(t, "group", "reset", "--brokers", b.Addr, group, "--to-earliest", "--execute")
	offsets, err := adm.FetchOffsets(ctx, group)
	if o, _ := offsets.Lookup(topic, 1); err != nil || o.At != 0 {
		t.Fatalf("after reset to earliest: %v %+v", err, offsets)
	}
	runStrata(t, "group", "reset", "--brokers", b.Addr, group, "--to-latest", "--topic", topic, "--execute")
	offsets, err = adm.FetchOffsets(ctx, group)
	if o, _ := offsets.Lookup(topic, 1); err != nil || o.At != 5 {
		t.Fatalf("after reset to latest: %v %+v", err, offsets)
	}
	if resp, err := adm.DeleteOffsets(ctx, group, kadm.TopicsSet{topic: {0: {}}}); err != nil || resp.Error() != nil {
		t.Fatalf("offset delete: %v %v", err, resp)
	}
	offsets, _ = adm.FetchOffsets(ctx, group)
	if _, ok := offsets.Lookup(topic, 0); ok {
		t.Fatalf("offset of partition 0 still there after OffsetDelete: %+v", offsets)
	}
	if resp, err := adm.DeleteGroups(ctx, group); err != nil || resp[group].Err != nil {
		t.Fatalf("delete group: %v %+v", err, resp)
	}
	if l, err := adm.ListGroups(ctx); err != nil || len(l) != 0 {
		t.Fatalf("groups after delete: %v %+v", err, l)
	}
}

// runStrata runs the strata binary's client commands and returns stdout.
func runStrata(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, strataBin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("strata %s: %v\n%s\n%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}
