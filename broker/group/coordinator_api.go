package group

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
)

// call runs one machine step for group and waits for the delayed answer
// addressed to its request id. code != 0 when the group is not served here
// or ctx ended first (REBALANCE_IN_PROGRESS then, so the client rejoins).
func (c *Coordinator) call(ctx context.Context, group string, step func(m *Machine, now int64, req uint64)) (Response, int16) {
	c.mu.Lock()
	if code := c.statusLocked(group); code != 0 {
		c.mu.Unlock()
		return Response{}, code
	}
	c.mu.nextReq++
	req := c.mu.nextReq
	ch := make(chan Response, 1)
	c.mu.waiters[req] = ch
	step(c.mu.machine, c.nowMs(), req)
	d := c.flushLocked()
	c.mu.Unlock()
	c.complete(d)
	select {
	case r := <-ch:
		return r, 0
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.mu.waiters, req)
		c.mu.Unlock()
		return Response{}, kerr.RebalanceInProgress.Code
	}
}

// run runs a synchronous machine step for group, persists its records and
// returns the persistence error (nil when nothing was written).
func (c *Coordinator) run(group string, step func(m *Machine, now int64)) (int16, error) {
	c.mu.Lock()
	if code := c.statusLocked(group); code != 0 {
		c.mu.Unlock()
		return code, nil
	}
	step(c.mu.machine, c.nowMs())
	d := c.flushLocked()
	c.mu.Unlock()
	return 0, c.complete(d)
}

// Join handles JoinGroup; it returns when the member's join completes.
func (c *Coordinator) Join(ctx context.Context, in JoinInput) JoinResult {
	if code := c.classicJoinCheck(in.Group); code != 0 {
		return JoinResult{Code: code, Generation: -1, MemberID: in.MemberID}
	}
	r, code := c.call(ctx, in.Group, func(m *Machine, now int64, req uint64) { m.Join(now, req, in) })
	if code != 0 || r.Join == nil {
		return JoinResult{Code: max(code, kerr.UnknownServerError.Code), Generation: -1, MemberID: in.MemberID}
	}
	return *r.Join
}

// Sync handles SyncGroup; it returns once the leader's assignment is
// persisted (or the rebalance failed).
func (c *Coordinator) Sync(ctx context.Context, in SyncInput) SyncResult {
	r, code := c.call(ctx, in.Group, func(m *Machine, now int64, req uint64) { m.Sync(now, req, in) })
	if code != 0 || r.Sync == nil {
		return SyncResult{Code: max(code, kerr.UnknownServerError.Code)}
	}
	return *r.Sync
}

// Heartbeat handles Heartbeat.
func (c *Coordinator) Heartbeat(group string, generation int32, ref MemberRef) int16 {
	var hb int16
	code, _ := c.run(group, func(m *Machine, now int64) { hb = m.Heartbeat(now, group, generation, ref) })
	return max(code, hb)
}

// Leave handles LeaveGroup: a group-level code, else one code per member.
func (c *Coordinator) Leave(group string, refs []MemberRef) (int16, []int16) {
	var codes []int16
	code, _ := c.run(group, func(m *Machine, now int64) { codes = m.Leave(now, group, refs) })
	return code, codes
}

// Commit handles an OffsetCommit's group part: it returns once the offsets
// are durable (0) or with the error code for every partition.
func (c *Coordinator) Commit(in CommitInput) int16 {
	var commit int16
	var prev map[TopicPartition]Offset
	code, err := c.run(in.Group, func(m *Machine, now int64) {
		checked, cc := c.consumerCommitCheckLocked(in) // run holds mu
		if commit = cc; cc == 0 {
			prev = m.FetchOffsets(in.Group, committedPartitions(in))
			commit = m.Commit(now, checked)
		}
	})
	switch {
	case code != 0:
		return code
	case commit != 0:
		return commit
	case err != nil:
		c.log.Warn("offset commit not persisted", "group", in.Group, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	c.checkSkipped(in, prev)
	return 0
}

func committedPartitions(in CommitInput) []TopicPartition {
	tps := make([]TopicPartition, 0, len(in.Offsets))
	for tp := range in.Offsets {
		tps = append(tps, tp)
	}
	return tps
}

// CommittedOffsets lists every committed offset of the groups coordinated
// here, of both protocols, sorted by group, topic and partition.
func (c *Coordinator) CommittedOffsets() []GroupOffset {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.machine.CommittedOffsets()
}

// FetchOffsets returns committed offsets (all when tps is nil).
func (c *Coordinator) FetchOffsets(group string, tps []TopicPartition) (map[TopicPartition]Offset, int16) {
	return c.FetchOffsetsAs(group, tps, nil, -1)
}

// FetchOffsetsAs is FetchOffsets for a member (OffsetFetch v9): in a
// consumer-protocol group, a member id or a non-negative epoch must name a
// current member (UNKNOWN_MEMBER_ID) at its epoch (STALE_MEMBER_EPOCH), as
// Kafka's ConsumerGroup.validateOffsetFetch; no member id with epoch -1
// (admin tools) is always allowed. Classic groups do not check.
func (c *Coordinator) FetchOffsetsAs(group string, tps []TopicPartition, memberID *string, memberEpoch int32) (map[TopicPartition]Offset, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.statusLocked(group); code != 0 {
		return nil, code
	}
	if code := c.consumerFetchCheckLocked(group, memberID, memberEpoch); code != 0 {
		return nil, code
	}
	return c.mu.machine.FetchOffsets(group, tps), 0
}

// Describe handles DescribeGroups for one group.
func (c *Coordinator) Describe(group string) (Description, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if code := c.statusLocked(group); code != 0 {
		return Description{Group: group, State: StateDead}, code
	}
	d, _ := c.mu.machine.Describe(group)
	return d, 0
}

// List handles ListGroups: COORDINATOR_LOAD_IN_PROGRESS while a led
// partition is loading.
func (c *Coordinator) List(states []State) ([]Listed, int16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions.LoadingLocked() {
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return c.mu.machine.List(states), 0
}

// DeleteGroup handles DeleteGroups for one group.
func (c *Coordinator) DeleteGroup(group string) int16 {
	var del int16
	var consumerDeleted bool
	code, err := c.run(group, func(m *Machine, now int64) {
		if consumerDeleted, del = c.deleteConsumerLocked(group); del != 0 { // run holds mu
			return
		}
		del = m.DeleteGroup(now, group)
		if consumerDeleted && del == kerr.GroupIDNotFound.Code {
			del = 0 // the consumer group had no offsets
		}
	})
	switch {
	case code != 0:
		return code
	case del == 0 && err != nil:
		return kerr.CoordinatorNotAvailable.Code
	}
	return del
}

// DeleteOffsets handles OffsetDelete.
func (c *Coordinator) DeleteOffsets(group string, tps []TopicPartition) (int16, []int16) {
	var top int16
	var codes []int16
	code, err := c.run(group, func(m *Machine, now int64) { top, codes = m.DeleteOffsets(group, tps) })
	switch {
	case code != 0:
		return code, nil
	case top == 0 && err != nil:
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	return top, codes
}

// TopicDeleted removes the committed offsets of a deleted topic, in the
// background (the caller may hold locks that come before the
// coordinator's).
func (c *Coordinator) TopicDeleted(topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.partitions.ClosedLocked() {
		return
	}
	c.loops.Go(func() { c.expire(topic) }) // under mu: Close cannot be waiting yet
}

// classicJoinCheck: 0 when a classic JoinGroup may proceed (see
// classicJoinCheckLocked).
func (c *Coordinator) classicJoinCheck(group string) int16 {
	c.mu.Lock()
	if c.statusLocked(group) != 0 {
		c.mu.Unlock()
		return 0 // call answers it
	}
	code := c.classicJoinCheckLocked(group)
	d := c.flushLocked()
	c.mu.Unlock()
	if err := c.complete(d); err != nil && code == 0 {
		return kerr.CoordinatorNotAvailable.Code
	}
	return code
}
