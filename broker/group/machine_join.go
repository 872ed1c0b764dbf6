package group

// Join handles a JoinGroup. The answer comes out through Ready, at once or
// when the rebalance completes.
func (m *Machine) Join(now int64, req uint64, in JoinInput) {
	fail := func(code int16, memberID string) {
		m.respond(Response{Req: req, Join: &JoinResult{Code: code, Generation: -1, MemberID: memberID}})
	}
	switch {
	case in.Group == "":
		fail(errInvalidGroupID, in.MemberID)
		return
	case in.SessionTimeoutMs < m.cfg.MinSessionTimeoutMs || in.SessionTimeoutMs > m.cfg.MaxSessionTimeoutMs:
		fail(errSessionTimeout, in.MemberID)
		return
	}
	if in.RebalanceTimeoutMs <= 0 {
		in.RebalanceTimeoutMs = in.SessionTimeoutMs // JoinGroup v0 has none
	}
	g := m.groups[in.Group]
	if g == nil && in.MemberID != "" {
		fail(errUnknownMember, in.MemberID)
		return
	}
	if g == nil {
		g = newGroupState(in.Group, now)
	}
	if !g.compatible(in.ProtocolType, in.Protocols) {
		fail(errInconsistent, in.MemberID)
		return
	}
	m.groups[in.Group] = g
	if len(g.members) == 0 {
		g.protocolType = in.ProtocolType
	}
	if in.MemberID == "" {
		m.joinUnknown(now, req, g, in, fail)
	} else {
		m.joinKnown(now, req, g, in, fail)
	}
}

func newMember(id string, in JoinInput, now int64) *member {
	return &member{
		id: id, instanceID: in.InstanceID, clientID: in.ClientID, clientHost: in.ClientHost,
		protocols: in.Protocols, sessionTimeoutMs: in.SessionTimeoutMs, rebalanceTimeoutMs: in.RebalanceTimeoutMs,
		sessionDeadline: now + int64(in.SessionTimeoutMs),
	}
}

func (mb *member) update(in JoinInput, now int64) {
	mb.protocols, mb.clientID, mb.clientHost = in.Protocols, in.ClientID, in.ClientHost
	mb.sessionTimeoutMs, mb.rebalanceTimeoutMs = in.SessionTimeoutMs, in.RebalanceTimeoutMs
	mb.sessionDeadline = now + int64(in.SessionTimeoutMs)
}

// joinUnknown: a member without a member id.
func (m *Machine) joinUnknown(now int64, req uint64, g *groupState, in JoinInput, fail func(int16, string)) {
	if in.InstanceID != "" {
		if oldID, ok := g.instances[in.InstanceID]; ok {
			m.replaceStatic(now, req, g, oldID, in)
			return
		}
	}
	if m.cfg.MaxGroupSize > 0 && len(g.members)+len(g.pending) >= m.cfg.MaxGroupSize {
		fail(errMaxSize, "")
		return
	}
	prefix := in.ClientID
	if in.InstanceID != "" {
		prefix = in.InstanceID
	}
	id := m.cfg.NewMemberID(prefix)
	if in.InstanceID == "" && in.RequireKnownMemberID {
		g.pending[id] = now + int64(in.SessionTimeoutMs)
		fail(errMemberIDRequired, id)
		return
	}
	m.addAndRebalance(now, req, g, newMember(id, in, now))
}

// replaceStatic: a static member restarted (new member id). The old id is
// fenced; a Stable group keeps its assignment and does not rebalance
// unless the member's protocols changed.
func (m *Machine) replaceStatic(now int64, req uint64, g *groupState, oldID string, in JoinInput) {
	old := g.members[oldID]
	m.fencePending(old)
	newID := m.cfg.NewMemberID(in.InstanceID)
	changed := !sameProtocols(old.protocols, in.Protocols)
	mb := g.renameMember(oldID, newID)
	mb.update(in, now)
	switch {
	case g.state == StatePreparingRebalance:
		mb.joinReq = req
		m.maybeCompleteJoin(now, g)
	case changed:
		mb.joinReq = req
		m.prepareRebalance(now, g)
	default:
		if g.state == StateStable {
			m.persistGroup(g)
		}
		res := m.currentJoin(g, mb)
		res.SkipAssignment = g.state == StateStable && res.Leader == newID
		m.respond(Response{Req: req, Join: res})
	}
}

// fencePending answers a replaced member's waiting requests.
func (m *Machine) fencePending(mb *member) {
	if mb.joinReq != 0 {
		m.respond(Response{Req: mb.joinReq, Join: &JoinResult{Code: errFenced, Generation: -1, MemberID: mb.id}})
		mb.joinReq = 0
	}
	if mb.syncReq != 0 {
		m.respond(Response{Req: mb.syncReq, Sync: &SyncResult{Code: errFenced}})
		mb.syncReq = 0
	}
}

// joinKnown: a member rejoining with its id (or a KIP-394 member's second join).
func (m *Machine) joinKnown(now int64, req uint64, g *groupState, in JoinInput, fail func(int16, string)) {
	if _, ok := g.pending[in.MemberID]; ok && in.InstanceID == "" {
		delete(g.pending, in.MemberID)
		m.addAndRebalance(now, req, g, newMember(in.MemberID, in, now))
		return
	}
	mb, code := g.memberCheck(MemberRef{MemberID: in.MemberID, InstanceID: in.InstanceID})
	if code != 0 {
		fail(code, in.MemberID)
		return
	}
	if mb.joinReq != 0 {
		m.respond(Response{Req: mb.joinReq, Join: &JoinResult{Code: errRebalance, Generation: -1, MemberID: mb.id}})
		mb.joinReq = 0
	}
	changed := !sameProtocols(mb.protocols, in.Protocols)
	mb.update(in, now)
	switch {
	case g.state == StatePreparingRebalance:
		mb.joinReq = req
		m.maybeCompleteJoin(now, g)
	case !changed && (g.state == StateCompletingRebalance || (g.state == StateStable && g.leader != mb.id)):
		m.respond(Response{Req: req, Join: m.currentJoin(g, mb)})
	default:
		mb.joinReq = req
		m.prepareRebalance(now, g)
	}
}

// currentJoin is the join answer for the generation in place.
func (m *Machine) currentJoin(g *groupState, mb *member) *JoinResult {
	res := &JoinResult{
		Generation: g.generation, ProtocolType: g.protocolType, Protocol: g.protocol,
		Leader: g.leader, MemberID: mb.id,
	}
	if g.leader == mb.id {
		for _, id := range g.order {
			o := g.members[id]
			res.Members = append(res.Members, JoinMember{MemberID: o.id, InstanceID: o.instanceID, Metadata: o.metadataFor(g.protocol)})
		}
	}
	return res
}

func (m *Machine) addAndRebalance(now int64, req uint64, g *groupState, mb *member) {
	mb.joinReq = req
	g.addMember(mb)
	if g.state == StatePreparingRebalance {
		if g.initialPhase {
			g.joinDeadline = min(now+m.cfg.InitialRebalanceDelayMs, g.initialLimit)
		}
		m.maybeCompleteJoin(now, g)
		return
	}
	m.prepareRebalance(now, g)
}

// prepareRebalance starts a join phase.
func (m *Machine) prepareRebalance(now int64, g *groupState) {
	if g.state == StateCompletingRebalance {
		m.abortSync(g, errRebalance)
	}
	if g.state == StateEmpty {
		g.initialPhase = true
		g.initialLimit = now + g.maxRebalanceTimeout()
		g.joinDeadline = min(now+m.cfg.InitialRebalanceDelayMs, g.initialLimit)
	} else {
		g.initialPhase = false
		g.joinDeadline = now + g.maxRebalanceTimeout()
	}
	g.setState(StatePreparingRebalance, now)
	m.maybeCompleteJoin(now, g)
}

// abortSync answers held sync requests with code and clears assignments.
func (m *Machine) abortSync(g *groupState, code int16) {
	for _, id := range g.order {
		mb := g.members[id]
		mb.assignment = nil
		if mb.syncReq != 0 {
			m.respond(Response{Req: mb.syncReq, Sync: &SyncResult{Code: code}})
			mb.syncReq = 0
		}
	}
}

// maybeCompleteJoin ends the join phase once every member rejoined (and the
// initial delay is over), or at its deadline.
func (m *Machine) maybeCompleteJoin(now int64, g *groupState) {
	if g.state != StatePreparingRebalance {
		return
	}
	all := len(g.pending) == 0
	for _, mb := range g.members {
		all = all && mb.joinReq != 0
	}
	if (all && !g.initialPhase) || now >= g.joinDeadline {
		m.completeJoin(now, g)
	}
}

// completeJoin starts the next generation: dynamic members that did not
// rejoin are dropped, a protocol is chosen and the join responses go out.
func (m *Machine) completeJoin(now int64, g *groupState) {
	for _, id := range append([]string(nil), g.order...) {
		if mb := g.members[id]; mb.joinReq == 0 && mb.instanceID == "" {
			g.dropMember(id)
		}
	}
	g.generation++
	g.initialPhase = false
	if len(g.members) == 0 {
		g.protocol, g.leader = "", ""
		g.setState(StateEmpty, now)
		m.persistGroup(g)
		return
	}
	g.protocol = g.selectProtocol()
	if g.leader == "" || g.members[g.leader].joinReq == 0 {
		g.leader = g.firstJoined()
	}
	g.setState(StateCompletingRebalance, now)
	g.syncDeadline = now + g.maxRebalanceTimeout()
	for _, id := range g.order {
		mb := g.members[id]
		if mb.joinReq == 0 {
			continue
		}
		m.respond(Response{Req: mb.joinReq, Join: m.currentJoin(g, mb)})
		mb.joinReq = 0
		mb.sessionDeadline = now + int64(mb.sessionTimeoutMs)
	}
}

func (g *groupState) firstJoined() string {
	for _, id := range g.order {
		if g.members[id].joinReq != 0 {
			return id
		}
	}
	return g.order[0]
}
