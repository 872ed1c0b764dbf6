package replication

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The simulation drives several replicas and a controller with a seeded
// RNG: appends, acks=all waiters, fetches whose responses are delayed or
// dropped, ticks, ISR CASes resolved late, leader elections from the ISR
// whose notifications reach each replica late (so deposed leaders linger),
// and restarts (losing unflushed data with fsync durability). After every
// step it checks:
//   - a leader's HW <= the LEO of each member of its committed ISR, and <=
//     its own durable LEO;
//   - a leader's HW never decreases within an epoch;
//   - every offset any leader has called committed (below its HW) holds
//     the same record forever on the current leader, and below every
//     follower's HW;
//   - every acknowledged acks=all write is committed.

type simRecord struct {
	epoch int32
	id    uint64
}

type ctrlState struct {
	leader   int32
	epoch    int32
	version  int64
	replicas []int32
	isr      []int32
}

type fetchResp struct {
	epoch   int32
	offset  int64
	records []simRecord
	hw      int64
}

type simNode struct {
	id       int32
	r        *Replica
	log      []simRecord
	epochs   *MemEpochs
	flushed  int64
	inbox    []ctrlState // controller notifications not yet delivered
	query    *EpochQuery // outstanding OffsetForLeaderEpoch
	inflight bool        // a fetch is outstanding
	resps    []fetchResp
}

type simWaiter struct {
	required int64
	record   simRecord
}

type sim struct {
	t       *testing.T
	rng     *rand.Rand
	cfg     Config
	nodes   []*simNode
	ctrl    ctrlState
	cas     []casReq
	nextID  uint64
	waiters map[uint64]simWaiter
	// committed is the globally committed prefix of the log.
	committed []simRecord
	// leaderHW[id] tracks (epoch, HW) while id leads, for monotonicity.
	leaderHW map[int32][2]int64
	stats    simStats
	trace    bool
	// storm elects twice as often, so that inherited (lagging) HWs and
	// ISR changes right after elections are common.
	storm bool
}

type casReq struct {
	from int32
	p    *ISRProposal
}

type simStats struct {
	elections, acked, ackFailed, fenced, shrinks, expands, truncations, restarts int
}

func newSim(t *testing.T, seed uint64, n int, fsync bool) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		cfg:     Config{ReplicaLagTimeMaxMs: 1000, MinInsyncReplicas: 2, FsyncDurability: fsync},
		waiters: map[uint64]simWaiter{}, leaderHW: map[int32][2]int64{},
	}
	var ids []int32
	for i := range n {
		ids = append(ids, int32(i+1))
	}
	s.ctrl = ctrlState{leader: 1, epoch: 0, version: 1, replicas: ids, isr: slices.Clone(ids)}
	for _, id := range ids {
		node := &simNode{id: id, epochs: &MemEpochs{}}
		s.restart(node)
		s.nodes = append(s.nodes, node)
	}
	return s
}

func (s *sim) node(id int32) *simNode { return s.nodes[id-1] }

// restart replaces the node's state machine (state in memory is lost) and
// delivers the controller's current state to it, as a broker that reads
// etcd on start. With fsync durability, unflushed data is lost.
func (s *sim) restart(n *simNode) {
	hw := int64(0)
	restarted := n.r != nil
	if restarted {
		hw = n.r.HighWatermark() // the HW checkpoint
		s.stats.restarts++
	}
	if s.cfg.FsyncDurability {
		n.truncate(n.flushed) // a crash loses what was not fsynced
	}
	cfg := s.cfg
	cfg.ReplicaID = n.id
	r, err := New(cfg, n.epochs)
	if err != nil {
		s.t.Fatal(err)
	}
	n.r, n.query, n.inflight, n.resps, n.inbox = r, nil, false, nil, nil
	delete(s.leaderHW, n.id)
	if s.ctrl.leader == n.id && restarted {
		// The contract with the controller: a leader that restarts (a new
		// lease) gets a new epoch before it leads again, possibly this
		// replica again. In the same epoch, batches it lost could differ
		// from batches followers fetched at the same offsets.
		s.elect()
	}
	s.deliver(n, s.ctrl, min(hw, int64(len(n.log))))
}

func (n *simNode) truncate(offset int64) {
	if offset < int64(len(n.log)) {
		n.log = n.log[:offset]
	}
	n.epochs.Truncate(offset)
	n.flushed = min(n.flushed, int64(len(n.log)))
}

func (n *simNode) append(recs []simRecord, fsync bool) {
	for _, rec := range recs {
		n.log = append(n.log, rec)
		n.epochs.Append(rec.epoch, 1)
	}
	if !fsync {
		n.flushed = int64(len(n.log))
	}
}

// deliver applies one controller state to a node.
func (s *sim) deliver(n *simNode, c ctrlState, hw int64) {
	leo := int64(len(n.log))
	var err error
	if c.leader == n.id {
		err = n.r.BecomeLeader(LeaderState{Epoch: c.epoch, Version: c.version, Replicas: c.replicas, ISR: c.isr,
			LEO: leo, DurableOffset: n.flushed, HighWatermark: hw})
	} else {
		err = n.r.BecomeFollower(FollowerState{Epoch: c.epoch, Leader: c.leader, LEO: leo, HighWatermark: hw})
	}
	if err != nil && !errors.Is(err, ErrStaleEpoch) {
		s.t.Fatalf("node %d: deliver %+v: %v", n.id, c, err)
	}
}

func (s *sim) step() {
	n := s.nodes[s.rng.IntN(len(s.nodes))]
	k := s.rng.IntN(100)
	if s.trace {
		s.t.Logf("step k=%d node=%d ctrl=%+v", k, n.id, s.ctrl)
		for _, m := range s.nodes {
			st := m.r.Status()
			s.t.Logf("  node %d %s e=%d hw=%d isr=%v leader=%d log=%v", m.id, st.Role, st.LeaderEpoch, st.HighWatermark, st.ISR, st.Leader, m.log)
		}
	}
	switch {
	case k < 20:
		s.appendTo(n)
	case k < 28:
		if len(n.log) > 0 && n.r.Role() == RoleLeader {
			n.flushed = n.flushed + s.rng.Int64N(int64(len(n.log))-n.flushed+1)
			must(s.t, n.r.Flushed(n.flushed))
		}
	case k < 48:
		s.sendFetch(n)
	case k < 63:
		s.receiveFetch(n)
	case k < 68:
		s.answerQuery(n)
	case k < 75:
		for _, m := range s.nodes {
			must(s.t, m.r.Tick(s.rng.Int64N(400)))
		}
	case k < 82:
		s.resolveCAS()
	case k < 83:
		if s.storm || s.rng.IntN(2) == 0 {
			s.elect()
		}
	case k < 94:
		if len(n.inbox) > 0 {
			c := n.inbox[0]
			n.inbox = n.inbox[1:]
			s.deliver(n, c, n.r.HighWatermark())
		}
	case k < 95:
		if s.rng.IntN(2) == 0 {
			s.restart(n)
		}
	default:
	}
	for _, m := range s.nodes {
		s.processReady(m)
	}
	s.check()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (s *sim) appendTo(n *simNode) {
	if n.r.Role() != RoleLeader {
		return
	}
	k := 1 + s.rng.IntN(3)
	var recs []simRecord
	for range k {
		s.nextID++
		recs = append(recs, simRecord{epoch: n.r.LeaderEpoch(), id: s.nextID})
	}
	acksAll := s.rng.IntN(2) == 0
	if acksAll && n.r.CheckAcksAll() != nil {
		return // NOT_ENOUGH_REPLICAS before appending
	}
	n.append(recs, s.cfg.FsyncDurability)
	must(s.t, n.r.Append(int64(len(n.log))))
	if acksAll {
		s.nextID++
		w := AckWaiter{ID: s.nextID, RequiredOffset: int64(len(n.log)), TimeoutMs: 3000}
		must(s.t, n.r.WaitForAcks(w))
		s.waiters[w.ID] = simWaiter{required: w.RequiredOffset, record: n.log[len(n.log)-1]}
	}
}

// sendFetch has a fetching follower send a fetch; the leader answers at
// once, the response travels (receiveFetch) or is lost.
func (s *sim) sendFetch(f *simNode) {
	offset, ok := f.r.FetchOffset()
	st := f.r.Status()
	if !ok || f.inflight || st.Leader < 0 {
		return
	}
	l := s.node(st.Leader)
	epoch := f.r.LeaderEpoch()
	if err := l.r.FollowerFetch(f.id, offset, epoch); err != nil {
		return // an error response: the follower retries later
	}
	end := min(int64(len(l.log)), offset+int64(1+s.rng.IntN(5)))
	resp := fetchResp{epoch: epoch, offset: offset, records: slices.Clone(l.log[offset:end]), hw: l.r.HighWatermark()}
	if s.rng.IntN(20) == 0 {
		return // lost; the fetcher times out and resends
	}
	f.inflight = true
	f.resps = append(f.resps, resp)
}

func (s *sim) receiveFetch(f *simNode) {
	if len(f.resps) == 0 {
		f.inflight = false
		return
	}
	resp := f.resps[0]
	f.resps = f.resps[1:]
	f.inflight = false
	if err := f.r.ValidateFetch(resp.epoch, resp.offset); err != nil {
		return
	}
	f.append(resp.records, false) // a follower flushes before it reports
	f.flushed = int64(len(f.log))
	must(s.t, f.r.Fetched(resp.epoch, int64(len(f.log)), resp.hw))
}

// answerQuery has the leader answer the follower's OffsetForLeaderEpoch.
func (s *sim) answerQuery(f *simNode) {
	q := f.query
	if q == nil {
		return
	}
	if st := f.r.Status(); st.Role != RoleFollower || !st.Truncating || f.r.LeaderEpoch() != q.CurrentEpoch {
		f.query = nil // superseded by a newer role or epoch
		return
	}
	l := s.node(q.Leader)
	if l.r.Role() != RoleLeader || l.r.LeaderEpoch() != q.CurrentEpoch {
		return // NOT_LEADER / FENCED / UNKNOWN epoch: retry later
	}
	ans := EpochEndOffset{RequestedEpoch: q.Epoch}
	var err error
	ans.LeaderEpoch, ans.EndOffset, err = l.r.LeaderEpochEndOffset(q.Epoch)
	must(s.t, err)
	f.query = nil
	if err := f.r.HandleEpochEndOffset(ans); err != nil {
		s.t.Fatalf("node %d: epoch answer %+v: %v", f.id, ans, err)
	}
}

func (s *sim) resolveCAS() {
	if len(s.cas) == 0 {
		return
	}
	req := s.cas[0]
	s.cas = s.cas[1:]
	n := s.node(req.from)
	c := &s.ctrl
	if c.leader != req.from || c.epoch != req.p.LeaderEpoch || c.version != req.p.ExpectedVersion {
		if err := n.r.ISRRejected(); err == nil {
			s.stats.fenced++
		}
		return
	}
	c.isr, c.version = slices.Clone(req.p.ISR), c.version+1
	if req.p.Change == ISRShrink {
		s.stats.shrinks++
	} else {
		s.stats.expands++
	}
	if err := n.r.ISRCommitted(c.version); err != nil && !errors.Is(err, ErrNoProposal) {
		s.t.Fatal(err)
	}
	s.broadcast()
}

// elect picks a new leader from the ISR (clean election) and raises the
// epoch. Followers not in the ISR stay replicas.
func (s *sim) elect() {
	c := &s.ctrl
	c.leader = c.isr[s.rng.IntN(len(c.isr))]
	c.epoch++
	c.version++
	s.stats.elections++
	s.broadcast()
}

func (s *sim) broadcast() {
	for _, n := range s.nodes {
		c := s.ctrl
		c.replicas, c.isr = slices.Clone(c.replicas), slices.Clone(c.isr)
		n.inbox = append(n.inbox, c)
	}
}

func (s *sim) processReady(n *simNode) {
	if !n.r.HasReady() {
		return
	}
	rd := n.r.Ready()
	if rd.Proposal != nil {
		s.cas = append(s.cas, casReq{from: n.id, p: rd.Proposal})
	}
	for _, a := range rd.Acks {
		s.checkAck(n, a)
	}
	if rd.Truncate != nil {
		s.stats.truncations++
		n.truncate(rd.Truncate.Offset)
	}
	if rd.EpochQuery != nil {
		n.query = rd.EpochQuery
	}
	if rd.Fetch != nil {
		n.query = nil
		if int64(len(n.log)) != rd.Fetch.Offset {
			s.t.Fatalf("node %d: fetch from %d with LEO %d", n.id, rd.Fetch.Offset, len(n.log))
		}
	}
	n.r.Advance(rd)
}

func (s *sim) checkAck(n *simNode, a AckResult) {
	w, ok := s.waiters[a.ID]
	if !ok {
		s.t.Fatalf("node %d: unknown ack %d", n.id, a.ID)
	}
	delete(s.waiters, a.ID)
	if a.Err != nil {
		s.stats.ackFailed++
		return
	}
	s.stats.acked++
	s.updateCommitted()
	if w.required > int64(len(s.committed)) || s.committed[w.required-1] != w.record {
		s.t.Fatalf("node %d: acknowledged offset %d (%+v) is not committed (committed %d)", n.id, w.required-1, w.record, len(s.committed))
	}
}

// updateCommitted extends the committed prefix from every leader's HW and
// checks that leaders agree on it.
func (s *sim) updateCommitted() {
	for _, n := range s.nodes {
		if n.r.Role() != RoleLeader {
			continue
		}
		hw := n.r.HighWatermark()
		for off := int64(0); off < hw; off++ {
			if off < int64(len(s.committed)) {
				if n.log[off] != s.committed[off] {
					s.t.Fatalf("leader %d epoch %d: offset %d is %+v, committed %+v", n.id, n.r.LeaderEpoch(), off, n.log[off], s.committed[off])
				}
				continue
			}
			s.committed = append(s.committed, n.log[off])
		}
	}
}

func (s *sim) check() {
	s.updateCommitted()
	for _, n := range s.nodes {
		switch n.r.Role() {
		case RoleLeader:
			s.checkLeader(n)
		case RoleFollower:
			hw := n.r.HighWatermark()
			if hw > int64(len(s.committed)) || !slices.Equal(n.log[:hw], s.committed[:hw]) {
				s.t.Fatalf("follower %d: log below HW %d differs from the committed log", n.id, hw)
			}
		}
	}
	if l := s.node(s.ctrl.leader); l.r.Role() == RoleLeader && l.r.LeaderEpoch() == s.ctrl.epoch {
		c := int64(len(s.committed))
		if int64(len(l.log)) < c || !slices.Equal(l.log[:c], s.committed) {
			s.t.Fatalf("current leader %d lost committed data: LEO %d, committed %d", l.id, len(l.log), c)
		}
	}
}

func (s *sim) checkLeader(n *simNode) {
	hw, epoch := n.r.HighWatermark(), int64(n.r.LeaderEpoch())
	if hw > n.flushed || hw > int64(len(n.log)) {
		s.t.Fatalf("leader %d: HW %d above durable %d / LEO %d", n.id, hw, n.flushed, len(n.log))
	}
	for _, id := range n.r.ISR() {
		if m := s.node(id); int64(len(m.log)) < hw {
			s.t.Fatalf("leader %d: HW %d above ISR member %d's LEO %d", n.id, hw, id, len(m.log))
		}
	}
	if prev, ok := s.leaderHW[n.id]; ok && prev[0] == epoch && hw < prev[1] {
		s.t.Fatalf("leader %d epoch %d: HW went back from %d to %d", n.id, epoch, prev[1], hw)
	}
	s.leaderHW[n.id] = [2]int64{epoch, hw}
}

var simTrace = flag.String("simtrace", "", "log every step of the simulation run seed/fsync, e.g. 3/true")

func TestSimulation(t *testing.T) {
	var total simStats
	for seed := uint64(1); seed <= 100; seed++ {
		for _, fsync := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d/fsync=%t", seed, fsync), func(t *testing.T) {
				s := newSim(t, seed, 3, fsync)
				s.storm = seed%2 == 0
				s.trace = *simTrace == fmt.Sprintf("%d/%t", seed, fsync)
				for range 5000 {
					s.step()
				}
				if len(s.committed) < 20 {
					t.Errorf("only %d offsets committed: the simulation makes no progress", len(s.committed))
				}
				addStats(&total, s.stats)
			})
		}
	}
	t.Logf("totals: %+v", total)
	// The schedule must reach the interesting cases, or the invariants
	// above are checked on nothing.
	if total.elections == 0 || total.fenced == 0 || total.shrinks == 0 || total.expands == 0 ||
		total.truncations == 0 || total.acked == 0 || total.ackFailed == 0 || total.restarts == 0 {
		t.Errorf("simulation did not exercise every path: %+v", total)
	}
}

func addStats(a *simStats, b simStats) {
	a.elections += b.elections
	a.acked += b.acked
	a.ackFailed += b.ackFailed
	a.fenced += b.fenced
	a.shrinks += b.shrinks
	a.expands += b.expands
	a.truncations += b.truncations
	a.restarts += b.restarts
}
