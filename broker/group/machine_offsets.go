package group

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// CommitInput is an OffsetCommit's group part. Generation -1 with an empty
// member id is a simple (standalone) commit, allowed while the group has no
// members.
type CommitInput struct {
	Group      string
	Generation int32
	Member     MemberRef
	Offsets    map[TopicPartition]Offset
}

// Commit validates an OffsetCommit and, when accepted (code 0), emits one
// record per partition. The offsets become visible only when the caller
// applies the records after they are durable (ApplyRecord).
func (m *Machine) Commit(now int64, in CommitInput) int16 {
	if in.Group == "" {
		return errInvalidGroupID
	}
	g := m.groups[in.Group]
	if g == nil {
		if in.Generation >= 0 || in.Member.MemberID != "" {
			return errIllegalGeneration
		}
		g = newGroupState(in.Group, now)
		m.groups[in.Group] = g
	}
	if code := g.commitCheck(now, in); code != 0 {
		return code
	}
	tps := make([]TopicPartition, 0, len(in.Offsets))
	for tp := range in.Offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	for _, tp := range tps {
		o := in.Offsets[tp]
		m.persist(offsetRecord(in.Group, tp, &o))
	}
	return 0
}

func compareTP(a, b TopicPartition) int {
	switch {
	case a.Topic < b.Topic:
		return -1
	case a.Topic > b.Topic:
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

func (g *groupState) commitCheck(now int64, in CommitInput) int16 {
	if in.Generation < 0 && in.Member.MemberID == "" && g.state == StateEmpty {
		return 0
	}
	if g.state == StateCompletingRebalance {
		return errRebalance
	}
	mb, code := g.memberCheck(in.Member)
	switch {
	case code != 0:
		return code
	case in.Generation != g.generation:
		return errIllegalGeneration
	}
	mb.sessionDeadline = now + int64(mb.sessionTimeoutMs)
	return 0
}

// ApplyRecord applies a durable record at logOffset of __consumer_offsets:
// on load, every record; after a commit, its offset records. An older
// record never overwrites a newer one.
func (m *Machine) ApplyRecord(now, logOffset int64, r Record) error {
	switch r.Kind {
	case KindOffset:
		return m.applyOffset(now, logOffset, r)
	case KindGroup:
		return m.applyGroup(now, r)
	}
	return nil
}

func (m *Machine) applyOffset(now, logOffset int64, r Record) error {
	tp := TopicPartition{Topic: r.Topic, Partition: r.Partition}
	g := m.groups[r.Group]
	if r.Value == nil {
		if g != nil && g.offsets[tp].logOffset <= logOffset {
			delete(g.offsets, tp)
		}
		return nil
	}
	o, err := decodeOffsetValue(r.Value)
	if err != nil {
		return err
	}
	o.logOffset = logOffset
	if g == nil {
		g = newGroupState(r.Group, now)
		m.groups[r.Group] = g
	}
	if old, ok := g.offsets[tp]; !ok || old.logOffset <= logOffset {
		g.offsets[tp] = o
	}
	return nil
}

// applyGroup loads a group metadata record: the group resumes in Stable
// (Empty without members) with every session restarting now.
func (m *Machine) applyGroup(now int64, r Record) error {
	if r.Value == nil {
		delete(m.groups, r.Group)
		return nil
	}
	v, err := decodeGroupValue(r.Value)
	if err != nil {
		return err
	}
	g := m.groups[r.Group]
	if g == nil {
		g = newGroupState(r.Group, now)
		m.groups[r.Group] = g
	}
	for _, id := range slices.Clone(g.order) {
		g.dropMember(id)
	}
	g.protocolType, g.generation = v.ProtocolType, v.Generation
	g.protocol, g.leader = derefString(v.Protocol), derefString(v.Leader)
	for _, vm := range v.Members {
		mb := &member{
			id: vm.MemberID, instanceID: derefString(vm.InstanceID), clientID: vm.ClientID, clientHost: vm.ClientHost,
			protocols:        []Protocol{{Name: g.protocol, Metadata: vm.Subscription}},
			sessionTimeoutMs: vm.SessionTimeoutMillis, rebalanceTimeoutMs: max(vm.RebalanceTimeoutMillis, vm.SessionTimeoutMillis),
			assignment: vm.Assignment, sessionDeadline: now + int64(vm.SessionTimeoutMillis),
		}
		g.addMember(mb)
	}
	g.setState(StateEmpty, v.CurrentStateTimestamp)
	if len(g.members) > 0 {
		g.setState(StateStable, now)
	}
	return nil
}

func derefString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// FetchOffsets returns the committed offsets of group (all of them when
// tps is nil). Missing partitions are absent from the map.
func (m *Machine) FetchOffsets(group string, tps []TopicPartition) map[TopicPartition]Offset {
	out := map[TopicPartition]Offset{}
	g := m.groups[group]
	if g == nil {
		return out
	}
	if tps == nil {
		for tp, o := range g.offsets {
			out[tp] = o
		}
		return out
	}
	for _, tp := range tps {
		if o, ok := g.offsets[tp]; ok {
			out[tp] = o
		}
	}
	return out
}

// DeleteGroup deletes an Empty group and its offsets (tombstones).
func (m *Machine) DeleteGroup(now int64, group string) int16 {
	g := m.groups[group]
	switch {
	case group == "":
		return errInvalidGroupID
	case g == nil:
		return errGroupNotFound
	case g.state != StateEmpty:
		return errNonEmpty
	}
	m.removeGroup(g)
	return 0
}

// removeGroup writes tombstones for g's offsets and metadata and forgets it.
func (m *Machine) removeGroup(g *groupState) {
	for _, tp := range sortedTPs(g.offsets) {
		m.persist(offsetRecord(g.id, tp, nil))
	}
	g.setState(StateDead, g.stateSince)
	m.persistGroup(g)
	delete(m.groups, g.id)
}

func sortedTPs(offsets map[TopicPartition]Offset) []TopicPartition {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, compareTP)
	return tps
}

// DeleteOffsets handles OffsetDelete: a group-level code and one code per
// partition (GROUP_SUBSCRIBED_TO_TOPIC for topics a live consumer group
// subscribes to).
func (m *Machine) DeleteOffsets(group string, tps []TopicPartition) (int16, []int16) {
	g := m.groups[group]
	switch {
	case group == "":
		return errInvalidGroupID, nil
	case g == nil:
		return errGroupNotFound, nil
	case g.state != StateEmpty && g.protocolType != "consumer":
		return errNonEmpty, nil
	}
	subscribed := g.subscribedTopics()
	codes := make([]int16, len(tps))
	for i, tp := range tps {
		if subscribed[tp.Topic] {
			codes[i] = errSubscribed
			continue
		}
		if _, ok := g.offsets[tp]; ok {
			delete(g.offsets, tp)
			m.persist(offsetRecord(g.id, tp, nil))
		}
	}
	return 0, codes
}

// subscribedTopics decodes the members' consumer-protocol subscriptions.
func (g *groupState) subscribedTopics() map[string]bool {
	out := map[string]bool{}
	if g.state == StateEmpty || g.protocolType != "consumer" {
		return out
	}
	for _, mb := range g.members {
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(mb.metadataFor(g.protocol)); err != nil {
			continue
		}
		for _, t := range meta.Topics {
			out[t] = true
		}
	}
	return out
}

// ExpireOffsets removes offsets of deleted topics and, for Empty groups,
// offsets older than the retention; an Empty group left without offsets is
// deleted. topicExists reports whether a topic still exists.
func (m *Machine) ExpireOffsets(now int64, topicExists func(string) bool) {
	m.ExpireOffsetsExcept(now, topicExists, nil)
}

// ExpireOffsetsExcept is ExpireOffsets for which groups that active
// reports true (consumer-protocol groups with members, which the Machine
// sees as Empty) keep their offsets of existing topics. active may be nil.
func (m *Machine) ExpireOffsetsExcept(now int64, topicExists, active func(string) bool) {
	for _, id := range m.sortedGroups() {
		g := m.groups[id]
		empty := g.state == StateEmpty && (active == nil || !active(id))
		for _, tp := range sortedTPs(g.offsets) {
			o := g.offsets[tp]
			old := empty && max(g.stateSince, o.CommitTimestamp)+m.cfg.OffsetsRetentionMs <= now
			if old || !topicExists(tp.Topic) {
				delete(g.offsets, tp)
				m.persist(offsetRecord(g.id, tp, nil))
			}
		}
		if empty && len(g.offsets) == 0 && len(g.pending) == 0 && g.stateSince+m.cfg.OffsetsRetentionMs <= now {
			m.removeGroup(g)
		}
	}
}

// Topics lists the topics with committed offsets.
func (m *Machine) Topics() []string {
	seen := map[string]bool{}
	var out []string
	for _, g := range m.groups {
		for tp := range g.offsets {
			if !seen[tp.Topic] {
				seen[tp.Topic] = true
				out = append(out, tp.Topic)
			}
		}
	}
	return out
}

// Describe returns a group's description; ok is false for unknown groups.
func (m *Machine) Describe(group string) (Description, bool) {
	g := m.groups[group]
	if g == nil {
		return Description{Group: group, State: StateDead}, false
	}
	d := Description{Group: group, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation, Leader: g.leader}
	for _, id := range g.order {
		mb := g.members[id]
		md := MemberDescription{MemberID: mb.id, InstanceID: mb.instanceID, ClientID: mb.clientID, ClientHost: mb.clientHost, Assignment: mb.assignment}
		if g.state == StateStable || g.state == StateCompletingRebalance {
			md.Metadata = mb.metadataFor(g.protocol)
		}
		d.Members = append(d.Members, md)
	}
	return d, true
}

// List lists groups (sorted), keeping those whose state is in states when
// states is not empty.
func (m *Machine) List(states []State) []Listed {
	var out []Listed
	for _, id := range m.sortedGroups() {
		g := m.groups[id]
		if len(states) > 0 && !slices.Contains(states, g.state) {
			continue
		}
		out = append(out, Listed{Group: id, ProtocolType: g.protocolType, State: g.state})
	}
	return out
}

// DropGroups forgets (without tombstones) every group for which drop is
// true: the broker stopped leading their offsets partition. Waiting
// requests get NOT_COORDINATOR.
func (m *Machine) DropGroups(drop func(group string) bool, code int16) {
	for _, id := range m.sortedGroups() {
		if !drop(id) {
			continue
		}
		g := m.groups[id]
		for _, mid := range g.order {
			mb := g.members[mid]
			if mb.joinReq != 0 {
				m.respond(Response{Req: mb.joinReq, Join: &JoinResult{Code: code, Generation: -1, MemberID: mid}})
			}
			if mb.syncReq != 0 {
				m.respond(Response{Req: mb.syncReq, Sync: &SyncResult{Code: code}})
			}
		}
		delete(m.groups, id)
		m.dropPending(id)
	}
}

// CommittedOffsets lists every committed offset of every group, sorted by
// group, topic and partition.
func (m *Machine) CommittedOffsets() []GroupOffset {
	var out []GroupOffset
	for _, id := range m.sortedGroups() {
		g := m.groups[id]
		tps := make([]TopicPartition, 0, len(g.offsets))
		for tp := range g.offsets {
			tps = append(tps, tp)
		}
		slices.SortFunc(tps, compareTP)
		for _, tp := range tps {
			o := g.offsets[tp]
			out = append(out, GroupOffset{Group: id, TopicPartition: tp, Offset: o.Offset, CommitTimestamp: o.CommitTimestamp})
		}
	}
	return out
}
