package consumer

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestGroupSimulation drives a Group through its public API with simulated
// clients: members join (dynamic and static), leave, leave statically and
// rejoin under a new member id, crash (their sessions expire through Tick),
// refuse to revoke (fenced at their rebalance timeout), resubscribe, and
// heartbeat in random order, sometimes without acknowledging revocations,
// without reporting owned partitions, or losing the response; topics grow
// and appear. After every step: no partition has two owners on the server
// or among the clients, a client owns only what the server counts as its
// own, a partition in a member's assignment and its target is never taken
// from it, and at random steps Replay of the records so far (whole, and
// compacted) rebuilds an equal group. Then changes stop and every member
// must reach STABLE with its target.
func TestGroupSimulation(t *testing.T) {
	seen := map[string]int{}
	for _, assignor := range []Assignor{Uniform{}, Range{}} {
		for seed := range uint64(8) {
			t.Run(fmt.Sprintf("%s/seed%d", assignor.Name(), seed), func(t *testing.T) {
				s := newGroupSim(t, assignor, seed, seen)
				for step := range 300 {
					s.step(step)
				}
				s.settle()
			})
		}
	}
	for _, what := range []string{"UNREVOKED_PARTITIONS", "UNRELEASED_PARTITIONS", "fenced", "lost response",
		"static rejoin", "expired", "rebalance timeout", "replay", "resubscribe"} {
		if seen[what] == 0 {
			t.Errorf("simulation never saw %q (%v)", what, seen)
		}
	}
	t.Logf("paths: %v", seen)
}

const (
	simSessionMs   = 4000
	simRebalanceMs = 2000
	simStepMs      = 100
)

// simClient is one consumer as its client library sees things.
type simClient struct {
	id, instance string
	topics       []string
	joined       bool  // false: its next heartbeat is a join (epoch 0)
	epoch        int32 // from the last response received
	assigned     Assignment
	owned        Assignment // consumed: new partitions at once, revoked ones until acknowledged
	lastBeat     int64
	crashed      bool // stopped heartbeating: its session will expire
	stubborn     bool // never acknowledges revocations
}

type groupSim struct {
	t       *testing.T
	rng     *rand.Rand
	g       *Group
	now     int64
	counts  map[byte]int32
	clients map[string]*simClient
	parked  map[string][]string // instance id → topics, of static members away
	records []Record
	nextID  int
	seen    map[string]int
}

func newGroupSim(t *testing.T, a Assignor, seed uint64, seen map[string]int) *groupSim {
	g, err := NewGroup("g", Config{Assignors: []Assignor{a}, SessionTimeoutMs: simSessionMs, HeartbeatIntervalMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	s := &groupSim{t: t, rng: rand.New(rand.NewPCG(seed, 848)), g: g, counts: map[byte]int32{1: 4, 2: 3},
		clients: map[string]*simClient{}, parked: map[string][]string{}, seen: seen}
	s.g.SetTopics(topicsMeta(s.counts))
	for range 3 {
		s.join()
	}
	s.collect()
	return s
}

func (s *groupSim) step(step int) {
	s.now += simStepMs
	s.keepAlive()
	if step < 250 && s.rng.IntN(4) == 0 {
		actions := []func(){s.join, s.leave, s.staticLeave, s.rejoinParked, s.crash, s.resubscribe,
			s.changeTopics, s.toggleStubborn}
		actions[s.rng.IntN(len(actions))]()
	} else if id, ok := s.randomClient(); ok {
		s.heartbeat(id, s.rng.IntN(2) == 0, s.rng.IntN(3) != 0, s.rng.IntN(8) == 0, nil)
	}
	s.tick()
	s.collect()
	s.checkOwnership()
	if s.rng.IntN(7) == 0 {
		s.checkReplay()
	}
}

// keepAlive: live clients heartbeat well within their session timeout.
func (s *groupSim) keepAlive() {
	for _, id := range slices.Sorted(maps.Keys(s.clients)) {
		if c := s.clients[id]; !c.crashed && s.now-c.lastBeat >= simSessionMs/3 {
			s.heartbeat(id, true, s.rng.IntN(2) == 0, false, nil)
		}
	}
}

func (s *groupSim) randomClient() (string, bool) {
	var ids []string
	for _, id := range slices.Sorted(maps.Keys(s.clients)) {
		if !s.clients[id].crashed {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "", false
	}
	return ids[s.rng.IntN(len(ids))], true
}

// heartbeat sends one heartbeat of client id (a join if it must rejoin),
// with a new subscription unless topics is nil, and checks that it took
// from the member nothing that is in its target.
func (s *groupSim) heartbeat(id string, ack, report, lose bool, topics []string) {
	c := s.clients[id]
	if ack && !c.stubborn {
		c.owned = c.owned.Intersect(c.assigned)
	}
	req := s.request(c, report)
	if topics != nil {
		c.topics, req.SubscribedTopicNames = topics, topics
	}
	var before Assignment
	if m := s.g.members[id]; m != nil && req.MemberEpoch != JoinEpoch {
		before = m.state.Assigned.Clone()
	}
	resp, err := s.g.Heartbeat(req, s.now)
	c.lastBeat = s.now
	if errors.Is(err, ErrFencedMemberEpoch) {
		s.seen["fenced"]++
		c.joined, c.epoch, c.assigned, c.owned = false, 0, Assignment{}, Assignment{}
		return
	}
	if err != nil {
		s.t.Fatalf("step at %d: %s: %v", s.now, id, err)
	}
	c.joined = true
	if lose {
		s.seen["lost response"]++
	} else {
		c.epoch = resp.MemberEpoch
		if resp.Assignment != nil {
			c.assigned = resp.Assignment.Clone()
			c.owned = c.owned.Union(c.assigned)
		}
	}
	if m := s.g.members[id]; m != nil && req.MemberEpoch >= 0 {
		s.seen[m.state.State.String()]++
		if lost := before.Intersect(s.g.target[id]).Minus(m.state.Assigned); lost.Len() > 0 {
			s.t.Fatalf("at %d %s lost %v, in its assignment and target", s.now, id, lost.List())
		}
	}
}

func (s *groupSim) request(c *simClient, report bool) HeartbeatRequest {
	if !c.joined || c.epoch == 0 { // a lost join response: join again
		req := joinReq(c.id, c.topics...)
		req.RebalanceTimeoutMs = simRebalanceMs
		if c.instance != "" {
			req.InstanceID = &c.instance
		}
		return req
	}
	var owned Assignment
	if report {
		owned = c.owned.Clone()
	}
	return beat(c.id, c.epoch, owned)
}

func (s *groupSim) join() {
	if len(s.clients) >= 7 {
		return
	}
	c := &simClient{id: fmt.Sprintf("m%03d", s.nextID), topics: s.randomTopics(), assigned: Assignment{}, owned: Assignment{}}
	if s.rng.IntN(2) == 0 {
		c.instance = fmt.Sprintf("i%03d", s.nextID)
	}
	s.nextID++
	s.clients[c.id] = c
	s.heartbeat(c.id, true, true, s.rng.IntN(8) == 0, nil)
}

// randomTopics: a non-empty subset of t1..t4 (t3 and t4 may not exist yet).
func (s *groupSim) randomTopics() []string {
	var topics []string
	for n := 1; n <= 4; n++ {
		if s.rng.IntN(2) == 0 || (n == 4 && len(topics) == 0) {
			topics = append(topics, fmt.Sprintf("t%d", n))
		}
	}
	return topics
}

func (s *groupSim) leave() {
	if id, ok := s.randomClient(); ok && s.clients[id].joined {
		if _, err := s.g.Heartbeat(beat(id, LeaveEpoch, nil), s.now); err != nil {
			s.t.Fatalf("leave %s: %v", id, err)
		}
		delete(s.clients, id)
	}
}

// staticLeave: a static client shuts down (epoch -2); its instance id
// comes back later under a new member id.
func (s *groupSim) staticLeave() {
	id, ok := s.randomClient()
	if c := s.clients[id]; !ok || c.instance == "" || !c.joined {
		return
	}
	c := s.clients[id]
	if _, err := s.g.Heartbeat(beat(id, StaticLeaveEpoch, nil), s.now); err != nil {
		s.t.Fatalf("static leave %s: %v", id, err)
	}
	s.parked[c.instance] = c.topics
	delete(s.clients, id)
}

func (s *groupSim) rejoinParked() {
	instances := slices.Sorted(maps.Keys(s.parked))
	if len(instances) == 0 {
		return
	}
	inst := instances[s.rng.IntN(len(instances))]
	c := &simClient{id: fmt.Sprintf("m%03d", s.nextID), instance: inst, topics: s.parked[inst],
		assigned: Assignment{}, owned: Assignment{}}
	s.nextID++
	delete(s.parked, inst)
	_, held := s.g.static[inst]
	s.clients[c.id] = c
	s.heartbeat(c.id, true, true, false, nil)
	if held {
		s.seen["static rejoin"]++
	}
}

func (s *groupSim) crash() {
	if id, ok := s.randomClient(); ok {
		s.clients[id].crashed = true
	}
}

func (s *groupSim) resubscribe() {
	if id, ok := s.randomClient(); ok {
		s.seen["resubscribe"]++
		s.heartbeat(id, s.rng.IntN(2) == 0, s.rng.IntN(2) == 0, s.rng.IntN(4) == 0, s.randomTopics())
	}
}

func (s *groupSim) changeTopics() {
	n := byte(1 + s.rng.IntN(4))
	if s.counts[n] == 0 || n <= 2 {
		s.counts[n] += int32(1 + s.rng.IntN(3))
	}
	s.g.SetTopics(topicsMeta(s.counts))
}

func (s *groupSim) toggleStubborn() {
	if id, ok := s.randomClient(); ok {
		s.clients[id].stubborn = !s.clients[id].stubborn
	}
}

// tick: the clients of removed members are gone (crashed, or fenced at
// their rebalance timeout: such a client stops consuming by itself).
func (s *groupSim) tick() {
	for _, id := range s.g.Tick(s.now) {
		c, ok := s.clients[id]
		switch {
		case !ok:
			s.seen["static expired"]++
		case c.crashed:
			s.seen["expired"]++
		default:
			s.seen["rebalance timeout"]++
		}
		delete(s.clients, id)
	}
	for inst := range s.parked {
		if _, held := s.g.static[inst]; !held && s.rng.IntN(2) == 0 {
			delete(s.parked, inst) // gone for good
		}
	}
}

func (s *groupSim) collect() { s.records = append(s.records, s.g.TakeRecords()...) }

// checkOwnership: the server's owners match its members' states, no
// partition has two owners among the clients, and a client owns only what
// the server counts as its member's.
func (s *groupSim) checkOwnership() {
	states := map[string]MemberState{}
	for id, m := range s.g.members {
		states[id] = m.state
	}
	fresh, err := NewOwners(states)
	if err != nil {
		s.t.Fatal(err)
	}
	if !maps.Equal(fresh, s.g.owners) {
		s.t.Fatalf("owners %v out of step with member states %v", s.g.owners, fresh)
	}
	s.checkAssignmentEpochs()
	clientOwner := map[TopicPartition]string{}
	for _, id := range slices.Sorted(maps.Keys(s.clients)) {
		c := s.clients[id]
		var server Assignment
		if m := s.g.members[id]; m != nil {
			server = m.state.Owned()
		}
		if extra := c.owned.Minus(server); extra.Len() > 0 {
			s.t.Fatalf("at %d client %s owns %v the server does not count as its", s.now, id, extra.List())
		}
		for _, tp := range c.owned.Partitions() {
			if other, dup := clientOwner[tp]; dup {
				s.t.Fatalf("clients %s and %s both own %v", other, id, tp)
			}
			clientOwner[tp] = id
		}
	}
}

// checkAssignmentEpochs: each member has an assignment epoch (commit.go)
// for exactly the partitions it owns, none above its own epoch.
func (s *groupSim) checkAssignmentEpochs() {
	for id, m := range s.g.members {
		owned := m.state.Owned()
		if len(m.assignedAt) != owned.Len() {
			s.t.Fatalf("at %d member %s: assignment epochs for %d partitions, owns %d", s.now, id, len(m.assignedAt), owned.Len())
		}
		for tp, at := range m.assignedAt {
			if !owned.Contains(tp.Topic, tp.Partition) || (!m.staticLeft() && at > m.state.Epoch) {
				s.t.Fatalf("at %d member %s: %v got at epoch %d, member epoch %d, owns %v", s.now, id, tp, at, m.state.Epoch, owned.List())
			}
		}
	}
}

// checkReplay: Replay of the records so far, and of their compaction,
// rebuilds the live group.
func (s *groupSim) checkReplay() {
	s.seen["replay"]++
	want := dumpGroup(s.g)
	for _, records := range [][]Record{s.records, compact(s.records)} {
		g, err := Replay("g", s.g.cfg, records, s.now)
		if err != nil {
			s.t.Fatal(err)
		}
		if got := dumpGroup(g); got != want {
			s.t.Fatalf("at %d replay of %d records differs:\n%s\nlive:\n%s", s.now, len(records), got, want)
		}
	}
}

// settle: changes stop; crashed members expire, static members away come
// back or expire, and every client heartbeats reporting what it owns and
// acknowledging revocations. All must reach their targets.
func (s *groupSim) settle() {
	for _, c := range s.clients {
		c.stubborn = false
	}
	for inst := range s.parked {
		if s.rng.IntN(2) == 0 {
			delete(s.parked, inst)
		}
	}
	for len(s.parked) > 0 {
		s.rejoinParked()
	}
	for round := 0; round < 12; round++ {
		s.now += simSessionMs / 2
		for _, id := range slices.Sorted(maps.Keys(s.clients)) {
			if !s.clients[id].crashed {
				s.heartbeat(id, true, true, false, nil)
			}
		}
		s.tick()
		s.collect()
		s.checkOwnership()
		if round >= 2 && s.converged() {
			s.checkReplay()
			return
		}
	}
	s.t.Fatalf("group did not converge:\n%s", dumpGroup(s.g))
}

func (s *groupSim) converged() bool {
	d := s.g.Describe()
	if d.State != GroupStable && d.State != GroupEmpty {
		return false
	}
	for _, m := range d.Members {
		c := s.clients[m.MemberID]
		if c == nil || c.epoch != d.AssignmentEpoch || !c.owned.Equal(m.TargetAssignment) {
			return false
		}
	}
	return true
}

// compact keeps the last record per key, in log order, as log compaction
// does (tombstones kept).
func compact(records []Record) []Record {
	last := map[string]int{}
	for i, r := range records {
		last[recordKey(r)] = i
	}
	var out []Record
	for i, r := range records {
		if last[recordKey(r)] == i {
			out = append(out, r)
		}
	}
	return out
}

func recordKey(r Record) string {
	switch r := r.(type) {
	case ConsumerGroupMemberMetadataValue:
		return "5/" + r.MemberID
	case ConsumerGroupTargetAssignmentMemberValue:
		return "7/" + r.MemberID
	case ConsumerGroupCurrentMemberAssignmentValue:
		return "8/" + r.MemberID
	}
	return fmt.Sprint(r.coordinatorRecordType())
}

// dumpGroup renders everything of a group Replay must restore (not the
// deadlines, which Replay re-arms, nor unsubscribed topics).
func dumpGroup(g *Group) string {
	var b strings.Builder
	fmt.Fprintf(&b, "epoch %d assignment epoch %d topics %v\n", g.epoch, g.assignmentEpoch, g.subscribedMetadata())
	for _, id := range g.memberIDs() {
		m := g.members[id]
		fmt.Fprintf(&b, "%s %+v %s %s %d %q %v e%d/%d %v pending %v target %v\n", id, m.sub, m.clientID, m.clientHost,
			m.rebalanceTimeoutMs, m.serverAssignor, m.state.State, m.state.Epoch, m.state.PreviousEpoch,
			m.state.Assigned.List(), m.state.PendingRevocation.List(), g.target[id].List())
	}
	fmt.Fprintf(&b, "targets %d static %v owners %d\n", len(g.target), g.static, len(g.owners))
	return b.String()
}

func dumpDescription(d Description) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s e%d/%d %s\n", d.GroupID, d.State, d.Epoch, d.AssignmentEpoch, d.Assignor)
	for _, m := range d.Members {
		fmt.Fprintf(&b, "%s %s e%d %v %v %v %v %v\n", m.MemberID, m.InstanceID, m.MemberEpoch, m.State,
			m.SubscribedTopicNames, m.Assignment.List(), m.PendingRevocation.List(), m.TargetAssignment.List())
	}
	return b.String()
}
