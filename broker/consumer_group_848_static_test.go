package broker

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker/group/consumer"
	"github.com/strata-log/strata/metadata/metadatatest"
)

// newStaticTestMember is a consumer-protocol member of the test's group,
// static when instance is set.
func newStaticTestMember(t *testing.T, addr string, instance string) *callbackMember {
	t.Helper()
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}
	if instance != "" {
		opts = append(opts, kgo.InstanceID(instance))
	}
	return newCallbackMember(t, addr, "static848", "static848", opts...)
}

func waitPartitions(t *testing.T, what string, m *callbackMember, ok func([]int32) bool) []int32 {
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
	static := newStaticTestMember(t, addr, "static-1")
	dynamic := newStaticTestMember(t, addr, "")
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

	back := newStaticTestMember(t, addr, "static-1")
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
