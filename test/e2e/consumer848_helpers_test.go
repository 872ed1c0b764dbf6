package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers of the KIP-848 acceptance tests (consumer848_test.go): franz-go
// members with the consumer protocol whose assignment callbacks feed one
// shared ownership table, and the broker's view of the group.

// consumer848Args: short consumer-protocol timeouts so that reconciliation
// and session expiry take seconds, and few offsets partitions.
var consumer848Args = withArgs("--group-consumer-heartbeat-interval", "500ms",
	"--group-consumer-session-timeout", "10s", "--group-initial-rebalance-delay", "300ms",
	"--offsets-topic-num-partitions", "8")

// ownEvent is one assignment callback that named partitions.
type ownEvent struct {
	member string
	kind   string // "assigned", "revoked" or "lost"
	parts  map[string][]int32
}

// owners848 is the ownership table of one group, fed by every member's
// callbacks. kgo calls them, for the consumer protocol (always cooperative):
// OnPartitionsAssigned with only the partitions added since the last
// session (even when empty), OnPartitionsRevoked with the partitions lost
// before the member acknowledges their revocation to the broker (and with
// an empty map at the end of every session, which is not a revocation),
// with everything it owns when it leaves, and OnPartitionsLost with
// everything when the broker fenced it. A partition given to a member while
// another still owns it is a violation: the broker may only reassign a
// partition once its owner has acknowledged the revocation.
type owners848 struct {
	mu         sync.Mutex
	owner      map[string]map[int32]string // topic -> partition -> member
	events     []ownEvent
	violations []string
}

func newOwners848(t *testing.T) *owners848 {
	o := &owners848{owner: map[string]map[int32]string{}}
	// Registered before any member, so it runs after they have closed
	// (cleanups run last-in first-out) and sees their final callbacks.
	t.Cleanup(func() { o.check(t) })
	return o
}

func (o *owners848) assigned(member string, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.recordLocked(member, "assigned", m) {
		return
	}
	for topic, ps := range m {
		if o.owner[topic] == nil {
			o.owner[topic] = map[int32]string{}
		}
		for _, p := range ps {
			if prev, ok := o.owner[topic][p]; ok && prev != member {
				o.violations = append(o.violations, fmt.Sprintf("%s/%d assigned to %s while %s owns it", topic, p, member, prev))
			}
			o.owner[topic][p] = member
		}
	}
}

// released handles a revoked or lost callback.
func (o *owners848) released(member, kind string, m map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.recordLocked(member, kind, m) {
		return
	}
	for topic, ps := range m {
		for _, p := range ps {
			if o.owner[topic][p] == member {
				delete(o.owner[topic], p)
			}
		}
	}
}

// recordLocked appends the event if it names a partition. REQUIRES: mu held.
func (o *owners848) recordLocked(member, kind string, m map[string][]int32) bool {
	parts := map[string][]int32{}
	for topic, ps := range m {
		if len(ps) > 0 {
			parts[topic] = slices.Sorted(slices.Values(ps))
		}
	}
	if len(parts) == 0 {
		return false
	}
	o.events = append(o.events, ownEvent{member: member, kind: kind, parts: parts})
	return true
}

// of is what member owns, as "topic/p" strings, sorted.
func (o *owners848) of(member string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for topic, ps := range o.owner {
		for p, m := range ps {
			if m == member {
				out = append(out, fmt.Sprintf("%s/%d", topic, p))
			}
		}
	}
	slices.Sort(out)
	return out
}

// mark is the index of the next event.
func (o *owners848) mark() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.events)
}

func (o *owners848) since(mark int) []ownEvent {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.events[mark:])
}

func (o *owners848) check(t *testing.T) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, v := range o.violations {
		t.Errorf("double assignment: %s", v)
	}
	o.violations = nil
}

// member848 is one franz-go group member that records what it reads.
type member848 struct {
	t      *testing.T
	name   string
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	closed bool // only the test goroutine touches it

	mu         sync.Mutex
	seen       map[string]map[int32]map[int64]bool // topic -> partition -> offsets read
	commitErrs []string
}

// newMember848 starts a member of group in own's table, subscribed by
// opts (kgo.ConsumeTopics, with kgo.ConsumeRegex for a regex). It speaks
// the consumer protocol, or with classic kgo's default classic protocol
// (cooperative-sticky).
func newMember848(t *testing.T, b *Broker, own *owners848, name, group string, classic bool, opts ...kgo.Opt) *member848 {
	t.Helper()
	m := &member848{t: t, name: name, seen: map[string]map[int32]map[int64]bool{}, done: make(chan struct{})}
	all := []kgo.Opt{
		kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup(group), kgo.ClientID(name),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(300 * time.Millisecond),
		kgo.RetryTimeout(30 * time.Second), kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { own.assigned(name, a) }),
		kgo.OnPartitionsRevoked(m.onRevoked(own)),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) { own.released(name, "lost", l) }),
	}
	if classic {
		all = append(all, kgo.SessionTimeout(groupSession), kgo.HeartbeatInterval(300*time.Millisecond))
	} else {
		all = append(all, kgo.ServerSideBalancer(), kgo.Balancers(kgo.CooperativeStickyBalancer()))
	}
	cl, err := kgo.NewClient(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.poll(ctx)
	t.Cleanup(m.close)
	return m
}

// onRevoked updates the table, then commits what was read, as kgo's
// default revoke does, so that the next owner resumes there.
func (m *member848) onRevoked(own *owners848) func(context.Context, *kgo.Client, map[string][]int32) {
	return func(_ context.Context, cl *kgo.Client, r map[string][]int32) {
		own.released(m.name, "revoked", r)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cl.CommitUncommittedOffsets(ctx); err != nil {
			m.mu.Lock()
			m.commitErrs = append(m.commitErrs, err.Error())
			m.mu.Unlock()
		}
	}
}

func (m *member848) poll(ctx context.Context) {
	defer close(m.done)
	for ctx.Err() == nil {
		fs := m.cl.PollFetches(ctx)
		m.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) {
			byPart := m.seen[r.Topic]
			if byPart == nil {
				byPart = map[int32]map[int64]bool{}
				m.seen[r.Topic] = byPart
			}
			if byPart[r.Partition] == nil {
				byPart[r.Partition] = map[int64]bool{}
			}
			byPart[r.Partition][r.Offset] = true
		})
		m.mu.Unlock()
	}
}

// close stops polling and closes the client, which leaves the group.
func (m *member848) close() {
	if m.closed {
		return
	}
	m.closed = true
	m.cancel()
	<-m.done
	m.cl.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.commitErrs) > 0 {
		m.t.Logf("%s: commits in OnPartitionsRevoked failed: %v", m.name, m.commitErrs)
	}
}

func (m *member848) hasRead(topic string, p int32, o int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seen[topic][p][o]
}

func (m *member848) readCount(topic string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, offs := range m.seen[topic] {
		n += len(offs)
	}
	return n
}

// memberID is the id kgo uses in the group.
func (m *member848) memberID() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

// checkAllRead waits until every record below topic's end offsets was read
// by one of ms (at least once), failing t after timeout.
func checkAllRead(t *testing.T, b *Broker, topic string, ms []*member848, timeout time.Duration) {
	t.Helper()
	ends := endOffsets(t, b.Admin(), topic)
	missing := func() string {
		for p, end := range ends {
			for o := int64(0); o < end; o++ {
				if !slices.ContainsFunc(ms, func(m *member848) bool { return m.hasRead(topic, p, o) }) {
					return fmt.Sprintf("%s/%d@%d", topic, p, o)
				}
			}
		}
		return ""
	}
	deadline := time.Now().Add(timeout)
	for {
		miss := missing()
		if miss == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %s was never read by the group (end offsets %v)", miss, ends)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// setStrings turns a kadm.TopicsSet into sorted "topic/p" strings.
func setStrings(s kadm.TopicsSet) []string {
	var out []string
	for topic, ps := range s {
		for p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", topic, p))
		}
	}
	slices.Sort(out)
	return out
}

// describe848 is the broker's ConsumerGroupDescribe of group.
func describe848(t *testing.T, adm *kadm.Client, group string) (kadm.DescribedConsumerGroup, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return kadm.DescribedConsumerGroup{}, err
	}
	g, ok := d[group]
	if !ok {
		return g, fmt.Errorf("group %s not in the describe response", group)
	}
	return g, g.Err
}

// convergedWhy is "" when the group is Stable with exactly ms as members,
// every member's assignment equals its target, and the ownership table
// agrees with the broker about every member; else why not.
func convergedWhy(t *testing.T, adm *kadm.Client, group string, own *owners848, ms []*member848) string {
	g, err := describe848(t, adm, group)
	if err != nil {
		return fmt.Sprintf("describe: %v", err)
	}
	if g.State != "Stable" || len(g.Members) != len(ms) {
		return fmt.Sprintf("state %s with %d members, want Stable with %d", g.State, len(g.Members), len(ms))
	}
	byID := map[string]kadm.ConsumerGroupMember{}
	for _, gm := range g.Members {
		byID[gm.MemberID] = gm
	}
	for _, m := range ms {
		gm, ok := byID[m.memberID()]
		if !ok {
			return fmt.Sprintf("%s (member id %q) is not a member", m.name, m.memberID())
		}
		assigned, target := setStrings(gm.Assignment), setStrings(gm.TargetAssignment)
		if !slices.Equal(assigned, target) {
			return fmt.Sprintf("%s: assignment %v, target %v", m.name, assigned, target)
		}
		if owned := own.of(m.name); !slices.Equal(owned, assigned) {
			return fmt.Sprintf("%s: callbacks say it owns %v, broker says %v", m.name, owned, assigned)
		}
	}
	return ""
}

// waitConverged waits for convergedWhy to be "" and returns the group.
func waitConverged(t *testing.T, adm *kadm.Client, group string, own *owners848, ms []*member848, timeout time.Duration) kadm.DescribedConsumerGroup {
	t.Helper()
	start := time.Now()
	for {
		why := convergedWhy(t, adm, group, own, ms)
		if why == "" {
			break
		}
		if time.Since(start) > timeout {
			t.Fatalf("group %s did not converge within %v: %s", group, timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("group %s converged on %d members after %v", group, len(ms), time.Since(start).Round(time.Millisecond))
	g, err := describe848(t, adm, group)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// partsOf flattens an event's partitions into "topic/p" strings.
func partsOf(e ownEvent) []string {
	var out []string
	for topic, ps := range e.parts {
		for _, p := range ps {
			out = append(out, fmt.Sprintf("%s/%d", topic, p))
		}
	}
	return out
}

// producedN produces n records to topic, spread by key, synchronously.
func producedN(t *testing.T, b *Broker, topic string, n int) {
	t.Helper()
	cl := b.Client(kgo.DefaultProduceTopic(topic))
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%s-%d", topic, i)})
	}
	produceSync(t, cl, rs...)
}

// joined is a short list of member names, for messages.
func joined(ms []*member848) string {
	var names []string
	for _, m := range ms {
		names = append(names, m.name)
	}
	return strings.Join(names, ",")
}
