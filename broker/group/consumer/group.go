package consumer

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Errors of Group beyond CheckEpoch's; ErrorCode maps all of them to Kafka
// codes at the protocol edge.
var (
	ErrUnreleasedInstanceID = errors.New("consumer: instance id held by an active member")
	ErrGroupMaxSizeReached  = errors.New("consumer: group max size reached")
	ErrUnsupportedAssignor  = errors.New("consumer: unsupported server assignor")
	ErrInvalidConfig        = errors.New("consumer: invalid config")
	ErrStaleMemberEpoch     = errors.New("consumer: stale member epoch")
)

// Config is one group's settings (Kafka's group.consumer.* broker configs).
type Config struct {
	// Assignors are the server-side assignors members may name
	// (group.consumer.assignors); the first is the group's default. Empty
	// means Kafka's default, uniform then range. The group uses the one
	// most of its members name (ties: the earlier in this list), or the
	// default when none names one.
	Assignors []Assignor
	// SessionTimeoutMs: a member that has not heartbeaten for this long is
	// removed (group.consumer.session.timeout.ms). Default 45000.
	SessionTimeoutMs int64
	// HeartbeatIntervalMs: told to members in every response
	// (group.consumer.heartbeat.interval.ms). Default 5000.
	HeartbeatIntervalMs int32
	// MaxSize: the most members the group may have, static members that
	// left with epoch -2 included (group.consumer.max.size); 0 = no limit.
	MaxSize int
}

// WithDefaults fills the zero fields with their defaults.
func (c Config) WithDefaults() Config {
	if len(c.Assignors) == 0 {
		c.Assignors = []Assignor{Uniform{}, Range{}}
	}
	if c.SessionTimeoutMs == 0 {
		c.SessionTimeoutMs = 45000
	}
	if c.HeartbeatIntervalMs == 0 {
		c.HeartbeatIntervalMs = 5000
	}
	return c
}

// Validate reports a config NewGroup cannot use (after WithDefaults).
func (c Config) Validate() error {
	switch {
	case c.SessionTimeoutMs <= 0, c.HeartbeatIntervalMs <= 0:
		return fmt.Errorf("%w: timeouts must be positive", ErrInvalidConfig)
	case int64(c.HeartbeatIntervalMs) >= c.SessionTimeoutMs:
		return fmt.Errorf("%w: heartbeat interval must be below the session timeout", ErrInvalidConfig)
	case c.MaxSize < 0:
		return fmt.Errorf("%w: negative max size", ErrInvalidConfig)
	}
	seen := map[string]bool{}
	for _, a := range c.Assignors {
		if a == nil || a.Name() == "" || seen[a.Name()] {
			return fmt.Errorf("%w: assignors must be named and distinct", ErrInvalidConfig)
		}
		seen[a.Name()] = true
	}
	return nil
}

// assignorNamed is the configured assignor of that name.
func (c Config) assignorNamed(name string) (Assignor, bool) {
	for _, a := range c.Assignors {
		if a.Name() == name {
			return a, true
		}
	}
	return nil, false
}

// member is one member of a Group: what its heartbeats told (persisted in
// its ConsumerGroupMemberMetadataValue), its reconciliation state
// (ConsumerGroupCurrentMemberAssignmentValue) and its deadlines (logical
// time in ms, never persisted: Replay re-arms them).
type member struct {
	sub                MemberSubscription // Topics sorted, duplicate-free
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	serverAssignor     string
	// state.Epoch is StaticLeaveEpoch while a static member is away; its
	// epoch to resume with is then state.PreviousEpoch (as Kafka stores it).
	state MemberState
	// sessionDeadline: removed by Tick at or after it.
	sessionDeadline int64
	// rebalanceDeadline: fenced by Tick at or after it while in
	// UNREVOKED_PARTITIONS; 0 when not revoking.
	rebalanceDeadline int64
	// assignedAt: for each partition the member owns, the epoch at which
	// it got it (KIP-1251, commit.go); derived, never persisted.
	assignedAt map[TopicPartition]int32
}

func (m *member) staticLeft() bool { return m.state.Epoch == StaticLeaveEpoch }

// Group is one consumer-protocol group: the pure state machine behind
// ConsumerGroupHeartbeat and ConsumerGroupDescribe. It is not safe for
// concurrent use: its owner (the coordinator) serialises calls.
//
// Invariants, after every exported call:
//   - assignmentEpoch == epoch: the target is recomputed synchronously
//     whenever the epoch is bumped;
//   - target has exactly one entry per member;
//   - owners == NewOwners(members' states): no partition has two owners;
//   - static maps each instance id of a member to that member's id.
type Group struct {
	cfg             Config
	id              string
	epoch           int32 // group epoch
	assignmentEpoch int32 // the group epoch target was computed for
	topics          map[TopicID]TopicMetadata
	members         map[string]*member
	target          map[string]Assignment
	owners          Owners
	static          map[string]string // instance id → member id
	records         []Record          // not yet taken by TakeRecords
}

// NewGroup is an empty group (epoch 0) with cfg's defaults filled in.
func NewGroup(id string, cfg Config) (*Group, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Group{cfg: cfg, id: id, topics: map[TopicID]TopicMetadata{}, members: map[string]*member{},
		target: map[string]Assignment{}, owners: Owners{}, static: map[string]string{}}, nil
}

// ID is the group id.
func (g *Group) ID() string { return g.id }

// Epoch is the group epoch.
func (g *Group) Epoch() int32 { return g.epoch }

// Len is the number of members, static members away (epoch -2) included.
func (g *Group) Len() int { return len(g.members) }

// TakeRecords returns the records describing every change since the last
// call, in order, and forgets them. The coordinator persists them before
// sending the responses of the same calls, so that a response never
// reveals state a restart would lose.
func (g *Group) TakeRecords() []Record {
	r := g.records
	g.records = nil
	return r
}

func (g *Group) persist(r Record) { g.records = append(g.records, r) }

// SetTopics replaces the topics' metadata (all topics the caller knows, or
// at least all subscribed ones). A change to a subscribed topic (created,
// deleted, more partitions) bumps the group epoch and recomputes the
// target: members then reconcile towards it on their next heartbeats.
func (g *Group) SetTopics(topics map[TopicID]TopicMetadata) {
	before := g.subscribedMetadata()
	g.topics = maps.Clone(topics)
	if !slices.Equal(before, g.subscribedMetadata()) {
		g.bumpEpoch()
	}
}

// subscribedMetadata: the metadata of the topics some member subscribes
// to, sorted by topic id; the assignors' whole input besides the members.
func (g *Group) subscribedMetadata() []TopicMetadata {
	names := map[string]bool{}
	for _, m := range g.members {
		for _, n := range m.sub.Topics {
			names[n] = true
		}
	}
	var out []TopicMetadata
	for _, md := range g.topics {
		if names[md.Name] {
			out = append(out, md)
		}
	}
	slices.SortFunc(out, func(a, b TopicMetadata) int { return a.ID.Compare(b.ID) })
	return out
}

// bumpEpoch: the group's metadata changed; a new epoch, its subscribed
// topic metadata and the target computed for it. The partition metadata is
// written on every bump (not only when it changed) so that Replay needs no
// history of it: bumps are rare next to heartbeats.
func (g *Group) bumpEpoch() {
	g.epoch++
	g.persist(ConsumerGroupMetadataValue{Epoch: g.epoch})
	g.persist(ConsumerGroupPartitionMetadataValue{Topics: g.subscribedMetadata()})
	g.computeTarget()
}

// computeTarget runs the assignor, each member starting from its current
// target for stickiness, and records the members whose target changed.
func (g *Group) computeTarget() {
	specs := make([]MemberSpec, 0, len(g.members))
	for _, id := range g.memberIDs() {
		specs = append(specs, SpecFor(g.members[id].sub, g.topics, g.target[id]))
	}
	next := g.assignor().Assign(specs, g.topics)
	for _, id := range g.memberIDs() {
		old, had := g.target[id]
		if !had || !old.Equal(next[id]) {
			g.persist(ConsumerGroupTargetAssignmentMemberValue{MemberID: id, TopicPartitions: next[id].List()})
		}
	}
	g.target = next
	g.assignmentEpoch = g.epoch
	g.persist(ConsumerGroupTargetAssignmentMetadataValue{AssignmentEpoch: g.epoch})
}

// assignor is the one most members name (Kafka's preferred server
// assignor); ties go to the earlier configured one; none named: the
// default (the first configured).
func (g *Group) assignor() Assignor {
	votes := map[string]int{}
	for _, m := range g.members {
		if m.serverAssignor != "" {
			votes[m.serverAssignor]++
		}
	}
	best := g.cfg.Assignors[0]
	bestVotes := 0
	for _, a := range g.cfg.Assignors {
		if votes[a.Name()] > bestVotes {
			best, bestVotes = a, votes[a.Name()]
		}
	}
	return best
}

func (g *Group) memberIDs() []string { return slices.Sorted(maps.Keys(g.members)) }

// removeMember drops a member and releases its partitions; the caller bumps
// the epoch afterwards (once, when removing several).
func (g *Group) removeMember(id string) {
	m := g.members[id]
	g.owners.Remove(id, m.state)
	delete(g.members, id)
	delete(g.target, id)
	if m.sub.InstanceID != "" && g.static[m.sub.InstanceID] == id {
		delete(g.static, m.sub.InstanceID)
	}
	g.persist(ConsumerGroupCurrentMemberAssignmentValue{MemberID: id, Tombstone: true})
	g.persist(ConsumerGroupTargetAssignmentMemberValue{MemberID: id, Tombstone: true})
	g.persist(ConsumerGroupMemberMetadataValue{MemberID: id, Tombstone: true})
}

// Tick advances logical time: members whose session expired, and members
// still in UNREVOKED_PARTITIONS past their rebalance timeout, are removed
// (their partitions go to others through a new epoch's target). It returns
// the removed member ids, sorted; their records are in TakeRecords.
func (g *Group) Tick(nowMs int64) []string {
	var removed []string
	for _, id := range g.memberIDs() {
		m := g.members[id]
		revoking := m.state.State == StateUnrevokedPartitions && m.rebalanceDeadline > 0
		if nowMs >= m.sessionDeadline || (revoking && nowMs >= m.rebalanceDeadline) {
			g.removeMember(id)
			removed = append(removed, id)
		}
	}
	if len(removed) > 0 {
		g.bumpEpoch()
	}
	return removed
}

// NextDeadline is the earliest time at which Tick may remove a member
// (false when the group is empty), for the coordinator's timer.
func (g *Group) NextDeadline() (int64, bool) {
	var next int64
	found := false
	for _, m := range g.members {
		for _, d := range []int64{m.sessionDeadline, m.rebalanceDeadline} {
			if d > 0 && (!found || d < next) {
				next, found = d, true
			}
		}
	}
	return next, found
}
