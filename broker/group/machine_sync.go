package group

// Sync handles a SyncGroup; the answer comes out through Ready.
func (m *Machine) Sync(now int64, req uint64, in SyncInput) {
	fail := func(code int16) { m.respond(Response{Req: req, Sync: &SyncResult{Code: code}}) }
	g := m.groups[in.Group]
	if in.Group == "" {
		fail(errInvalidGroupID)
		return
	}
	if g == nil {
		fail(errUnknownMember)
		return
	}
	mb, code := g.memberCheck(MemberRef{MemberID: in.MemberID, InstanceID: in.InstanceID})
	switch {
	case code != 0:
		fail(code)
	case in.Generation != g.generation:
		fail(errIllegalGeneration)
	case (in.ProtocolType != nil && *in.ProtocolType != g.protocolType) || (in.Protocol != nil && *in.Protocol != g.protocol):
		fail(errInconsistent)
	case g.state == StatePreparingRebalance:
		fail(errRebalance)
	case g.state == StateStable:
		mb.sessionDeadline = now + int64(mb.sessionTimeoutMs)
		m.respond(Response{Req: req, Sync: &SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: mb.assignment}})
	case g.state == StateCompletingRebalance:
		m.syncCompleting(now, req, g, mb, in.Assignments)
	default:
		fail(errUnknownMember)
	}
}

// syncCompleting holds the sync until the leader's assignment arrives; the
// leader's sync persists the generation and releases every held sync.
func (m *Machine) syncCompleting(now int64, req uint64, g *groupState, mb *member, assignments []Assignment) {
	if mb.syncReq != 0 {
		m.respond(Response{Req: mb.syncReq, Sync: &SyncResult{Code: errRebalance}})
	}
	mb.syncReq = req
	mb.sessionDeadline = now + int64(mb.sessionTimeoutMs)
	if mb.id != g.leader {
		return
	}
	for _, id := range g.order {
		g.members[id].assignment = nil
	}
	for _, a := range assignments {
		if o := g.members[a.MemberID]; o != nil {
			o.assignment = a.Assignment
		}
	}
	g.setState(StateStable, now)
	m.persistGroup(g)
	for _, id := range g.order {
		o := g.members[id]
		if o.syncReq != 0 {
			m.respond(Response{Req: o.syncReq, Sync: &SyncResult{ProtocolType: g.protocolType, Protocol: g.protocol, Assignment: o.assignment}})
			o.syncReq = 0
		}
		o.sessionDeadline = now + int64(o.sessionTimeoutMs)
	}
}

// Heartbeat handles a Heartbeat and returns its error code.
func (m *Machine) Heartbeat(now int64, group string, generation int32, ref MemberRef) int16 {
	g := m.groups[group]
	if group == "" {
		return errInvalidGroupID
	}
	if g == nil {
		return errUnknownMember
	}
	mb, code := g.memberCheck(ref)
	switch {
	case code != 0:
		return code
	case generation != g.generation:
		return errIllegalGeneration
	}
	mb.sessionDeadline = now + int64(mb.sessionTimeoutMs)
	switch g.state {
	case StatePreparingRebalance:
		return errRebalance
	case StateCompletingRebalance, StateStable:
		return 0
	}
	return errUnknownMember
}

// Leave handles a LeaveGroup and returns one code per member.
func (m *Machine) Leave(now int64, group string, refs []MemberRef) []int16 {
	codes := make([]int16, len(refs))
	g := m.groups[group]
	removed := false
	for i, ref := range refs {
		switch {
		case group == "":
			codes[i] = errInvalidGroupID
		case g == nil:
			codes[i] = errUnknownMember
		default:
			codes[i] = m.leaveOne(g, ref)
			removed = removed || codes[i] == 0
		}
	}
	if removed {
		m.afterRemoval(now, g)
	}
	return codes
}

func (m *Machine) leaveOne(g *groupState, ref MemberRef) int16 {
	id := ref.MemberID
	if ref.InstanceID != "" {
		owner, ok := g.instances[ref.InstanceID]
		switch {
		case !ok:
			return errUnknownMember
		case id != "" && id != owner:
			return errFenced
		}
		id = owner
	} else if _, ok := g.pending[id]; ok {
		delete(g.pending, id)
		return 0
	}
	mb := g.members[id]
	if mb == nil {
		return errUnknownMember
	}
	m.removeMember(g, mb)
	return 0
}

// removeMember drops a member, answering what it waits for.
func (m *Machine) removeMember(g *groupState, mb *member) {
	if mb.joinReq != 0 {
		m.respond(Response{Req: mb.joinReq, Join: &JoinResult{Code: errUnknownMember, Generation: -1, MemberID: mb.id}})
	}
	if mb.syncReq != 0 {
		m.respond(Response{Req: mb.syncReq, Sync: &SyncResult{Code: errUnknownMember}})
	}
	g.dropMember(mb.id)
}

// afterRemoval rebalances after members left or expired.
func (m *Machine) afterRemoval(now int64, g *groupState) {
	switch g.state {
	case StateStable, StateCompletingRebalance:
		m.prepareRebalance(now, g)
	case StatePreparingRebalance:
		m.maybeCompleteJoin(now, g)
	}
}

// Tick advances logical time: expires sessions, pending members, and join
// and sync phases.
func (m *Machine) Tick(now int64) {
	for _, id := range m.sortedGroups() {
		m.tickGroup(now, m.groups[id])
	}
}

func (m *Machine) tickGroup(now int64, g *groupState) {
	for id, deadline := range g.pending {
		if now >= deadline {
			delete(g.pending, id)
		}
	}
	expired := false
	for _, id := range append([]string(nil), g.order...) {
		mb := g.members[id]
		if mb.joinReq == 0 && mb.syncReq == 0 && now >= mb.sessionDeadline {
			m.removeMember(g, mb)
			expired = true
		}
	}
	if g.state == StateCompletingRebalance && now >= g.syncDeadline {
		for _, id := range append([]string(nil), g.order...) {
			if mb := g.members[id]; mb.syncReq == 0 {
				m.removeMember(g, mb)
			}
		}
		expired = true
	}
	if expired {
		m.afterRemoval(now, g)
	}
	m.maybeCompleteJoin(now, g)
}
