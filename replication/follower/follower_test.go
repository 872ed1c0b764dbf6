package follower

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/internal/testkit"
	"github.com/strata-log/strata/metadata"
	"github.com/strata-log/strata/recordbatch"
	"github.com/strata-log/strata/replication"
	"github.com/strata-log/strata/replication/peer"
)

// Unit tests of the followers against an in-process fake leader (a
// hotlog answering Fetch, OffsetForLeaderEpoch and ListOffsets) and a test
// replica shell (real replication.Replica per partition), so they need
// neither the network nor a broker.

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// testPartition is a followed partition over a real log.
type testPartition struct {
	topic   string
	topicID metadata.TopicID
	index   int32
	log     *hotlog.Log
}

var _ Partition = (*testPartition)(nil)

func (p *testPartition) Topic() string             { return p.topic }
func (p *testPartition) TopicID() metadata.TopicID { return p.topicID }
func (p *testPartition) Index() int32              { return p.index }
func (p *testPartition) Log() Log                  { return p.log }

// testShell stands in for the broker's replica shell: one mutex for all
// partitions, Ready carried out in doc order.
type testShell struct {
	mu       sync.Mutex
	m        *Manager
	replicas map[*testPartition]*replication.Replica
}

var _ Replicas = (*testShell)(nil)

func (s *testShell) WithReplica(fp Partition, fn func(r *replication.Replica) error) error {
	p := fp.(*testPartition)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.replicas[p]
	err := fn(r)
	for r != nil && r.HasReady() {
		rd := r.Ready()
		if rd.Truncate != nil {
			if terr := p.log.Truncate(rd.Truncate.Offset); terr != nil {
				panic(terr)
			}
		}
		if rd.EpochQuery != nil {
			s.m.Query(p, *rd.EpochQuery)
		}
		if rd.Fetch != nil {
			s.m.Follow(p, *rd.Fetch)
		}
		r.Advance(rd)
	}
	return err
}

// fakeLeader is a leader broker in-process: a peer.Client answering from
// its own logs. Its methods are safe for concurrent use.
type fakeLeader struct {
	mu       sync.Mutex
	parts    map[string]*fakeLeaderPartition // by topic name
	fetches  []*kmsg.FetchRequest
	closed   int
	failures []string // assertion failures seen while answering
}

type fakeLeaderPartition struct {
	log    *hotlog.Log
	id     metadata.TopicID
	epoch  int32
	inject int16          // error code every fetch of it gets (0: none)
	follow *testPartition // the follower's replica, to check fsync ordering
}

var _ peer.Client = (*fakeLeader)(nil)

func (l *fakeLeader) Close() {
	l.mu.Lock()
	l.closed++
	l.mu.Unlock()
}

func (l *fakeLeader) Request(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	switch req := req.(type) {
	case *kmsg.FetchRequest:
		return l.answerFetch(ctx, req)
	case *kmsg.OffsetForLeaderEpochRequest:
		return l.answerEpoch(req), nil
	case *kmsg.ListOffsetsRequest:
		return l.answerListOffsets(req), nil
	}
	return nil, errors.New("fake leader: unexpected request")
}

func (l *fakeLeader) answerFetch(ctx context.Context, req *kmsg.FetchRequest) (kmsg.Response, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fetches = append(l.fetches, req)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	if req.ReplicaID != 1 || req.ReplicaState.ID != 1 || req.MaxBytes <= 0 {
		l.failures = append(l.failures, "fetch without the follower's replica id or a byte limit")
	}
	data := false
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.TopicID = rt.TopicID // v13+: by id only
		lp := l.parts[rt.Topic]
		for _, rp := range rt.Partitions {
			sp := l.fetchPartition(lp, rp)
			data = data || len(sp.RecordBatches) > 0
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !data { // a short long-poll, so idle followers do not spin
		l.mu.Unlock()
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
		}
		l.mu.Lock()
	}
	return resp, nil
}

func (l *fakeLeader) fetchPartition(lp *fakeLeaderPartition, rp kmsg.FetchRequestTopicPartition) kmsg.FetchResponseTopicPartition {
	sp := kmsg.NewFetchResponseTopicPartition()
	sp.Partition, sp.HighWatermark = rp.Partition, -1
	switch {
	case lp == nil:
		sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
	case lp.inject != 0:
		sp.ErrorCode = lp.inject
	case rp.CurrentLeaderEpoch < lp.epoch:
		sp.ErrorCode = kerr.FencedLeaderEpoch.Code
	case rp.CurrentLeaderEpoch > lp.epoch:
		sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
	case rp.FetchOffset < lp.log.LogStartOffset():
		sp.ErrorCode = kerr.OffsetMovedToTieredStorage.Code
	case rp.FetchOffset > lp.log.LogEndOffset():
		sp.ErrorCode = kerr.OffsetOutOfRange.Code
	}
	if sp.ErrorCode != 0 {
		return sp
	}
	if lp.follow != nil && lp.follow.log.FlushedOffset() < rp.FetchOffset {
		l.failures = append(l.failures, "fetch offset above the follower's flushed offset")
	}
	records, err := lp.log.Read(rp.FetchOffset, int(rp.PartitionMaxBytes), lp.log.LogEndOffset())
	if err != nil {
		sp.ErrorCode = kerr.UnknownServerError.Code
		return sp
	}
	sp.RecordBatches, sp.HighWatermark = records, lp.log.LogEndOffset()
	sp.LogStartOffset = lp.log.LogStartOffset()
	return sp
}

func (l *fakeLeader) answerEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	if req.ReplicaID != 1 {
		l.failures = append(l.failures, "epoch query without the follower's replica id")
	}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		lp := l.parts[rt.Topic]
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case rp.CurrentLeaderEpoch != lp.epoch:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			case rp.LeaderEpoch == lp.epoch:
				sp.LeaderEpoch, sp.EndOffset = lp.epoch, lp.log.LogEndOffset()
			default:
				sp.LeaderEpoch, sp.EndOffset = lp.log.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

func (l *fakeLeader) answerListOffsets(req *kmsg.ListOffsetsRequest) kmsg.Response {
	l.mu.Lock()
	defer l.mu.Unlock()
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			if rp.Timestamp != earliestLocalTimestamp || req.ReplicaID != 1 {
				l.failures = append(l.failures, "list offsets other than earliest-local as replica 1")
			}
			sp.Offset = l.parts[rt.Topic].log.LogStartOffset()
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// fetchesOf counts the fetches so far that asked for topic.
func (l *fakeLeader) fetchesOf(topic string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, req := range l.fetches {
		for _, rt := range req.Topics {
			if rt.Topic == topic {
				n++
			}
		}
	}
	return n
}

func (l *fakeLeader) set(topic string, edit func(lp *fakeLeaderPartition)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	edit(l.parts[topic])
}

func (l *fakeLeader) check(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.failures {
		t.Error("fake leader: " + f)
	}
}

// followerRig is a follower (node 1) with a Manager wired to fake leaders
// by node id, and a test shell.
type followerRig struct {
	m       *Manager
	shell   *testShell
	leaders map[int32]*fakeLeader
	dials   map[int32]int // guarded by dialMu
	dialMu  sync.Mutex
}

// Address and Dial make the rig the Manager's Peers.
func (rig *followerRig) Address(node int32) string {
	if _, ok := rig.leaders[node]; ok {
		return "fake"
	}
	return ""
}

func (rig *followerRig) Dial(node int32, addr string) (peer.Client, error) {
	rig.dialMu.Lock()
	defer rig.dialMu.Unlock()
	rig.dials[node]++
	return rig.leaders[node], nil
}

func newFollowerRig(t *testing.T, leaders map[int32]*fakeLeader) *followerRig {
	rig := &followerRig{leaders: leaders, dials: map[int32]int{}}
	rig.shell = &testShell{replicas: map[*testPartition]*replication.Replica{}}
	rig.m = New(Config{NodeID: 1, MaxWait: 50 * time.Millisecond, Replicas: rig.shell, Peers: rig, Logger: discardLogger})
	rig.shell.m = rig.m
	t.Cleanup(rig.m.Close)
	return rig
}

// followerPartition opens a follower replica of topic over a new log.
func (rig *followerRig) followerPartition(t *testing.T, topic string, id metadata.TopicID, durability hotlog.Durability) *testPartition {
	t.Helper()
	l, err := hotlog.Open(hotlog.Config{Dir: t.TempDir(), SegmentBytes: 4096, Durability: durability, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &testPartition{topic: topic, topicID: id, index: 0, log: l}
	r, err := replication.New(replication.Config{ReplicaID: 1, FsyncDurability: durability == hotlog.DurabilityFsync}, l)
	if err != nil {
		t.Fatal(err)
	}
	rig.shell.mu.Lock()
	rig.shell.replicas[p] = r
	rig.shell.mu.Unlock()
	return p
}

// becomeFollower feeds the controller's state (epoch, leader) to p.
func (rig *followerRig) becomeFollower(t *testing.T, p *testPartition, epoch, leader int32) {
	t.Helper()
	err := rig.shell.WithReplica(p, func(r *replication.Replica) error {
		return r.BecomeFollower(replication.FollowerState{Epoch: epoch, Leader: leader, LEO: p.log.LogEndOffset()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func (rig *followerRig) status(p *testPartition) replication.Status {
	rig.shell.mu.Lock()
	defer rig.shell.mu.Unlock()
	return rig.shell.replicas[p].Status()
}

// leaderLog opens a leader log and appends batches of the given epochs
// (3 records each; the timestamp tags each batch's content).
func leaderLog(t *testing.T, epochs ...int32) *hotlog.Log {
	t.Helper()
	l, err := hotlog.Open(hotlog.Config{Dir: t.TempDir(), SegmentBytes: 4096, Durability: hotlog.DurabilityReplication, Logger: discardLogger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	appendEpochs(t, l, 0, epochs...)
	return l
}

func appendEpochs(t *testing.T, l *hotlog.Log, tag int64, epochs ...int32) {
	t.Helper()
	for i, e := range epochs {
		if _, err := l.Append(buildBatch(batchSpec{records: 3, valueSize: 20, timestamp: tag + int64(i)}), e); err != nil {
			t.Fatal(err)
		}
	}
}

// sameLog fails unless a and b hold the same bytes from offset from on.
func sameLog(t *testing.T, a, b *hotlog.Log, from int64) {
	t.Helper()
	if a.LogEndOffset() != b.LogEndOffset() {
		t.Fatalf("log ends differ: %d vs %d", a.LogEndOffset(), b.LogEndOffset())
	}
	for off := from; off < a.LogEndOffset(); {
		x, err1 := a.Read(off, 1, a.LogEndOffset())
		y, err2 := b.Read(off, 1, b.LogEndOffset())
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) || len(x) == 0 {
			t.Fatalf("logs differ at %d: %v %v", off, err1, err2)
		}
		h, _ := recordbatch.ParseHeader(x)
		off = h.LastOffset() + 1
	}
}

var testTopicID = metadata.TopicID{1, 2, 3}

func TestFollowerReplicatesAndTruncatesDivergentSuffix(t *testing.T) {
	for _, durability := range []hotlog.Durability{hotlog.DurabilityReplication, hotlog.DurabilityFsync} {
		leader := &fakeLeader{parts: map[string]*fakeLeaderPartition{}}
		rig := newFollowerRig(t, map[int32]*fakeLeader{2: leader})
		p := rig.followerPartition(t, "t", testTopicID, durability)
		// Common history: epoch 1 at 0..8. The follower then holds an
		// epoch-1 suffix the leader never had (9..17, tagged 100+); the
		// leader wrote epoch 3 from 9 on.
		appendEpochs(t, p.log, 0, 1, 1, 1)
		appendEpochs(t, p.log, 100, 1, 1, 1)
		ll := leaderLog(t, 1, 1, 1, 3, 3, 3, 3)
		leader.parts["t"] = &fakeLeaderPartition{log: ll, id: testTopicID, epoch: 3, follow: p}

		rig.becomeFollower(t, p, 3, 2)
		testkit.WaitFor(t, 20*time.Second, "the follower to catch up", func() bool {
			return p.log.LogEndOffset() == ll.LogEndOffset() && rig.status(p).HighWatermark == ll.LogEndOffset()
		})
		sameLog(t, ll, p.log, 0)
		if e, end := p.log.EndOffsetForEpoch(1); e != 1 || end != 9 {
			t.Fatalf("follower's epoch 1 ends at (%d, %d), want (1, 9): divergent suffix kept", e, end)
		}
		// New leader data keeps flowing.
		appendEpochs(t, ll, 200, 3, 3)
		testkit.WaitFor(t, 20*time.Second, "new data", func() bool { return p.log.LogEndOffset() == ll.LogEndOffset() })
		sameLog(t, ll, p.log, 0)
		if durability == hotlog.DurabilityFsync {
			// The flush of the last fetched batches may still be running.
			testkit.WaitFor(t, 20*time.Second, "the fsync follower to flush what it fetched", func() bool {
				return p.log.FlushedOffset() == p.log.LogEndOffset()
			})
		}
		leader.check(t)
		rig.m.Close()
	}
}

func TestFollowerResetsToLeaderLocalStart(t *testing.T) {
	leader := &fakeLeader{parts: map[string]*fakeLeaderPartition{}}
	rig := newFollowerRig(t, map[int32]*fakeLeader{2: leader})
	p := rig.followerPartition(t, "t", testTopicID, hotlog.DurabilityReplication)
	appendEpochs(t, p.log, 0, 1) // a stale follower at 3; the leader's disk starts at 600
	ll := leaderLog(t)
	if err := ll.ResetTo(600); err != nil {
		t.Fatal(err)
	}
	appendEpochs(t, ll, 0, 1, 2, 2)
	leader.parts["t"] = &fakeLeaderPartition{log: ll, id: testTopicID, epoch: 2}

	rig.becomeFollower(t, p, 2, 2)
	testkit.WaitFor(t, 20*time.Second, "the follower to catch up", func() bool { return p.log.LogEndOffset() == ll.LogEndOffset() })
	if p.log.LogStartOffset() != 600 {
		t.Fatalf("follower log starts at %d, want the leader's local start 600", p.log.LogStartOffset())
	}
	sameLog(t, ll, p.log, 600)
	testkit.WaitFor(t, 20*time.Second, "the HW", func() bool { return rig.status(p).HighWatermark == ll.LogEndOffset() })
	leader.check(t)
	if st := rig.m.Stats(); st.Resets != 1 || st.AppendedBytes != ll.Size() || st.Peers != 1 || st.Partitions != 1 ||
		st.EpochQueries != 1 {
		t.Fatalf("stats %+v: want 1 reset, 1 epoch query, %d bytes appended, 1 peer and partition", st, ll.Size())
	}
}

func TestFollowerPausesWhenFencedAndRetriesNotLeader(t *testing.T) {
	leader := &fakeLeader{parts: map[string]*fakeLeaderPartition{}}
	rig := newFollowerRig(t, map[int32]*fakeLeader{2: leader})
	p := rig.followerPartition(t, "t", testTopicID, hotlog.DurabilityReplication)
	ll := leaderLog(t, 4, 4)
	leader.parts["t"] = &fakeLeaderPartition{log: ll, id: testTopicID, epoch: 5}

	// The follower's epoch 4 is stale: FENCED, so it pauses.
	rig.becomeFollower(t, p, 4, 2)
	testkit.WaitFor(t, 20*time.Second, "a fenced fetch", func() bool { return leader.fetchesOf("t") >= 1 })
	time.Sleep(300 * time.Millisecond)
	if n := leader.fetchesOf("t"); n != 1 {
		t.Fatalf("%d fetches after FENCED_LEADER_EPOCH; want 1 (paused)", n)
	}
	// NOT_LEADER_OR_FOLLOWER (the leader has not applied the state yet):
	// retried with back-off until it clears.
	leader.set("t", func(lp *fakeLeaderPartition) { lp.inject = kerr.NotLeaderForPartition.Code })
	rig.becomeFollower(t, p, 5, 2)
	testkit.WaitFor(t, 20*time.Second, "retries", func() bool { return leader.fetchesOf("t") >= 4 })
	if p.log.LogEndOffset() != 0 {
		t.Fatal("appended while the leader refused")
	}
	leader.set("t", func(lp *fakeLeaderPartition) { lp.inject = 0 })
	testkit.WaitFor(t, 20*time.Second, "the follower to catch up", func() bool { return p.log.LogEndOffset() == ll.LogEndOffset() })
	sameLog(t, ll, p.log, 0)
	leader.check(t)
}

func TestFollowerBookkeeping(t *testing.T) {
	leaders := map[int32]*fakeLeader{2: {parts: map[string]*fakeLeaderPartition{}}, 3: {parts: map[string]*fakeLeaderPartition{}}}
	for _, l := range leaders {
		l.parts["a"] = &fakeLeaderPartition{log: leaderLog(t), epoch: 1}
		l.parts["b"] = &fakeLeaderPartition{log: leaderLog(t), epoch: 1}
	}
	rig := newFollowerRig(t, leaders)
	m := rig.m
	pa := rig.followerPartition(t, "a", metadata.TopicID{1}, hotlog.DurabilityReplication)
	pb := rig.followerPartition(t, "b", metadata.TopicID{2}, hotlog.DurabilityReplication)
	peers := func() map[int32]int {
		m.mu.Lock()
		defer m.mu.Unlock()
		out := map[int32]int{}
		for id, lf := range m.mu.leaders {
			out[id] = len(lf.tasks)
		}
		return out
	}
	m.Follow(pa, replication.FetchStart{Leader: 2, Epoch: 1})
	m.Follow(pb, replication.FetchStart{Leader: 2, Epoch: 1})
	if got := peers(); len(got) != 1 || got[2] != 2 {
		t.Fatalf("peers %v, want one leaderFollower for leader 2 with both partitions", got)
	}
	testkit.WaitFor(t, 20*time.Second, "both partitions fetched from 2", func() bool { return leaders[2].fetchesOf("a") > 0 && leaders[2].fetchesOf("b") > 0 })

	// A leader change moves the partition; a stale snapshot stops applying.
	m.mu.Lock()
	stale := taskSnapshot{p: pa, gen: m.mu.tasks[pa].gen}
	m.mu.Unlock()
	m.Query(pa, replication.EpochQuery{Leader: 3, CurrentEpoch: 2, Epoch: 1})
	if got := peers(); len(got) != 2 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("peers %v after the leader change", got)
	}
	if m.isCurrent(stale) {
		t.Fatal("a task replaced by query is still current")
	}
	m.mu.Lock()
	if q := m.mu.tasks[pa].query; q == nil || q.Epoch != 1 || m.mu.tasks[pa].epoch != 2 {
		t.Fatalf("task after query: %+v", m.mu.tasks[pa])
	}
	m.mu.Unlock()

	// The last partition of a leader stops: its leaderFollower exits and closes its client.
	m.Stop(pb)
	if got := peers(); len(got) != 1 || got[3] != 1 {
		t.Fatalf("peers %v after stop", got)
	}
	testkit.WaitFor(t, 20*time.Second, "leader 2's client closed", func() bool {
		leaders[2].mu.Lock()
		defer leaders[2].mu.Unlock()
		return leaders[2].closed == 1
	})
	// Invalid leaders are refused without a leaderFollower.
	m.Follow(pb, replication.FetchStart{Leader: 1, Epoch: 1})
	m.Follow(pb, replication.FetchStart{Leader: -1, Epoch: 1})
	if got := peers(); len(got) != 1 {
		t.Fatalf("peers %v after invalid leaders", got)
	}
	m.Close()
	if got := peers(); len(got) != 0 {
		t.Fatalf("peers %v after close", got)
	}
	m.Follow(pa, replication.FetchStart{Leader: 2, Epoch: 1})
	if got := peers(); len(got) != 0 {
		t.Fatalf("follow after close started a leaderFollower: %v", got)
	}
	leaders[3].mu.Lock()
	defer leaders[3].mu.Unlock()
	if leaders[3].closed != 1 {
		t.Fatalf("leader 3's client closed %d times", leaders[3].closed)
	}
}

func TestReplicaBatches(t *testing.T) {
	b0 := buildBatch(batchSpec{records: 3, valueSize: 5})
	b1 := buildBatch(batchSpec{records: 2, valueSize: 5})
	b2 := buildBatch(batchSpec{records: 4, valueSize: 5})
	setBase := func(b []byte, base int64) []byte {
		c := append([]byte(nil), b...)
		for i := range 8 {
			c[i] = byte(base >> (56 - 8*i))
		}
		return c
	}
	run := concatBatches(setBase(b0, 10), setBase(b1, 13), setBase(b2, 15)) // 10..12, 13..14, 15..18
	// A batch compaction thinned: 2 records over offsets 19..23 (valid on
	// disk, refused from producers).
	compacted := setBase(b1, 19)
	binary.BigEndian.PutUint32(compacted[23:], 4)
	binary.BigEndian.PutUint32(compacted[17:], recordbatch.Checksum(compacted[21:]))
	if _, _, err := recordbatch.Validate(compacted); err == nil {
		t.Fatal("test setup: the compacted batch should fail the produce-side check")
	}
	cases := []struct {
		name    string
		records []byte
		offset  int64
		want    []byte
		bad     bool
	}{
		{"all", run, 10, run, false},
		{"skip below offset", run, 13, run[len(b0):], false},
		{"trailing partial dropped", run[:len(run)-7], 10, run[:len(b0)+len(b1)], false},
		{"header fragment dropped", run[:len(b0)+20], 10, run[:len(b0)], false},
		{"corrupt ends", concatBatches(setBase(b0, 10), withByteAt(setBase(b1, 13), 30, 0xff), setBase(b2, 15)), 10, run[:len(b0)], true},
		{"corrupt first", withByteAt(run, 30, 0xff), 10, nil, true},
		{"empty", nil, 10, nil, false},
		{"compacted batch kept", concatBatches(run, compacted), 10, concatBatches(run, compacted), false},
		{"all below", run, 19, nil, false},
	}
	for _, c := range cases {
		got, bad := replicaBatches(c.records, c.offset)
		if !bytes.Equal(got, c.want) || (bad != nil) != c.bad {
			t.Errorf("%s: got %d bytes (bad %v), want %d bytes (bad %v)", c.name, len(got), bad, len(c.want), c.bad)
		}
	}
}

// FuzzReplicaBatches: bytes from a peer never panic the follower, and
// what it would append is whole, valid batches reaching the fetch offset.
func FuzzReplicaBatches(f *testing.F) {
	b := buildBatch(batchSpec{records: 3, valueSize: 5})
	f.Add(concatBatches(b, b), int64(0))
	f.Add(b[:40], int64(2))
	f.Add(withByteAt(b, 30, 1), int64(0))
	f.Fuzz(func(t *testing.T, records []byte, offset int64) {
		valid, _ := replicaBatches(records, offset)
		for pos := 0; pos < len(valid); {
			h, size, err := validateReplicatedBatch(valid[pos:])
			if err != nil {
				t.Fatalf("returned an invalid batch at %d: %v", pos, err)
			}
			if pos == 0 && h.LastOffset() < offset {
				t.Fatalf("first batch ends at %d, below the fetch offset %d", h.LastOffset(), offset)
			}
			pos += size
		}
	})
}
