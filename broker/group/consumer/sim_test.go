package consumer

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSimulation drives a group through random membership, subscription
// and metadata changes while members heartbeat in random order, sometimes
// without acknowledging revocations, without reporting owned partitions, or
// losing the response. After every step no partition is owned by two
// members (on the server or on the clients), clients own only what the
// server gives them, and reconciliation never revokes a partition in both
// the current and the target assignment. Once changes stop, every member
// must reach its target.
func TestSimulation(t *testing.T) {
	seen := map[string]int{}
	for _, assignor := range []Assignor{Uniform{}, Range{}} {
		for seed := range uint64(30) {
			t.Run(fmt.Sprintf("%s/seed%d", assignor.Name(), seed), func(t *testing.T) {
				s := newSim(t, assignor, seed)
				s.seen = seen
				for step := range 200 {
					s.step(step)
					s.checkOwnership()
				}
				s.settle()
			})
		}
	}
	// The simulation must have exercised every path, or it proves little.
	for _, what := range []string{"UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS", "STABLE", "fenced",
		"previous epoch accepted", "revocation skipped", "lost response"} {
		if seen[what] == 0 {
			t.Errorf("simulation never saw %q (%v)", what, seen)
		}
	}
	t.Logf("paths: %v", seen)
}

// simMember is one member: the server's state and its client's view.
type simMember struct {
	sub    MemberSubscription
	server MemberState
	// clientEpoch, clientAssigned: from the last response the client got;
	// clientOwned: what it consumes (new partitions at once, revoked ones
	// until it acknowledges).
	clientEpoch    int32
	clientAssigned Assignment
	clientOwned    Assignment
}

type sim struct {
	t          *testing.T
	rng        *rand.Rand
	assignor   Assignor
	topics     map[TopicID]TopicMetadata
	members    map[string]*simMember
	target     map[string]Assignment
	groupEpoch int32
	owners     Owners
	nextID     int
	seen       map[string]int // path → times taken, across runs
}

func newSim(t *testing.T, a Assignor, seed uint64) *sim {
	s := &sim{t: t, rng: rand.New(rand.NewPCG(seed, 848)), assignor: a,
		topics: topicsMeta(map[byte]int32{1: 4, 2: 3}), members: map[string]*simMember{},
		target: map[string]Assignment{}, owners: Owners{}}
	for range 3 {
		s.join()
	}
	return s
}

func (s *sim) step(step int) {
	if step < 150 && s.rng.IntN(5) == 0 {
		[]func(){s.join, s.leave, s.resubscribe, s.growTopic, s.createTopic}[s.rng.IntN(5)]()
		return
	}
	if id, ok := s.randomMember(); ok {
		s.heartbeat(id, s.rng.IntN(2) == 0, s.rng.IntN(4) != 0, s.rng.IntN(8) == 0)
	}
}

func (s *sim) randomMember() (string, bool) {
	ids := slices.Sorted(maps.Keys(s.members))
	if len(ids) == 0 {
		return "", false
	}
	return ids[s.rng.IntN(len(ids))], true
}

// heartbeat: the client acknowledges revocations first if ack, reports its
// owned partitions if report, and loses the response if lose.
func (s *sim) heartbeat(id string, ack, report, lose bool) {
	m := s.members[id]
	if ack {
		m.clientOwned = m.clientOwned.Intersect(m.clientAssigned)
	}
	var owned *Assignment
	if report {
		owned = ptr(m.clientOwned.Clone())
	}
	stored := &StoredMember{Epoch: m.server.Epoch, PreviousEpoch: m.server.PreviousEpoch, Assigned: m.server.Assigned}
	if _, err := CheckEpoch(stored, m.clientEpoch, owned); err != nil {
		if !errors.Is(err, ErrFencedMemberEpoch) {
			s.t.Fatalf("%s: unexpected %v", id, err)
		}
		s.seen["fenced"]++
		s.fence(id)
		return
	}
	if m.clientEpoch != 0 && m.clientEpoch == m.server.PreviousEpoch && m.clientEpoch != m.server.Epoch {
		s.seen["previous epoch accepted"]++
	}
	cur, target := m.server, s.target[id]
	next, err := Reconcile(cur, target, s.groupEpoch, s.owners.OwnedByOthers(id), owned)
	if err != nil {
		s.t.Fatalf("%s: %v", id, err)
	}
	if lost := cur.Assigned.Intersect(target).Minus(next.Assigned); lost.Len() > 0 {
		s.t.Fatalf("%s: revoked %v though in current and target", id, lost.List())
	}
	if both := next.Assigned.Intersect(next.PendingRevocation); both.Len() > 0 {
		s.t.Fatalf("%s: %v both assigned and pending revocation", id, both.List())
	}
	s.owners.Update(id, cur, next)
	m.server = next
	s.seen[next.State.String()]++
	if cur.Assigned.Minus(target).Len() > 0 && next.State != StateUnrevokedPartitions && cur.State != StateUnrevokedPartitions {
		s.seen["revocation skipped"]++
	}
	if lose {
		s.seen["lost response"]++
	} else {
		m.clientEpoch, m.clientAssigned = next.Epoch, next.Assigned.Clone()
		m.clientOwned = m.clientOwned.Union(next.Assigned)
	}
}

// fence: the client gets FENCED_MEMBER_EPOCH, drops everything and rejoins
// with epoch 0 under the same member id; the server starts it afresh.
func (s *sim) fence(id string) {
	m := s.members[id]
	s.owners.Remove(id, m.server)
	m.server, m.clientEpoch, m.clientAssigned, m.clientOwned = NewMember(), 0, Assignment{}, Assignment{}
	s.recompute()
}

func (s *sim) join() {
	if len(s.members) >= 8 {
		return
	}
	id := fmt.Sprintf("member-%02d", s.nextID)
	s.nextID++
	s.members[id] = &simMember{sub: s.randomSubscription(id), server: NewMember(),
		clientAssigned: Assignment{}, clientOwned: Assignment{}}
	s.recompute()
}

// randomSubscription: a non-empty subset of t1..t4 (t3 and t4 may not exist
// yet: they are picked up when created, as a regex subscription would).
func (s *sim) randomSubscription(id string) MemberSubscription {
	sub := MemberSubscription{MemberID: id}
	for n := 1; n <= 4; n++ {
		if s.rng.IntN(2) == 0 || (n == 4 && len(sub.Topics) == 0) {
			sub.Topics = append(sub.Topics, fmt.Sprintf("t%d", n))
		}
	}
	return sub
}

func (s *sim) leave() {
	id, ok := s.randomMember()
	if !ok {
		return
	}
	stored := &StoredMember{Epoch: s.members[id].server.Epoch}
	if a, err := CheckEpoch(stored, LeaveEpoch, nil); err != nil || a != ActionLeave {
		s.t.Fatalf("leave: %v, %v", a, err)
	}
	s.owners.Remove(id, s.members[id].server)
	delete(s.members, id)
	delete(s.target, id)
	s.recompute()
}

func (s *sim) resubscribe() {
	if id, ok := s.randomMember(); ok {
		s.members[id].sub = s.randomSubscription(id)
		s.recompute()
	}
}

func (s *sim) growTopic() {
	md := s.topics[tid(byte(1+s.rng.IntN(2)))]
	md.Partitions += int32(1 + s.rng.IntN(3))
	s.topics[md.ID] = md
	s.recompute()
}

func (s *sim) createTopic() {
	n := byte(3 + s.rng.IntN(2))
	if _, ok := s.topics[tid(n)]; !ok {
		s.topics[tid(n)] = TopicMetadata{ID: tid(n), Name: fmt.Sprintf("t%d", n), Partitions: int32(1 + s.rng.IntN(5))}
		s.recompute()
	}
}

// recompute bumps the group epoch and computes the new target, each member
// starting from its current target for stickiness.
func (s *sim) recompute() {
	s.groupEpoch++
	var specs []MemberSpec
	for _, id := range slices.Sorted(maps.Keys(s.members)) {
		specs = append(specs, SpecFor(s.members[id].sub, s.topics, s.target[id]))
	}
	s.target = s.assignor.Assign(specs, s.topics)
	checkAssignment(s.t, specs, s.topics, s.target)
}

// checkOwnership: the server's owners map matches the members' states and
// no partition has two owners, on the server or among the clients; a
// client owns only partitions the server counts as its own.
func (s *sim) checkOwnership() {
	states := map[string]MemberState{}
	clientOwner := map[TopicPartition]string{}
	for id, m := range s.members {
		states[id] = m.server
		if extra := m.clientOwned.Minus(m.server.Owned()); extra.Len() > 0 {
			s.t.Fatalf("client %s owns %v the server does not count as its", id, extra.List())
		}
		for _, tp := range m.clientOwned.Partitions() {
			if other, ok := clientOwner[tp]; ok {
				s.t.Fatalf("clients %s and %s both own %v", other, id, tp)
			}
			clientOwner[tp] = id
		}
	}
	fresh, err := NewOwners(states)
	if err != nil {
		s.t.Fatal(err)
	}
	if !maps.Equal(fresh, s.owners) {
		s.t.Fatalf("owners map %v out of step with member states %v", s.owners, fresh)
	}
}

// settle: no more changes; every member heartbeats each round, reporting
// its owned partitions and acknowledging revocations. All must reach their
// target within a few rounds.
func (s *sim) settle() {
	for range 6 {
		for _, id := range slices.Sorted(maps.Keys(s.members)) {
			s.heartbeat(id, true, true, false)
			s.checkOwnership()
		}
		if s.converged() {
			return
		}
	}
	for id, m := range s.members {
		s.t.Logf("%s: %v e%d (group e%d) assigned %v pending %v target %v", id, m.server.State, m.server.Epoch,
			s.groupEpoch, m.server.Assigned.List(), m.server.PendingRevocation.List(), s.target[id].List())
	}
	s.t.Fatal("group did not converge to its target")
}

func (s *sim) converged() bool {
	for id, m := range s.members {
		if m.server.State != StateStable || m.server.Epoch != s.groupEpoch || m.clientEpoch != s.groupEpoch ||
			!m.server.Assigned.Equal(s.target[id]) || !m.clientOwned.Equal(s.target[id]) {
			return false
		}
	}
	return true
}
