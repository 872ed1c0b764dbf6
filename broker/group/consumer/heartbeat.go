package consumer

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// HeartbeatRequest is a ConsumerGroupHeartbeat request (v0–v1) as Group
// takes it. Pointer and slice fields are nil when the client left them null
// ("unchanged"), as on the wire.
type HeartbeatRequest struct {
	// MemberID: never empty. v1 clients generate it; for v0 joins the
	// handler generates one (a UUID) before calling.
	MemberID    string
	MemberEpoch int32
	// InstanceID (group.instance.id) is read on joins (epoch 0) only: a
	// member's instance id never changes.
	InstanceID         *string
	RackID             *string
	RebalanceTimeoutMs int32 // -1: unchanged; required on joins
	// SubscribedTopicNames: the explicit topic names AND the existing topic
	// names matching SubscribedTopicRegex, resolved by the caller (this
	// package does not evaluate regular expressions). When topics are
	// created or deleted the caller resolves the regex again and sends the
	// names with the member's next heartbeat; a changed set bumps the epoch.
	SubscribedTopicNames []string
	// SubscribedTopicRegex is kept for ConsumerGroupDescribe only.
	SubscribedTopicRegex *string
	// ServerAssignor, when set and non-empty, must name a configured
	// assignor (UNSUPPORTED_ASSIGNOR); the group uses the one most of its
	// members name (Config.Assignors).
	ServerAssignor *string
	// Owned: the partitions the client owns; nil when not sent.
	Owned []TopicPartitions
	// ClientID and ClientHost come from the request header and connection;
	// every heartbeat stores them (as Kafka does).
	ClientID, ClientHost string
}

// HeartbeatResponse is a successful ConsumerGroupHeartbeat response.
type HeartbeatResponse struct {
	MemberID            string
	MemberEpoch         int32
	HeartbeatIntervalMs int32
	// Assignment is the member's assigned partitions, nil when not sent:
	// it is sent on joins, when the request carried its owned partitions
	// (the client may have missed a response), and when it changed.
	Assignment *Assignment
}

// ErrorCode maps an error of Heartbeat to its Kafka error code.
func ErrorCode(err error) int16 {
	for _, c := range []struct {
		err  error
		code *kerr.Error
	}{
		{ErrFencedMemberEpoch, kerr.FencedMemberEpoch},
		{ErrUnknownMemberID, kerr.UnknownMemberID},
		{ErrUnreleasedInstanceID, kerr.UnreleasedInstanceID},
		{ErrGroupMaxSizeReached, kerr.GroupMaxSizeReached},
		{ErrUnsupportedAssignor, kerr.UnsupportedAssignor},
		{ErrStaleMemberEpoch, kerr.StaleMemberEpoch},
		{ErrInvalidRequest, kerr.InvalidRequest},
	} {
		if errors.Is(err, c.err) {
			return c.code.Code
		}
	}
	if err == nil {
		return 0
	}
	return kerr.UnknownServerError.Code
}

// Heartbeat applies one ConsumerGroupHeartbeat at logical time nowMs
// (doc.go, "Group"). On error the group is unchanged and no record is
// added, except ErrFencedMemberEpoch from Reconcile for a member in an
// unknown state (its metadata changes are kept).
func (g *Group) Heartbeat(req HeartbeatRequest, nowMs int64) (HeartbeatResponse, error) {
	owned, err := g.validate(req)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	m := g.members[req.MemberID]
	var stored *StoredMember
	if m != nil {
		stored = &StoredMember{Epoch: m.state.Epoch, PreviousEpoch: m.state.PreviousEpoch,
			InstanceID: m.sub.InstanceID, Assigned: m.state.Assigned}
	}
	action, err := CheckEpoch(stored, req.MemberEpoch, owned)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	switch action {
	case ActionJoin:
		return g.join(req, owned, nowMs)
	case ActionLeave:
		g.removeMember(req.MemberID)
		g.bumpEpoch()
		return g.response(req.MemberID, LeaveEpoch, nil), nil
	case ActionStaticLeave:
		g.staticLeave(m, nowMs)
		return g.response(req.MemberID, StaticLeaveEpoch, nil), nil
	}
	m.sessionDeadline = nowMs + g.cfg.SessionTimeoutMs
	if g.applyRequest(req.MemberID, m, req, false) {
		g.bumpEpoch()
	}
	return g.reconcile(req.MemberID, m, owned, nowMs, false)
}

// validate checks what Kafka checks before touching the group and returns
// the request's owned partitions as an Assignment (nil when not sent).
func (g *Group) validate(req HeartbeatRequest) (*Assignment, error) {
	bad := func(why string) (*Assignment, error) { return nil, fmt.Errorf("%w: %s", ErrInvalidRequest, why) }
	switch {
	case req.MemberID == "":
		return bad("empty member id")
	case req.RebalanceTimeoutMs < -1:
		return bad("negative rebalance timeout")
	case req.ServerAssignor != nil && *req.ServerAssignor != "":
		if _, ok := g.cfg.assignorNamed(*req.ServerAssignor); !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnsupportedAssignor, *req.ServerAssignor)
		}
	}
	var owned *Assignment
	if req.Owned != nil {
		var tps []TopicPartition
		for _, t := range req.Owned {
			for _, p := range t.Partitions {
				if p < 0 {
					return bad("negative partition")
				}
				tps = append(tps, TopicPartition{t.Topic, p})
			}
		}
		a := NewAssignment(tps...)
		owned = &a
	}
	if req.MemberEpoch != JoinEpoch {
		return owned, nil
	}
	switch {
	case req.RebalanceTimeoutMs == -1:
		return bad("RebalanceTimeoutMs must be set when joining")
	case req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil:
		return bad("a subscription must be set when joining")
	case owned != nil && owned.Len() > 0:
		return bad("owned partitions must be empty when joining")
	}
	return owned, nil
}

// join handles epoch 0: a new member, a known member starting afresh, or a
// static member taking over its instance id's assignment.
func (g *Group) join(req HeartbeatRequest, owned *Assignment, nowMs int64) (HeartbeatResponse, error) {
	instance := deref(req.InstanceID)
	if holderID, ok := g.static[instance]; instance != "" && ok && holderID != req.MemberID {
		holder := g.members[holderID]
		if !holder.staticLeft() {
			return HeartbeatResponse{}, fmt.Errorf("%w: %q by %s", ErrUnreleasedInstanceID, instance, holderID)
		}
		if g.members[req.MemberID] != nil {
			return HeartbeatResponse{}, fmt.Errorf("%w: member id already in the group", ErrInvalidRequest)
		}
		return g.replaceStatic(holderID, req, owned, nowMs)
	}
	m := g.members[req.MemberID]
	isNew := m == nil
	if isNew {
		if g.cfg.MaxSize > 0 && len(g.members) >= g.cfg.MaxSize {
			return HeartbeatResponse{}, ErrGroupMaxSizeReached
		}
		m = &member{state: NewMember(), sub: MemberSubscription{MemberID: req.MemberID, InstanceID: instance}}
		g.members[req.MemberID] = m
		if instance != "" {
			g.static[instance] = req.MemberID
		}
	} else {
		// A known member rejoining has dropped all its partitions (the
		// client does so before rejoining): release them and start afresh.
		g.owners.Remove(req.MemberID, m.state)
		m.state, m.assignedAt = NewMember(), nil
	}
	return g.joined(req.MemberID, m, req, owned, nowMs, isNew)
}

// joined: the common end of joins; a new member always bumps the epoch.
func (g *Group) joined(id string, m *member, req HeartbeatRequest, owned *Assignment, nowMs int64,
	isNew bool) (HeartbeatResponse, error) {
	m.sessionDeadline = nowMs + g.cfg.SessionTimeoutMs
	if g.applyRequest(id, m, req, isNew) {
		g.bumpEpoch()
	}
	return g.reconcile(id, m, owned, nowMs, true)
}

// replaceStatic: a new member id for an instance id whose member left with
// epoch -2. The new member takes over the old one's target, assigned
// partitions and epoch (KIP-848 "Static Membership"), so nothing moves;
// the old member id is removed. The epoch is bumped only if the new
// member's subscription differs.
func (g *Group) replaceStatic(oldID string, req HeartbeatRequest, owned *Assignment, nowMs int64) (HeartbeatResponse, error) {
	old := g.members[oldID]
	target := g.target[oldID]
	state := old.state
	state.Epoch = state.PreviousEpoch // the epoch it left with
	sub := old.sub
	g.removeMember(oldID)
	sub.MemberID = req.MemberID
	m := &member{sub: sub, clientID: old.clientID, clientHost: old.clientHost,
		rebalanceTimeoutMs: old.rebalanceTimeoutMs, serverAssignor: old.serverAssignor, state: state,
		assignedAt: assignedSince(nil, MemberState{}, state)}
	g.members[req.MemberID] = m
	g.static[sub.InstanceID] = req.MemberID
	g.target[req.MemberID] = target
	g.owners.Update(req.MemberID, MemberState{}, state)
	g.persistMember(req.MemberID, m)
	g.persist(ConsumerGroupTargetAssignmentMemberValue{MemberID: req.MemberID, TopicPartitions: target.List()})
	g.persistState(req.MemberID, state)
	return g.joined(req.MemberID, m, req, owned, nowMs, false)
}

// staticLeave: the member keeps its assigned partitions for its instance id
// until its session expires or the instance rejoins; it releases those
// pending revocation (the client stopped consuming). Its epoch becomes -2,
// the epoch to resume with is kept as the previous one.
func (g *Group) staticLeave(m *member, nowMs int64) {
	id := m.sub.MemberID
	if m.staticLeft() {
		return
	}
	next := MemberState{State: StateStable, Epoch: StaticLeaveEpoch, PreviousEpoch: m.state.Epoch,
		Assigned: m.state.Assigned.Clone(), PendingRevocation: Assignment{}}
	g.owners.Update(id, m.state, next)
	m.assignedAt = assignedSince(m.assignedAt, m.state, next)
	m.state = next
	m.rebalanceDeadline = 0
	m.sessionDeadline = nowMs + g.cfg.SessionTimeoutMs
	g.persistState(id, next)
}

// applyRequest stores the request's non-null fields in the member,
// records its metadata if any changed, and reports whether its topic
// subscription changed (the epoch must then be bumped); a new member's
// always has (the membership changed even if it subscribes to nothing).
func (g *Group) applyRequest(id string, m *member, req HeartbeatRequest, isNew bool) (subscriptionChanged bool) {
	before := *m
	if req.RackID != nil {
		m.sub.Rack = *req.RackID
	}
	if req.RebalanceTimeoutMs >= 0 {
		m.rebalanceTimeoutMs = req.RebalanceTimeoutMs
	}
	if req.SubscribedTopicRegex != nil {
		m.sub.Regex = *req.SubscribedTopicRegex
	}
	if req.ServerAssignor != nil {
		m.serverAssignor = *req.ServerAssignor
	}
	m.clientID, m.clientHost = req.ClientID, req.ClientHost
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		m.sub.Topics = slices.Compact(names)
	}
	// A new assignor choice may change the group's assignor: as a
	// subscription change, it gets a new epoch and target.
	subscriptionChanged = isNew || !slices.Equal(before.sub.Topics, m.sub.Topics) ||
		before.serverAssignor != m.serverAssignor
	if subscriptionChanged || !sameMetadata(before, *m) {
		g.persistMember(id, m)
	}
	return subscriptionChanged
}

func sameMetadata(a, b member) bool {
	return a.sub.InstanceID == b.sub.InstanceID && a.sub.Rack == b.sub.Rack && a.sub.Regex == b.sub.Regex &&
		slices.Equal(a.sub.Topics, b.sub.Topics) && a.clientID == b.clientID && a.clientHost == b.clientHost &&
		a.rebalanceTimeoutMs == b.rebalanceTimeoutMs && a.serverAssignor == b.serverAssignor
}

// reconcile moves the member towards its target, arms or clears its
// rebalance deadline, records a changed state and builds the response.
func (g *Group) reconcile(id string, m *member, owned *Assignment, nowMs int64, join bool) (HeartbeatResponse, error) {
	next, err := Reconcile(m.state, g.target[id], g.assignmentEpoch, g.owners.OwnedByOthers(id), owned)
	if err != nil {
		return HeartbeatResponse{}, err
	}
	changed := !next.Assigned.Equal(m.state.Assigned)
	if next.State != StateUnrevokedPartitions {
		m.rebalanceDeadline = 0
	} else if m.state.State != StateUnrevokedPartitions || m.state.Epoch != next.Epoch {
		// A new revocation: the member has one rebalance timeout for it.
		m.rebalanceDeadline = nowMs + int64(m.rebalanceTimeoutMs)
	}
	if !sameState(m.state, next) {
		m.assignedAt = assignedSince(m.assignedAt, m.state, next)
		g.owners.Update(id, m.state, next)
		g.persistState(id, next)
		m.state = next
	}
	var assignment *Assignment
	if join || owned != nil || changed {
		a := next.Assigned.Clone()
		assignment = &a
	}
	return g.response(id, next.Epoch, assignment), nil
}

func sameState(a, b MemberState) bool {
	return a.State == b.State && a.Epoch == b.Epoch && a.PreviousEpoch == b.PreviousEpoch &&
		a.Assigned.Equal(b.Assigned) && a.PendingRevocation.Equal(b.PendingRevocation)
}

func (g *Group) response(id string, epoch int32, assignment *Assignment) HeartbeatResponse {
	return HeartbeatResponse{MemberID: id, MemberEpoch: epoch, HeartbeatIntervalMs: g.cfg.HeartbeatIntervalMs,
		Assignment: assignment}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
