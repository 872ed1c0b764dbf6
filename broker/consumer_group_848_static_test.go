package broker

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group/consumer"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// staticMember is a franz-go consumer-protocol member whose assigned
// partitions (from its callbacks) can be read.
type staticMember struct {
	cl *kgo.Client
	mu sync.Mutex
	ps map[int32]bool
}

func newStaticMember(t *testing.T, addr string, instance string) *staticMember {
	t.Helper()
	m := &staticMember{ps: map[int32]bool{}}
	set := func(ps []int32, on bool) {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, p := range ps {
			if on {
				m.ps[p] = true
			} else {
				delete(m.ps, p)
			}
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup("static848"), kgo.ConsumeTopics("static848"),
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { set(a["static848"], true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { set(a["static848"], false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { set(a["static848"], false) })}
	if instance != "" {
		opts = append(opts, kgo.InstanceID(instance))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	t.Cleanup(cl.Close)
	go func() { // polling drives the group
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := cl.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return m
}

func (m *staticMember) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p := range m.ps {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func waitPartitions(t *testing.T, what string, m *staticMember, ok func([]int32) bool) []int32 {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ps := m.partitions(); ok(ps) {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: partitions %v after 30s", what, m.partitions())
		}
	}
}

// TestConsumerGroupStaticMembership: a static member (group.instance.id)
// that leaves keeps its partitions reserved, epoch -2, until its session
// times out; a new client with the same instance id takes them over
// without the other member losing or gaining any.
func TestConsumerGroupStaticMembership(t *testing.T) {
	endpoints, dir := metadatatest.StartEmbedded(t), t.TempDir()
	tb := startTestBroker(t, endpoints, dir, func(c *Config) {
		fastConsumerGroups(c)
		c.Group.Consumer.SessionTimeoutMs = 60000
	})
	adm, cl := adminClient(t, tb.b)
	if _, err := adm.CreateTopic(testCtx(t), 4, 1, nil, "static848"); err != nil {
		t.Fatal(err)
	}
	addr := tb.b.Addr().String()
	two := func(ps []int32) bool { return len(ps) == 2 }
	static := newStaticMember(t, addr, "static-1")
	dynamic := newStaticMember(t, addr, "")
	before := waitPartitions(t, "static member", static, two)
	kept := waitPartitions(t, "dynamic member", dynamic, two)

	static.cl.Close() // a static leave: epoch -2
	describe := func() kmsg.ConsumerGroupDescribeResponseGroup {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{"static848"}
		resp, err := req.RequestWith(testCtx(t), cl)
		if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
			t.Fatalf("describe: %v %+v", err, resp)
		}
		return resp.Groups[0]
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		g := describe()
		i := slices.IndexFunc(g.Members, func(m kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
			return m.InstanceID != nil && *m.InstanceID == "static-1"
		})
		if i >= 0 && g.Members[i].MemberEpoch == consumer.StaticLeaveEpoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("static member not away (epoch -2) after its leave: %+v", g.Members)
		}
	}
	time.Sleep(500 * time.Millisecond) // five heartbeat intervals: nothing may move
	if got := dynamic.partitions(); !slices.Equal(got, kept) {
		t.Fatalf("the dynamic member's partitions changed from %v to %v while the static member was away", kept, got)
	}

	back := newStaticMember(t, addr, "static-1")
	if got := waitPartitions(t, "static member back", back, two); !slices.Equal(got, before) {
		t.Fatalf("static member back with %v, had %v", got, before)
	}
	if got := dynamic.partitions(); !slices.Equal(got, kept) {
		t.Fatalf("the dynamic member's partitions changed from %v to %v on the static member's return", kept, got)
	}
	if g := describe(); len(g.Members) != 2 {
		t.Fatalf("members after the takeover: %+v", g.Members)
	}
}
