package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testkit"
)

// Acceptance tests of the consumer group protocol of KIP-848,
// against the strata binary: franz-go members with kgo.ServerSideBalancer
// and the cooperative-sticky balancer (server assignor "uniform"). kgo
// sends its regular expression to the broker (SubscribedTopicRegex) when
// no topic is excluded, so regex subscriptions are resolved server-side.

const converge848 = 45 * time.Second // bound of every wait for a stable group

// TestConsumer848LeaveJoin: three members share 12 partitions while a
// producer runs; one leaves, later one joins. No partition is ever owned
// twice, a leave revokes nothing from the survivors, a join revokes from
// survivors only what the new member gets, and every record is read.
func TestConsumer848LeaveJoin(t *testing.T) {
	b := StartBroker(t, consumer848Args)
	const topic, group = "kip848-moves", "kip848-movers"
	adm := b.Admin()
	createTopic(t, adm, topic, 12, nil)
	own := newOwners848(t)
	stopProducer := runProducer(t, b, topic)
	var ms []*member848
	for i := 0; i < 3; i++ {
		ms = append(ms, newMember848(t, b, own, fmt.Sprintf("m%d", i), group, false, kgo.ConsumeTopics(topic)))
	}
	waitConverged(t, adm, group, own, ms, converge848)
	checkShares(t, own, ms, 4)
	time.Sleep(time.Second) // read and commit under a stable assignment

	leaver, survivors := ms[2], ms[:2]
	left := own.of(leaver.name)
	mark := own.mark()
	leaver.close()
	waitConverged(t, adm, group, own, survivors, converge848)
	checkShares(t, own, survivors, 6)
	checkLeave(t, own.since(mark), leaver.name, left)

	mark = own.mark()
	joiner := newMember848(t, b, own, "m3", group, false, kgo.ConsumeTopics(topic))
	final := append(slices.Clone(survivors), joiner)
	waitConverged(t, adm, group, own, final, converge848)
	checkShares(t, own, final, 4)
	checkJoin(t, own.since(mark), joiner.name, own.of(joiner.name))
	time.Sleep(500 * time.Millisecond)
	stopProducer()
	checkAllRead(t, b, topic, append(ms[:3:3], joiner), 30*time.Second)
	own.check(t)
}

// checkLeave: while a member that owned left was leaving, the survivors
// were only assigned partitions, and only partitions it owned.
func checkLeave(t *testing.T, events []ownEvent, leaver string, left []string) {
	t.Helper()
	for _, e := range events {
		switch {
		case e.member == leaver:
		case e.kind != "assigned":
			t.Errorf("survivor %s: %s %v when %s left", e.member, e.kind, e.parts, leaver)
		default:
			for _, p := range partsOf(e) {
				if !slices.Contains(left, p) {
					t.Errorf("survivor %s was assigned %s, which the leaver did not own (%v)", e.member, p, left)
				}
			}
		}
	}
}

// checkJoin: while a member joined (ending with got), the survivors lost
// nothing, and what was revoked from them is exactly what the joiner got
// (they owned every partition before): partitions that stay put are
// never revoked.
func checkJoin(t *testing.T, events []ownEvent, joiner string, got []string) {
	t.Helper()
	var revoked []string
	for _, e := range events {
		if e.member == joiner || e.kind == "assigned" {
			continue
		}
		if e.kind == "lost" {
			t.Errorf("survivor %s lost %v when %s joined", e.member, e.parts, joiner)
		}
		for _, p := range partsOf(e) {
			revoked = append(revoked, p)
			if !slices.Contains(got, p) {
				t.Errorf("%s was revoked %s when %s joined, but the joiner ended with %v", e.member, p, joiner, got)
			}
		}
	}
	if slices.Sort(revoked); !slices.Equal(revoked, got) {
		t.Errorf("revoked from the survivors %v, the joiner got %v", revoked, got)
	}
}

// checkShares: each member owns exactly n partitions (uniform balance).
func checkShares(t *testing.T, own *owners848, ms []*member848, n int) {
	t.Helper()
	for _, m := range ms {
		if got := own.of(m.name); len(got) != n {
			t.Fatalf("%s owns %v, want %d partitions (members %s)", m.name, got, n, joined(ms))
		}
	}
}

// TestConsumer848Regex: a regular-expression subscription picks up a topic
// created after the members joined, with no restart, and reads it; a topic
// the expression does not match is never read.
func TestConsumer848Regex(t *testing.T) {
	b := StartBroker(t, consumer848Args)
	const group = "kip848-regex"
	adm := b.Admin()
	createTopic(t, adm, "rx-old", 3, nil)
	createTopic(t, adm, "plain", 2, nil)
	producedN(t, b, "rx-old", 60)
	producedN(t, b, "plain", 20)
	own := newOwners848(t)
	var ms []*member848
	for i := 0; i < 2; i++ {
		ms = append(ms, newMember848(t, b, own, fmt.Sprintf("r%d", i), group, false,
			kgo.ConsumeRegex(), kgo.ConsumeTopics("rx-.*")))
	}
	g := waitConverged(t, adm, group, own, ms, converge848)
	for _, gm := range g.Members {
		if gm.SubscribedTopicRegex == nil {
			t.Fatalf("member %s has no SubscribedTopicRegex: kgo resolved the regex client-side", gm.MemberID)
		}
	}
	checkAllRead(t, b, "rx-old", ms, 30*time.Second)

	createTopic(t, adm, "rx-new", 4, nil)
	producedN(t, b, "rx-new", 80)
	testkit.WaitFor(t, converge848, "rx-new to be assigned", func() bool {
		n := 0
		for _, m := range ms {
			for _, p := range own.of(m.name) {
				if strings.HasPrefix(p, "rx-new/") {
					n++
				}
			}
		}
		return n == 4
	})
	waitConverged(t, adm, group, own, ms, converge848)
	checkAllRead(t, b, "rx-new", ms, 30*time.Second)
	for _, m := range ms {
		if n := m.readCount("plain"); n != 0 {
			t.Fatalf("%s read %d records of topic plain, which rx-.* does not match", m.name, n)
		}
	}
}

// TestConsumer848Restart: a broker restart (SIGTERM) mid-group. The
// franz-go members and a raw heartbeating member resume with their member
// ids and epochs (no fencing, no rejoin), committed offsets are intact, and
// consumption continues.
func TestConsumer848Restart(t *testing.T) {
	restartScenario(t, func(b *Broker) { b.Restart() })
}

// TestConsumer848KillRestart: the same after SIGKILL: the group's records
// were durable before the broker answered the heartbeats that made them.
func TestConsumer848KillRestart(t *testing.T) {
	restartScenario(t, func(b *Broker) { b.Kill(); b.Start() })
}

func restartScenario(t *testing.T, restart func(*Broker)) {
	b := StartBroker(t, consumer848Args)
	const topic, group = "kip848-restart", "kip848-survivors"
	adm := b.Admin()
	createTopic(t, adm, topic, 6, nil)
	createTopic(t, adm, "raw848", 2, nil)
	producedN(t, b, topic, 300)
	own := newOwners848(t)
	ms := []*member848{
		newMember848(t, b, own, "s0", group, false, kgo.ConsumeTopics(topic)),
		newMember848(t, b, own, "s1", group, false, kgo.ConsumeTopics(topic)),
	}
	before := waitConverged(t, adm, group, own, ms, converge848)
	checkAllRead(t, b, topic, ms, 30*time.Second)
	committed := waitCommitted(t, adm, group, 300)
	raw := newRawMember(t, b, "raw-848", "raw848")
	mark := own.mark()
	idents := clientIdents(ms)

	restart(b)
	raw.resume(t)
	checkOffsetsKept(t, adm, group, committed)
	producedN(t, b, topic, 300)
	checkAllRead(t, b, topic, ms, 30*time.Second)
	// kgo commits with its member id and epoch: the broker accepting them
	// means it still knows the members at those epochs.
	waitCommitted(t, adm, group, 600)
	checkResumed(t, adm, group, own, ms, before, idents, mark)
	// A member joining now needs the resumed members to heartbeat,
	// revoke and acknowledge: their sessions are live, not just loaded.
	joiner := newMember848(t, b, own, "s2", group, false, kgo.ConsumeTopics(topic))
	waitConverged(t, adm, group, own, append(ms, joiner), converge848)
	checkShares(t, own, append(ms, joiner), 2)
	for i, m := range ms {
		if id := m.memberID(); !strings.HasPrefix(idents[i], m.name+"="+id+"@") {
			t.Errorf("%s rejoined as %s (was %s)", m.name, id, idents[i])
		}
	}
	for _, e := range own.since(mark) {
		if e.kind == "lost" {
			t.Errorf("%s lost %v after the restart", e.member, e.parts)
		}
	}
}

// checkResumed: the group after the restart has the members, member
// epochs and group epoch of before, kgo still holds the ids and epochs
// idents, and no callback fired since mark.
func checkResumed(t *testing.T, adm *kadm.Client, group string, own *owners848, ms []*member848,
	before kadm.DescribedConsumerGroup, idents []string, mark int) {
	t.Helper()
	after := waitConverged(t, adm, group, own, ms, converge848)
	if why := sameMembers(before, after); why != "" {
		t.Errorf("members did not resume across the restart: %s", why)
	}
	if now := clientIdents(ms); !slices.Equal(now, idents) {
		t.Errorf("kgo's member ids and epochs changed across the restart: %v, then %v", idents, now)
	}
	for _, e := range own.since(mark) {
		t.Errorf("%s: %s %v across the restart", e.member, e.kind, e.parts)
	}
}

// clientIdents is each member's id and epoch as kgo holds them.
func clientIdents(ms []*member848) []string {
	var out []string
	for _, m := range ms {
		id, epoch := m.cl.GroupMetadata()
		out = append(out, fmt.Sprintf("%s=%s@%d", m.name, id, epoch))
	}
	return out
}

// checkOffsetsKept: OffsetFetch answers, with committed, after a restart.
func checkOffsetsKept(t *testing.T, adm *kadm.Client, group string, committed kadm.OffsetResponses) {
	t.Helper()
	testkit.WaitFor(t, 30*time.Second, "OffsetFetch after the restart", func() bool {
		fetched, err := adm.FetchOffsets(testCtx(t, 10*time.Second), group)
		if err != nil || fetched.Error() != nil {
			return false
		}
		if !offsetsEqual(committed, fetched) {
			t.Fatalf("committed offsets changed across the restart:\nbefore %v\nafter  %v", committed.Offsets(), fetched.Offsets())
		}
		return true
	})
}

// waitCommitted waits until group's committed offsets add up to total.
func waitCommitted(t *testing.T, adm *kadm.Client, group string, total int64) kadm.OffsetResponses {
	t.Helper()
	var fetched kadm.OffsetResponses
	testkit.WaitFor(t, 30*time.Second, fmt.Sprintf("%s's commits to cover %d records", group, total), func() bool {
		var err error
		fetched, err = adm.FetchOffsets(testCtx(t, 10*time.Second), group)
		var sum int64
		fetched.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return err == nil && fetched.Error() == nil && sum == total
	})
	return fetched
}

func offsetsEqual(a, b kadm.OffsetResponses) bool {
	n := 0
	equal := true
	a.Each(func(o kadm.OffsetResponse) {
		n++
		got, ok := b.Lookup(o.Topic, o.Partition)
		equal = equal && ok && got.At == o.At && got.LeaderEpoch == o.LeaderEpoch && got.Metadata == o.Metadata
	})
	m := 0
	b.Each(func(kadm.OffsetResponse) { m++ })
	return equal && n == m
}

// sameMembers: the same member ids with the same member epochs, and the
// same group epoch.
func sameMembers(before, after kadm.DescribedConsumerGroup) string {
	epochs := func(g kadm.DescribedConsumerGroup) map[string]int32 {
		out := map[string]int32{}
		for _, m := range g.Members {
			out[m.MemberID] = m.MemberEpoch
		}
		return out
	}
	b, a := epochs(before), epochs(after)
	if fmt.Sprint(b) != fmt.Sprint(a) || before.Epoch != after.Epoch {
		return fmt.Sprintf("before: group epoch %d, members %v; after: group epoch %d, members %v", before.Epoch, b, after.Epoch, a)
	}
	return ""
}

// rawMember heartbeats with kmsg requests, to check exactly what the
// broker answers to a member's id and epoch.
type rawMember struct {
	cl      *kgo.Client
	group   string
	id      string
	epoch   int32
	owned   []kmsg.ConsumerGroupHeartbeatRequestTopic
	topicID [16]byte
}

// newRawMember joins group subscribed to topic and acknowledges its
// assignment (every partition: it is alone).
func newRawMember(t *testing.T, b *Broker, group, topic string) *rawMember {
	t.Helper()
	r := &rawMember{cl: b.Client(), group: group, id: "raw-member-0123456789ab"}
	req := r.request(0)
	req.SubscribedTopicNames = []string{topic}
	req.RebalanceTimeoutMillis = 30000
	resp := r.heartbeat(t, req)
	if resp.ErrorCode != 0 || resp.MemberEpoch <= 0 || resp.Assignment == nil || len(resp.Assignment.Topics) != 1 {
		t.Fatalf("raw join: code %d (%v), epoch %d, assignment %+v", resp.ErrorCode, strPtr(resp.ErrorMessage), resp.MemberEpoch, resp.Assignment)
	}
	r.epoch = resp.MemberEpoch
	at := resp.Assignment.Topics[0]
	r.topicID = at.TopicID
	r.owned = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: at.TopicID, Partitions: at.Partitions}}
	ack := r.request(r.epoch)
	ack.Topics = r.owned
	if resp := r.heartbeat(t, ack); resp.ErrorCode != 0 || resp.MemberEpoch != r.epoch {
		t.Fatalf("raw ack: code %d (%v), epoch %d, want %d", resp.ErrorCode, strPtr(resp.ErrorMessage), resp.MemberEpoch, r.epoch)
	}
	return r
}

func (r *rawMember) request(epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = r.group, r.id, epoch
	req.RebalanceTimeoutMillis = -1
	return req
}

// heartbeat sends req, retrying while the coordinator is not ready.
func (r *rawMember) heartbeat(t *testing.T, req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := req.RequestWith(ctx, r.cl)
		cancel()
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
			if err == nil || !(errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.NotCoordinator)) {
				return resp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("raw heartbeat: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resume heartbeats after a restart with the old id and epoch: a full
// request reporting what it owns, then a keepalive; both must be accepted
// at the same epoch.
func (r *rawMember) resume(t *testing.T) {
	t.Helper()
	full := r.request(r.epoch)
	full.Topics = r.owned
	if resp := r.heartbeat(t, full); resp.ErrorCode != 0 || resp.MemberEpoch != r.epoch {
		t.Fatalf("raw heartbeat with id %s epoch %d after the restart: code %d (%v), epoch %d",
			r.id, r.epoch, resp.ErrorCode, strPtr(resp.ErrorMessage), resp.MemberEpoch)
	}
	if resp := r.heartbeat(t, r.request(r.epoch)); resp.ErrorCode != 0 || resp.MemberEpoch != r.epoch {
		t.Fatalf("raw keepalive after the restart: code %d (%v), epoch %d, want %d", resp.ErrorCode, strPtr(resp.ErrorMessage), resp.MemberEpoch, r.epoch)
	}
	leave := r.request(-1)
	if resp := r.heartbeat(t, leave); resp.ErrorCode != 0 {
		t.Fatalf("raw leave: code %d (%v)", resp.ErrorCode, strPtr(resp.ErrorMessage))
	}
}

func strPtr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestConsumer848WithClassic: a classic group (kgo's cooperative-sticky)
// and a consumer-protocol group read the same topic on one broker; both
// read every record, and ListGroups, DescribeGroups and
// ConsumerGroupDescribe tell the two kinds apart.
func TestConsumer848WithClassic(t *testing.T) {
	b := StartBroker(t, consumer848Args)
	const topic, classicGroup, newGroup = "kip848-mixed", "mixed-classic", "mixed-consumer"
	adm := b.Admin()
	createTopic(t, adm, topic, 4, nil)
	producedN(t, b, topic, 200)
	ownClassic, own848 := newOwners848(t), newOwners848(t)
	var classic, next []*member848
	for i := 0; i < 2; i++ {
		classic = append(classic, newMember848(t, b, ownClassic, fmt.Sprintf("c%d", i), classicGroup, true, kgo.ConsumeTopics(topic)))
		next = append(next, newMember848(t, b, own848, fmt.Sprintf("n%d", i), newGroup, false, kgo.ConsumeTopics(topic)))
	}
	waitConverged(t, adm, newGroup, own848, next, converge848)
	checkAllRead(t, b, topic, classic, 30*time.Second)
	checkAllRead(t, b, topic, next, 30*time.Second)
	waitCommitted(t, adm, classicGroup, 200)
	waitCommitted(t, adm, newGroup, 200)
	testkit.WaitFor(t, converge848, "the classic group to be Stable with both members", func() bool {
		d, err := adm.DescribeGroups(testCtx(t, 10*time.Second), classicGroup)
		return err == nil && d[classicGroup].State == "Stable" && len(d[classicGroup].Members) == 2
	})
	checkGroupKinds(t, adm, classicGroup, newGroup)
}

// checkGroupKinds: what ListGroups, DescribeGroups and ConsumerGroupDescribe
// say about a classic and a consumer-protocol group.
func checkGroupKinds(t *testing.T, adm *kadm.Client, classicGroup, newGroup string) {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("list groups: %v", err)
	}
	if l := listed[classicGroup]; l.GroupType != "classic" || l.ProtocolType != "consumer" || l.State != "Stable" {
		t.Errorf("ListGroups %s: %+v, want type classic, protocol type consumer, Stable", classicGroup, l)
	}
	if l := listed[newGroup]; l.GroupType != "consumer" || l.ProtocolType != "consumer" || l.State != "Stable" {
		t.Errorf("ListGroups %s: %+v, want type consumer, protocol type consumer, Stable", newGroup, l)
	}
	for typ, want := range map[string]string{"classic": classicGroup, "consumer": newGroup} {
		byType, err := adm.ListGroupsByType(ctx, []string{typ})
		if err != nil || !slices.Equal(byType.Groups(), []string{want}) {
			t.Errorf("ListGroups of type %s: %v %v, want [%s]", typ, err, byType.Groups(), want)
		}
	}
	described, err := adm.DescribeGroups(ctx, classicGroup, newGroup)
	if err != nil {
		t.Fatalf("describe groups: %v", err)
	}
	if d := described[classicGroup]; d.ProtocolType != "consumer" || d.Protocol != "cooperative-sticky" || len(d.Members) != 2 {
		t.Errorf("DescribeGroups %s: protocol type %q, protocol %q, %d members", classicGroup, d.ProtocolType, d.Protocol, len(d.Members))
	}
	if d := described[newGroup]; d.Err != nil || d.ProtocolType != "consumer" || d.State != "Stable" || len(d.Members) != 2 {
		t.Errorf("DescribeGroups %s: %v, protocol type %q, state %q, %d members", newGroup, d.Err, d.ProtocolType, d.State, len(d.Members))
	}
	if _, err := describe848(t, adm, classicGroup); !errors.Is(err, kerr.GroupIDNotFound) {
		t.Errorf("ConsumerGroupDescribe of the classic group: %v, want GROUP_ID_NOT_FOUND", err)
	}
	if g, err := describe848(t, adm, newGroup); err != nil || g.AssignorName != "uniform" || len(g.Members) != 2 {
		t.Errorf("ConsumerGroupDescribe %s: %v, assignor %q, %d members", newGroup, err, g.AssignorName, len(g.Members))
	}
}
