package group

import (
	"bytes"
	"slices"
	"sort"
)

// MachineConfig is the machine's configuration, in milliseconds.
type MachineConfig struct {
	InitialRebalanceDelayMs                  int64
	MinSessionTimeoutMs, MaxSessionTimeoutMs int32
	OffsetsRetentionMs                       int64
	MaxGroupSize                             int // 0: unlimited
	// NewMemberID makes a member id that was never used before
	// (clientID or group.instance.id, a dash, a unique suffix).
	NewMemberID func(prefix string) string
}

// Machine is every group this coordinator serves, as a pure state machine
// (doc.go). Not safe for concurrent use: the Coordinator serialises calls.
type Machine struct {
	cfg    MachineConfig
	groups map[string]*groupState
	// out collects responses and records until Ready drains them.
	out Ready
	// pending holds transactional offset commits awaiting their marker
	// (machine_txn.go); nil until the first one.
	pending pendingTxns
}

// Ready is what a step produced: records to persist, then responses to
// deliver once they are durable.
type Ready struct {
	Records   []Record
	Responses []Response
}

// NewMachine returns an empty machine.
func NewMachine(cfg MachineConfig) *Machine {
	return &Machine{cfg: cfg, groups: map[string]*groupState{}}
}

// Ready drains the outputs accumulated since the last call.
func (m *Machine) Ready() Ready {
	r := m.out
	m.out = Ready{}
	return r
}

func (m *Machine) respond(r Response)         { m.out.Responses = append(m.out.Responses, r) }
func (m *Machine) persist(r Record)           { m.out.Records = append(m.out.Records, r) }
func (m *Machine) persistGroup(g *groupState) { m.persist(groupRecord(g)) }

// member is one group member. Its pending join/sync request ids are 0 when
// none is held.
type member struct {
	id, instanceID, clientID, clientHost string
	protocols                            []Protocol
	sessionTimeoutMs, rebalanceTimeoutMs int32
	assignment                           []byte
	joinReq, syncReq                     uint64
	// sessionDeadline: the member expires at this time unless it waits for
	// a join or sync response.
	sessionDeadline int64
}

func (mb *member) metadataFor(protocol string) []byte {
	for _, p := range mb.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

func (mb *member) supports(name string) bool {
	return slices.ContainsFunc(mb.protocols, func(p Protocol) bool { return p.Name == name })
}

func sameProtocols(a, b []Protocol) bool {
	return slices.EqualFunc(a, b, func(x, y Protocol) bool { return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata) })
}

// groupState is one group.
type groupState struct {
	id                     string
	state                  State
	stateSince             int64 // ms, when state was entered
	protocolType, protocol string
	generation             int32
	leader                 string
	members                map[string]*member
	order                  []string          // member ids in join order
	instances              map[string]string // group.instance.id -> member id
	pending                map[string]int64  // KIP-394 member ids not yet joined -> deadline
	// joinDeadline ends PreparingRebalance; while initialPhase, joins push
	// it out by the initial delay, up to initialLimit.
	joinDeadline, initialLimit int64
	initialPhase               bool
	syncDeadline               int64 // ends CompletingRebalance
	offsets                    map[TopicPartition]Offset
}

func newGroupState(id string, now int64) *groupState {
	return &groupState{
		id: id, state: StateEmpty, stateSince: now, members: map[string]*member{},
		instances: map[string]string{}, pending: map[string]int64{}, offsets: map[TopicPartition]Offset{},
	}
}

func (g *groupState) setState(s State, now int64) {
	g.state, g.stateSince = s, now
}

func (g *groupState) addMember(mb *member) {
	g.members[mb.id] = mb
	g.order = append(g.order, mb.id)
	if mb.instanceID != "" {
		g.instances[mb.instanceID] = mb.id
	}
}

func (g *groupState) dropMember(id string) {
	mb := g.members[id]
	if mb == nil {
		return
	}
	delete(g.members, id)
	g.order = slices.DeleteFunc(g.order, func(x string) bool { return x == id })
	if mb.instanceID != "" && g.instances[mb.instanceID] == id {
		delete(g.instances, mb.instanceID)
	}
	if g.leader == id {
		g.leader = ""
	}
}

// renameMember gives a static member a new id (a restarted instance).
func (g *groupState) renameMember(oldID, newID string) *member {
	mb := g.members[oldID]
	delete(g.members, oldID)
	mb.id = newID
	g.members[newID] = mb
	g.order[slices.Index(g.order, oldID)] = newID
	g.instances[mb.instanceID] = newID
	if g.leader == oldID {
		g.leader = newID
	}
	return mb
}

// candidateProtocols are the protocols every member supports, in the first
// member's order of preference.
func (g *groupState) candidateProtocols() []string {
	if len(g.order) == 0 {
		return nil
	}
	var out []string
	for _, p := range g.members[g.order[0]].protocols {
		ok := true
		for _, id := range g.order[1:] {
			ok = ok && g.members[id].supports(p.Name)
		}
		if ok {
			out = append(out, p.Name)
		}
	}
	return out
}

// selectProtocol: each member votes for its most preferred candidate; the
// most votes win, ties going to the first member's preference.
func (g *groupState) selectProtocol() string {
	cands := g.candidateProtocols()
	votes := map[string]int{}
	for _, id := range g.order {
		for _, p := range g.members[id].protocols {
			if slices.Contains(cands, p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best := ""
	for _, c := range cands {
		if best == "" || votes[c] > votes[best] {
			best = c
		}
	}
	return best
}

// compatible reports whether a joining member's protocols fit the group.
func (g *groupState) compatible(protocolType string, protocols []Protocol) bool {
	if protocolType == "" || len(protocols) == 0 {
		return false
	}
	if len(g.members) == 0 {
		return true
	}
	if protocolType != g.protocolType {
		return false
	}
	cands := g.candidateProtocols()
	return slices.ContainsFunc(protocols, func(p Protocol) bool { return slices.Contains(cands, p.Name) })
}

func (g *groupState) maxRebalanceTimeout() int64 {
	var mx int32
	for _, mb := range g.members {
		mx = max(mx, mb.rebalanceTimeoutMs)
	}
	return int64(mx)
}

// memberCheck validates a member reference: UNKNOWN_MEMBER_ID, or
// FENCED_INSTANCE_ID when the instance now belongs to another member id.
func (g *groupState) memberCheck(ref MemberRef) (*member, int16) {
	if ref.InstanceID != "" {
		if id, ok := g.instances[ref.InstanceID]; ok && id != ref.MemberID {
			return nil, errFenced
		}
	}
	mb := g.members[ref.MemberID]
	if mb == nil {
		return nil, errUnknownMember
	}
	if ref.InstanceID != "" && mb.instanceID != ref.InstanceID {
		return nil, errFenced
	}
	return mb, 0
}

// sortedGroups lists group ids in order (deterministic outputs).
func (m *Machine) sortedGroups() []string {
	ids := make([]string, 0, len(m.groups))
	for id := range m.groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
