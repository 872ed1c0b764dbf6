package group

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/strata-log/strata/broker/coordinator/coordtest"
	"github.com/strata-log/strata/broker/group/consumer"
)

// topicSet is a mutable topic list for SetTopicMetadata.
type topicSet struct {
	mu     sync.Mutex
	topics map[consumer.TopicID]consumer.TopicMetadata
}

func (s *topicSet) add(id byte, name string, partitions int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topics == nil {
		s.topics = map[consumer.TopicID]consumer.TopicMetadata{}
	}
	s.topics[consumer.TopicID{id}] = consumer.TopicMetadata{ID: consumer.TopicID{id}, Name: name, Partitions: partitions}
}

func (s *topicSet) get() map[consumer.TopicID]consumer.TopicMetadata {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[consumer.TopicID]consumer.TopicMetadata{}
	for k, v := range s.topics {
		out[k] = v
	}
	return out
}

func consumerCoordinator(t *testing.T, log *coordtest.MemLog, topics *topicSet, session int64) *Coordinator {
	t.Helper()
	c, err := New(Config{
		OffsetsTopicPartitions: 1, InitialRebalanceDelay: time.Millisecond, TickInterval: 5 * time.Millisecond,
		Consumer: consumer.Config{SessionTimeoutMs: session, HeartbeatIntervalMs: 10},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	c.SetTopicMetadata(topics.get)
	c.Start()
	t.Cleanup(c.Close)
	c.BecomeLeader(0, log)
	waitLoaded(t, c, "cg")
	return c
}

func join(id string, topics ...string) consumer.HeartbeatRequest {
	return consumer.HeartbeatRequest{MemberID: id, MemberEpoch: 0, RebalanceTimeoutMs: 5000,
		SubscribedTopicNames: append([]string{}, topics...), ClientID: "c"}
}

func hb(t *testing.T, c *Coordinator, req consumer.HeartbeatRequest) consumer.HeartbeatResponse {
	t.Helper()
	res := c.ConsumerHeartbeat("cg", req)
	if res.Code != 0 {
		t.Fatalf("heartbeat %+v: code %d %s", req, res.Code, res.Message)
	}
	return res.Response
}

func owned(a *consumer.Assignment) []consumer.TopicPartitions {
	if a == nil {
		return []consumer.TopicPartitions{}
	}
	return a.List()
}

func TestConsumerGroupHeartbeatPersistedAndReloaded(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 4)
	c := consumerCoordinator(t, log, topics, 30000)
	a := hb(t, c, join("a", "t"))
	if a.MemberEpoch != 1 || a.Assignment == nil || a.Assignment.Len() != 4 {
		t.Fatalf("first join: %+v", a)
	}
	b := hb(t, c, join("b", "t"))
	if b.MemberEpoch != 2 || b.Assignment.Len() != 0 { // a still owns everything
		t.Fatalf("second join: %+v", b)
	}
	// a learns of the revocation, acknowledges it; b then gets its share.
	ra := hb(t, c, consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeoutMs: -1, Owned: owned(a.Assignment)})
	if ra.Assignment == nil || ra.Assignment.Len() != 2 {
		t.Fatalf("a after b joined: %+v", ra)
	}
	ra = hb(t, c, consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: ra.MemberEpoch, RebalanceTimeoutMs: -1, Owned: owned(ra.Assignment)})
	rb := hb(t, c, consumer.HeartbeatRequest{MemberID: "b", MemberEpoch: b.MemberEpoch, RebalanceTimeoutMs: -1, Owned: []consumer.TopicPartitions{}})
	if rb.MemberEpoch != 2 || rb.Assignment == nil || rb.Assignment.Len() != 2 {
		t.Fatalf("b after a revoked: %+v", rb)
	}
	before, code := c.ConsumerDescribe("cg")
	if code != 0 || len(before.Members) != 2 || before.Epoch != 2 {
		t.Fatalf("describe: %+v %d", before, code)
	}

	// A restarted coordinator replays the records from the log.
	c2 := consumerCoordinator(t, log, topics, 30000)
	after, code := c2.ConsumerDescribe("cg")
	if code != 0 || after.Epoch != before.Epoch || len(after.Members) != 2 {
		t.Fatalf("describe after reload: %+v %d", after, code)
	}
	for i, m := range after.Members {
		w := before.Members[i]
		if m.MemberID != w.MemberID || m.MemberEpoch != w.MemberEpoch || !m.Assignment.Equal(w.Assignment) ||
			!m.TargetAssignment.Equal(w.TargetAssignment) {
			t.Fatalf("member %d after reload %+v, before %+v", i, m, w)
		}
	}
	// b resumes with its epoch on the new coordinator.
	r := c2.ConsumerHeartbeat("cg", consumer.HeartbeatRequest{MemberID: "b", MemberEpoch: 2, RebalanceTimeoutMs: -1})
	if r.Code != 0 || r.Response.MemberEpoch != 2 {
		t.Fatalf("b on the reloaded coordinator: %+v", r)
	}
}

func TestConsumerHeartbeatWaitsForDurability(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c := consumerCoordinator(t, log, topics, 30000)
	log.HoldHW()
	done := make(chan ConsumerHeartbeatResult, 1)
	go func() { done <- c.ConsumerHeartbeat("cg", join("a", "t")) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("answered before durable: %+v", r)
	default:
	}
	log.Release()
	if r := <-done; r.Code != 0 || r.Response.MemberEpoch != 1 {
		t.Fatalf("after durable: %+v", r)
	}
}

func TestConsumerAndClassicGroupsExclusive(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c := consumerCoordinator(t, log, topics, 30000)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in := JoinInput{Group: "classic", ClientID: "c", ProtocolType: "consumer", MemberID: "",
		Protocols: []Protocol{{Name: "range", Metadata: []byte("m")}}, SessionTimeoutMs: 6000, RebalanceTimeoutMs: 6000}
	if j := c.Join(ctx, in); j.Code != 0 {
		t.Fatalf("classic join: %+v", j)
	}
	if r := c.ConsumerHeartbeat("classic", join("x", "t")); r.Code != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer heartbeat on a classic group: %+v", r)
	}
	if _, code := c.ConsumerDescribe("classic"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("consumer describe of a classic group: %d", code)
	}
	hb(t, c, join("a", "t"))
	in.Group = "cg"
	if j := c.Join(ctx, in); j.Code != kerr.InconsistentGroupProtocol.Code {
		t.Fatalf("classic join of a consumer group: %+v", j)
	}
	if r := hb(t, c, consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: consumer.LeaveEpoch, RebalanceTimeoutMs: -1}); r.MemberEpoch != consumer.LeaveEpoch {
		t.Fatalf("leave: %+v", r)
	}
	// Empty now: the classic join converts it, and a reload does not bring it back.
	if j := c.Join(ctx, in); j.Code != 0 {
		t.Fatalf("classic join of an empty consumer group: %+v", j)
	}
	c2 := consumerCoordinator(t, log, topics, 30000)
	if _, code := c2.ConsumerDescribe("cg"); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("deleted consumer group after reload: %d", code)
	}
}

func TestConsumerGroupOffsetCommitChecksEpoch(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c := consumerCoordinator(t, log, topics, 30000)
	r := hb(t, c, join("a", "t"))
	offs := map[TopicPartition]Offset{{"t", 0}: {Offset: 5}}
	for _, tc := range []struct {
		gen    int32
		member string
		want   int16
	}{
		{r.MemberEpoch + 1, "a", kerr.StaleMemberEpoch.Code},
		{r.MemberEpoch, "nobody", kerr.UnknownMemberID.Code},
		{-1, "", kerr.UnknownMemberID.Code}, // the group has members
		{r.MemberEpoch, "a", 0},
	} {
		if code := c.Commit(CommitInput{Group: "cg", Generation: tc.gen, Member: MemberRef{MemberID: tc.member}, Offsets: offs}); code != tc.want {
			t.Errorf("commit gen %d member %q: %d, want %d", tc.gen, tc.member, code, tc.want)
		}
	}
	if got, _ := c.FetchOffsets("cg", nil); got[TopicPartition{"t", 0}].Offset != 5 {
		t.Fatalf("offsets: %v", got)
	}
	// TxnOffsetCommit has no STALE_MEMBER_EPOCH: Kafka answers ILLEGAL_GENERATION.
	txn := TxnCommitInput{Group: "cg", ProducerID: 7, Generation: r.MemberEpoch + 1, Member: MemberRef{MemberID: "a"}, Offsets: offs}
	if code := c.TxnCommit(context.Background(), txn); code != kerr.IllegalGeneration.Code {
		t.Fatalf("transactional commit at a stale epoch: %d, want ILLEGAL_GENERATION", code)
	}
}

func TestConsumerRegexPicksUpNewTopics(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "events-a", 2)
	topics.add(2, "other", 2)
	c := consumerCoordinator(t, log, topics, 30000)
	re := "events-.*"
	req := consumer.HeartbeatRequest{MemberID: "a", RebalanceTimeoutMs: 5000, SubscribedTopicRegex: &re}
	r := hb(t, c, req)
	if r.Assignment == nil || r.Assignment.Len() != 2 {
		t.Fatalf("join by regex: %+v", r)
	}
	topics.add(3, "events-b", 3)
	r = hb(t, c, consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: r.MemberEpoch, RebalanceTimeoutMs: -1, Owned: owned(r.Assignment)})
	if r.Assignment == nil || r.Assignment.Len() != 5 {
		t.Fatalf("after events-b was created: %+v", r)
	}
	bad := "("
	if res := c.ConsumerHeartbeat("cg", consumer.HeartbeatRequest{MemberID: "b", RebalanceTimeoutMs: 5000, SubscribedTopicRegex: &bad}); res.Code != kerr.InvalidRegularExpression.Code {
		t.Fatalf("invalid regex: %+v", res)
	}
}

// An internal topic goes to a member whose regex names it literally, never
// to a broad regex, as in Kafka 4.
func TestConsumerRegexAndInternalTopics(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "events", 2)
	topics.mu.Lock()
	topics.topics[consumer.TopicID{9}] = consumer.TopicMetadata{ID: consumer.TopicID{9}, Name: "__consumer_offsets", Partitions: 3, Internal: true}
	topics.mu.Unlock()
	c := consumerCoordinator(t, log, topics, 30000)
	for _, tc := range []struct {
		group, regex string
		want         int
	}{
		{"broad", ".*", 2},
		{"underscore", "__.*", 0},
		{"named", "__consumer_offsets", 3},
		{"branch", "events|__consumer_offsets", 5},
		{"grouped", "(__consumer_offsets)", 3},
	} {
		re := tc.regex
		res := c.ConsumerHeartbeat(tc.group, consumer.HeartbeatRequest{MemberID: "m", RebalanceTimeoutMs: 5000, SubscribedTopicRegex: &re})
		if res.Code != 0 {
			t.Fatalf("%s: %+v", tc.regex, res)
		}
		got := 0
		if a := res.Response.Assignment; a != nil {
			got = a.Len()
		}
		if got != tc.want {
			t.Errorf("regex %q: %d partitions assigned, want %d", tc.regex, got, tc.want)
		}
	}
}

func TestConsumerSessionExpiresByTick(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c := consumerCoordinator(t, log, topics, 100)
	hb(t, c, join("a", "t"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		d, _ := c.ConsumerDescribe("cg")
		if len(d.Members) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("member never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := c.ConsumerHeartbeat("cg", consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: 1, RebalanceTimeoutMs: -1}); r.Code != kerr.UnknownMemberID.Code {
		t.Fatalf("expired member's heartbeat: %+v", r)
	}
}

func TestConsumerGroupListAndDelete(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c := consumerCoordinator(t, log, topics, 30000)
	hb(t, c, join("a", "t"))
	if l, code := c.ListConsumer(); code != 0 || len(l) != 1 || l[0].Group != "cg" || l[0].State != consumer.GroupStable {
		t.Fatalf("list: %+v %d", l, code)
	}
	if code := c.DeleteGroup("cg"); code != kerr.NonEmptyGroup.Code {
		t.Fatalf("delete of a group with members: %d", code)
	}
	hb(t, c, consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: consumer.LeaveEpoch, RebalanceTimeoutMs: -1})
	if code := c.DeleteGroup("cg"); code != 0 {
		t.Fatalf("delete of an empty group: %d", code)
	}
	if l, _ := c.ListConsumer(); len(l) != 0 || c.IsConsumerGroup("cg") {
		t.Fatalf("listed after delete: %+v", l)
	}
	c2 := consumerCoordinator(t, log, topics, 30000)
	if c2.IsConsumerGroup("cg") {
		t.Fatal("deleted group back after reload")
	}
}

func TestConsumerGroupLoadSkipsCorruptRecords(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 2)
	// A member record of another group whose value is garbage.
	key := []byte{0, 5, 0, 3, 'b', 'a', 'd', 0, 1, 'm'}
	if _, err := log.Append(EncodeBatch([]Record{{Kind: KindConsumer, Group: "bad", Key: key, Value: []byte{0, 0, 0xff, 0xff}}}, 0)); err != nil {
		t.Fatal(err)
	}
	c := consumerCoordinator(t, log, topics, 30000)
	r := hb(t, c, join("a", "t"))
	c2 := consumerCoordinator(t, log, topics, 30000)
	if c2.IsConsumerGroup("bad") {
		t.Fatal("a group from an undecodable record")
	}
	d, code := c2.ConsumerDescribe("cg")
	if code != 0 || len(d.Members) != 1 || d.Members[0].MemberEpoch != r.MemberEpoch || d.Members[0].Assignment.Len() != 2 {
		t.Fatalf("group after a load with a corrupt record: %+v %d", d, code)
	}
}

func TestConsumerGroupOffsetsKeptWhileMembers(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c, err := New(Config{OffsetsTopicPartitions: 1, TickInterval: 5 * time.Millisecond, OffsetsRetention: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	c.SetTopicMetadata(topics.get)
	c.Start()
	t.Cleanup(c.Close)
	c.BecomeLeader(0, log)
	waitLoaded(t, c, "cg")
	r := hb(t, c, join("a", "t"))
	if code := c.Commit(CommitInput{Group: "cg", Generation: r.MemberEpoch, Member: MemberRef{MemberID: "a"},
		Offsets: map[TopicPartition]Offset{{"t", 0}: {Offset: 9}}}); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	time.Sleep(10 * time.Millisecond)
	c.expire("")
	if got, _ := c.FetchOffsets("cg", nil); got[TopicPartition{"t", 0}].Offset != 9 {
		t.Fatalf("offsets of a group with members expired: %v", got)
	}
	hb(t, c, consumer.HeartbeatRequest{MemberID: "a", MemberEpoch: consumer.LeaveEpoch, RebalanceTimeoutMs: -1})
	if !c.IsConsumerGroup("cg") {
		t.Fatal("an empty group with offsets deleted")
	}
	time.Sleep(10 * time.Millisecond)
	c.expire("")
	if got, _ := c.FetchOffsets("cg", nil); len(got) != 0 {
		t.Fatalf("offsets of an empty group kept past retention: %v", got)
	}
	// Empty and offset-less: the group itself is deleted, also on reload.
	if c.IsConsumerGroup("cg") {
		t.Fatal("an empty consumer group without offsets kept")
	}
	c2 := consumerCoordinator(t, log, topics, 30000)
	if c2.IsConsumerGroup("cg") {
		t.Fatal("expired consumer group back after reload")
	}
}

// TestConsumerGroupOffsetFetchChecksMember: OffsetFetch v9's member id and
// epoch are checked in a consumer group; admin fetches (no member, epoch
// -1) and classic groups are not.
func TestConsumerGroupOffsetFetchChecksMember(t *testing.T) {
	log, topics := coordtest.NewMemLog(), &topicSet{}
	topics.add(1, "t", 1)
	c := consumerCoordinator(t, log, topics, 30000)
	r := hb(t, c, join("a", "t"))
	if code := c.Commit(CommitInput{Group: "cg", Generation: r.MemberEpoch, Member: MemberRef{MemberID: "a"},
		Offsets: map[TopicPartition]Offset{{"t", 0}: {Offset: 7}}}); code != 0 {
		t.Fatalf("commit: %d", code)
	}
	a, nobody := "a", "nobody"
	for _, tc := range []struct {
		member *string
		epoch  int32
		want   int16
	}{
		{nil, -1, 0},
		{&a, r.MemberEpoch, 0},
		{&a, r.MemberEpoch + 1, kerr.StaleMemberEpoch.Code},
		{&nobody, r.MemberEpoch, kerr.UnknownMemberID.Code},
		{nil, r.MemberEpoch, kerr.UnknownMemberID.Code},
	} {
		got, code := c.FetchOffsetsAs("cg", nil, tc.member, tc.epoch)
		if code != tc.want || (code == 0 && got[TopicPartition{"t", 0}].Offset != 7) {
			t.Errorf("fetch as %v epoch %d: %v code %d, want code %d", tc.member, tc.epoch, got, code, tc.want)
		}
	}
	if _, code := c.FetchOffsetsAs("classic-or-unknown", nil, &nobody, 3); code != 0 {
		t.Fatalf("a group that is not a consumer group checked members: %d", code)
	}
}
